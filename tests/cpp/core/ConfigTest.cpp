// Config: the settings table, parsing of environment variables (size suffixes, booleans,
// choices), and errors that name the variable, the value, the allowed range and the default
// kept; setters refuse bad values with the same clarity.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <set>
#include <string>

#include "Config.h"

namespace torch_mspti::test {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Sets environment variables for one test and removes them afterwards.
class ConfigTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const auto& v : set_) unsetenv(v.c_str());
  }
  void env(const std::string& name, const std::string& value) {
    setenv(name.c_str(), value.c_str(), 1);
    set_.insert(name);
  }
  std::set<std::string> set_;
};

TEST(ParseSize, SuffixesAndErrors) {
  EXPECT_EQ(parseSize("0"), 0);
  EXPECT_EQ(parseSize("4096"), 4096);
  EXPECT_EQ(parseSize("64K"), 64 << 10);
  EXPECT_EQ(parseSize("64k"), 64 << 10);
  EXPECT_EQ(parseSize("8M"), 8 << 20);
  EXPECT_EQ(parseSize("8MiB"), 8 << 20);
  EXPECT_EQ(parseSize("1G"), int64_t{1} << 30);
  EXPECT_EQ(parseSize("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(parseSize("-5"), -5);
  for (const char* bad : {"", "abc", "M", "8MB", "8 M", "0x10", "1.5M", "-", "+3", "99999999999999999999"})
    EXPECT_FALSE(parseSize(bad).has_value()) << bad;
  EXPECT_FALSE(parseSize("9000000000G").has_value());  // overflows int64
}

TEST_F(ConfigTest, DefaultsComeFromTheTable) {
  const ConfigSnapshot d = Config::defaults();
  EXPECT_EQ(d.bufferSizeBytes, 8 << 20);
  EXPECT_EQ(d.bufferPoolCap, 64);
  EXPECT_EQ(d.drainPollIntervalMs, 5);
  EXPECT_EQ(d.drainQuietFlushes, 3);
  EXPECT_EQ(d.drainTimeoutMs, 1000);
  EXPECT_EQ(d.drainOrder, DrainOrder::kAuto);
  EXPECT_EQ(d.profiler, ProfilerMode::kAuto);
  EXPECT_EQ(d.libraryPath, "");
  EXPECT_FALSE(d.allowMissingProfapi);
  EXPECT_TRUE(d.synchronizeDevices && d.enableKernels && d.enableExternalCorrelation && d.enableApiRecords &&
              d.enableCommunication && d.enableMemcpyMemset);
  EXPECT_STREQ(boolSettingName(&ConfigSnapshot::enableKernels), "enable_kernels");
  EXPECT_STREQ(boolSettingName(&ConfigSnapshot::allowMissingProfapi), "allow_missing_profapi");
  EXPECT_EQ(boolSettingName(&ConfigSnapshot::libmsptiPreloaded), nullptr);  // read from LD_PRELOAD, not a setting
  // Each setting is described, and the environment variable follows its name.
  for (const SettingInfo& s : Config::settings()) {
    EXPECT_FALSE(s.description.empty()) << s.name;
    EXPECT_FALSE(s.range.empty()) << s.name;
    if (s.name != "library_path") {
      std::string upper;
      for (char c : s.name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      EXPECT_EQ(s.env, "TORCH_MSPTI_" + upper);
    }
  }
}

TEST_F(ConfigTest, EnvironmentIsParsed) {
  env("TORCH_MSPTI_BUFFER_SIZE", "4M");
  env("TORCH_MSPTI_BUFFER_POOL_CAP", "7");
  env("TORCH_MSPTI_DRAIN_ORDER", " Poll_First ");
  env("TORCH_MSPTI_ENABLE_KERNELS", "off");
  env("TORCH_MSPTI_LIBRARY", "/opt/cann/libmspti.so");
  env("ASCEND_RT_VISIBLE_DEVICES", "4, 6,x,7");
  env("LD_PRELOAD", "/a/libfoo.so:/cann/lib64/libmspti.so");
  const Config c;
  EXPECT_TRUE(c.environmentErrors().empty()) << c.environmentErrors().front();
  const ConfigSnapshot s = c.snapshot();
  EXPECT_EQ(s.bufferSizeBytes, 4 << 20);
  EXPECT_EQ(s.bufferPoolCap, 7);
  EXPECT_EQ(s.drainOrder, DrainOrder::kPollFirst);
  EXPECT_FALSE(s.enableKernels);
  EXPECT_EQ(s.libraryPath, "/opt/cann/libmspti.so");
  EXPECT_EQ(s.visibleDevices, (std::vector<uint32_t>{4, 6}));  // stops at the first invalid entry
  EXPECT_TRUE(s.libmsptiPreloaded);
  EXPECT_EQ(c.get("buffer_size"), "4194304");
  EXPECT_EQ(c.get("drain_order"), "poll_first");
  EXPECT_EQ(c.get("enable_kernels"), "false");
  EXPECT_FALSE(c.get("nope").has_value());
}

TEST_F(ConfigTest, BadEnvironmentValuesNameVariableValueRangeAndDefault) {
  env("TORCH_MSPTI_BUFFER_SIZE", "abc");
  env("TORCH_MSPTI_BUFFER_POOL_CAP", "0");
  env("TORCH_MSPTI_DRAIN_TIMEOUT_MS", "64M");
  env("TORCH_MSPTI_ENABLE_API_RECORDS", "maybe");
  env("TORCH_MSPTI_PROFILER", "bogus");
  const Config c;
  const auto errors = c.environmentErrors();
  ASSERT_EQ(errors.size(), 5u);
  auto find = [&](const std::string& var) -> std::string {
    for (const auto& e : errors)
      if (e.rfind(var + "=", 0) == 0) return e;
    return "";
  };
  const std::string size = find("TORCH_MSPTI_BUFFER_SIZE");
  EXPECT_TRUE(contains(size, "'abc'")) << size;
  EXPECT_TRUE(contains(size, "65536..268435456 bytes, a multiple of 8")) << size;
  EXPECT_TRUE(contains(size, "the default 8388608 is kept")) << size;
  const std::string cap = find("TORCH_MSPTI_BUFFER_POOL_CAP");
  EXPECT_TRUE(contains(cap, "0 is out of range")) << cap;
  EXPECT_TRUE(contains(cap, "1..4096 buffers")) << cap;
  EXPECT_TRUE(contains(cap, "the default 64 is kept")) << cap;
  const std::string timeout = find("TORCH_MSPTI_DRAIN_TIMEOUT_MS");
  EXPECT_TRUE(contains(timeout, "67108864 is out of range")) << timeout;
  EXPECT_TRUE(contains(timeout, "0..600000 ms")) << timeout;
  EXPECT_TRUE(contains(find("TORCH_MSPTI_ENABLE_API_RECORDS"), "'maybe' is not a boolean"));
  const std::string profiler = find("TORCH_MSPTI_PROFILER");
  EXPECT_TRUE(contains(profiler, "auto, mspti, off")) << profiler;
  EXPECT_TRUE(contains(profiler, "the default auto is kept")) << profiler;
  // The defaults are what the session gets.
  const ConfigSnapshot s = c.snapshot();
  EXPECT_EQ(s.bufferSizeBytes, 8 << 20);
  EXPECT_EQ(s.bufferPoolCap, 64);
  EXPECT_EQ(s.drainTimeoutMs, 1000);
  EXPECT_TRUE(s.enableApiRecords);
}

TEST_F(ConfigTest, EmptyVariablesAreUnset) {
  env("TORCH_MSPTI_BUFFER_SIZE", "");
  const Config c;
  EXPECT_TRUE(c.environmentErrors().empty());
  EXPECT_EQ(c.snapshot().bufferSizeBytes, 8 << 20);
}

TEST_F(ConfigTest, SettersCheckTypeAndRange) {
  Config c;
  EXPECT_EQ(c.setInt("buffer_size", 1 << 20), "");
  EXPECT_EQ(c.snapshot().bufferSizeBytes, 1 << 20);
  const std::string odd = c.setInt("buffer_size", (1 << 20) + 4);
  EXPECT_TRUE(contains(odd, "buffer_size: 1048580 is out of range; allowed 65536..268435456 bytes, a multiple of 8"))
      << odd;
  EXPECT_EQ(c.snapshot().bufferSizeBytes, 1 << 20);  // unchanged
  EXPECT_TRUE(contains(c.setInt("enable_kernels", 1), "not an integer setting"));
  EXPECT_TRUE(contains(c.setBool("buffer_size", true), "not a boolean setting"));
  EXPECT_TRUE(contains(c.setText("buffer_size", "1"), "not a text setting"));
  EXPECT_EQ(c.setBool("enable_kernels", false), "");
  EXPECT_FALSE(c.snapshot().enableKernels);
  EXPECT_EQ(c.setText("drain_order", "DISABLE_FIRST"), "");
  EXPECT_EQ(c.snapshot().drainOrder, DrainOrder::kDisableFirst);
  const std::string choice = c.setText("drain_order", "sometimes");
  EXPECT_TRUE(contains(choice, "'sometimes' is not allowed; use auto, disable_first, poll_first")) << choice;
  const std::string importOnly = c.setText("profiler", "off");
  EXPECT_TRUE(contains(importOnly, "TORCH_MSPTI_PROFILER")) << importOnly;
  EXPECT_EQ(c.snapshot().profiler, ProfilerMode::kAuto);
  c.reset();
  EXPECT_TRUE(c.snapshot().enableKernels);
}

TEST_F(ConfigTest, LibraryPathIsFixedOnceALibraryIsLoaded) {
  Config c;
  EXPECT_EQ(c.setText("library_path", "/first/libmspti.so"), "");
  c.lockLibraryPath("/loaded/libmspti.so");
  EXPECT_EQ(c.snapshot().libraryPath, "/loaded/libmspti.so");
  const std::string refused = c.setText("library_path", "/other/libmspti.so");
  EXPECT_TRUE(contains(refused, "already loaded")) << refused;
  EXPECT_TRUE(contains(refused, "/loaded/libmspti.so")) << refused;
  EXPECT_EQ(c.setText("library_path", "/loaded/libmspti.so"), "");
  env("TORCH_MSPTI_LIBRARY", "/env/libmspti.so");
  c.reset();
  EXPECT_EQ(c.snapshot().libraryPath, "/loaded/libmspti.so");  // survives reset
}

}  // namespace
}  // namespace torch_mspti::test
