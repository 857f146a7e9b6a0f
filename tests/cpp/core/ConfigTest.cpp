// Config: ranges and messages of every setting, environment parsing, ASCEND_RT_VISIBLE_DEVICES.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "Config.h"

namespace torch_mspti::test {
namespace {

struct IntCase {
  const char* name;
  const char* env;
  int64_t lo, hi, multipleOf, def;
};

// The specification the plugin documents (Config.cpp kIntSettings; mspti.md 5.1).
const IntCase kInts[] = {
    {"buffer_size", "TORCH_MSPTI_BUFFER_SIZE", 64 << 10, 256 << 20, 8, 8 << 20},
    {"buffer_pool_cap", "TORCH_MSPTI_BUFFER_POOL_CAP", 1, 4096, 1, 64},
    {"drain_poll_interval_ms", "TORCH_MSPTI_DRAIN_POLL_INTERVAL_MS", 1, 1000, 1, 5},
    {"drain_quiet_flushes", "TORCH_MSPTI_DRAIN_QUIET_FLUSHES", 1, 1000, 1, 3},
    {"drain_timeout_ms", "TORCH_MSPTI_DRAIN_TIMEOUT_MS", 0, 600000, 1, 1000},
};

const char* const kEnvVars[] = {"TORCH_MSPTI_BUFFER_SIZE",
                                "TORCH_MSPTI_BUFFER_POOL_CAP",
                                "TORCH_MSPTI_DRAIN_POLL_INTERVAL_MS",
                                "TORCH_MSPTI_DRAIN_QUIET_FLUSHES",
                                "TORCH_MSPTI_DRAIN_TIMEOUT_MS",
                                "TORCH_MSPTI_DRAIN_ORDER",
                                "TORCH_MSPTI_LIBRARY",
                                "TORCH_MSPTI_ENABLE_KERNELS",
                                "TORCH_MSPTI_ENABLE_EXTERNAL_CORRELATION",
                                "TORCH_MSPTI_ENABLE_API_RECORDS",
                                "TORCH_MSPTI_ENABLE_COMMUNICATION",
                                "TORCH_MSPTI_ENABLE_MEMCPY_MEMSET",
                                "TORCH_MSPTI_ENABLE_MARKERS",
                                "ASCEND_RT_VISIBLE_DEVICES"};

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kEnvVars) unsetenv(v);
    Config::instance().reset();
  }
  void TearDown() override { SetUp(); }
  static bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
};

TEST_F(ConfigTest, TheIntTableCoversEverySetting) {
  std::set<std::string> specified;
  for (const auto& c : kInts) specified.insert(c.name);
  for (const auto& s : Config::instance().settings()) {
    if (s.type == "int") {
      EXPECT_TRUE(specified.count(s.name)) << "setting " << s.name << " has no range test";
    }
  }
}

TEST_F(ConfigTest, DefaultsWithoutEnvironment) {
  Config& c = Config::instance();
  EXPECT_TRUE(c.environmentErrors().empty());
  for (const auto& s : kInts) EXPECT_EQ(c.get(s.name), std::to_string(s.def)) << s.name;
  const ConfigSnapshot snap = c.snapshot();
  EXPECT_EQ(snap.drainOrder, DrainOrder::kAuto);
  EXPECT_EQ(c.get("drain_order"), "auto");
  EXPECT_TRUE(snap.libraryPath.empty());
  EXPECT_TRUE(snap.visibleDevices.empty());
  EXPECT_EQ(c.get("no_such_setting"), std::nullopt);
}

TEST_F(ConfigTest, EveryIntSettingRejectsOutOfRangeWithFieldValueAndRange) {
  Config& c = Config::instance();
  for (const auto& s : kInts) {
    const std::string range = std::to_string(s.lo) + ".." + std::to_string(s.hi);
    for (int64_t bad : {s.lo - s.multipleOf, s.hi + s.multipleOf, -(int64_t{1} << 40)}) {
      const std::string err = c.setInt(s.name, bad);
      EXPECT_TRUE(contains(err, s.name)) << err;
      EXPECT_TRUE(contains(err, std::to_string(bad))) << err;
      EXPECT_TRUE(contains(err, range)) << err;
      EXPECT_EQ(c.get(s.name), std::to_string(s.def)) << "rejected value must not be stored: " << err;
    }
    EXPECT_EQ(c.setInt(s.name, s.lo), "") << s.name;
    EXPECT_EQ(c.get(s.name), std::to_string(s.lo));
    EXPECT_EQ(c.setInt(s.name, s.hi), "") << s.name;
    EXPECT_EQ(c.get(s.name), std::to_string(s.hi));
  }
  const ConfigSnapshot snap = c.snapshot();
  EXPECT_EQ(snap.bufferSizeBytes, 256 << 20);
  EXPECT_EQ(snap.drainTimeoutMs, 600000);
}

TEST_F(ConfigTest, BufferSizeMustBeAMultipleOfEight) {
  Config& c = Config::instance();
  for (int64_t bad : {int64_t{(64 << 10) + 1}, int64_t{(1 << 20) + 4}, int64_t{(256 << 20) - 1}}) {
    const std::string err = c.setInt("buffer_size", bad);
    EXPECT_TRUE(contains(err, "buffer_size")) << err;
    EXPECT_TRUE(contains(err, std::to_string(bad))) << err;
    EXPECT_TRUE(contains(err, "multiple of 8")) << err;
  }
  EXPECT_EQ(c.get("buffer_size"), std::to_string(8 << 20));
  EXPECT_EQ(c.setInt("buffer_size", (1 << 20) + 8), "");
}

TEST_F(ConfigTest, TypeMismatchesAreRejected) {
  Config& c = Config::instance();
  EXPECT_NE(c.setInt("enable_kernels", 1), "");
  EXPECT_NE(c.setBool("buffer_size", true), "");
  EXPECT_NE(c.setString("buffer_size", "1"), "");
  EXPECT_NE(c.setInt("nope", 1), "");
  EXPECT_EQ(c.setBool("enable_markers", true), "");
  EXPECT_EQ(c.get("enable_markers"), "true");
}

TEST_F(ConfigTest, NonIntegerEnvironmentValueIsReportedAndDefaultKept) {
  setenv("TORCH_MSPTI_BUFFER_SIZE", "abc", 1);
  setenv("TORCH_MSPTI_DRAIN_TIMEOUT_MS", "12ms", 1);
  setenv("TORCH_MSPTI_DRAIN_QUIET_FLUSHES", "99999999999999999999999", 1);
  Config::instance().reset();
  const auto errors = Config::instance().environmentErrors();
  ASSERT_EQ(errors.size(), 3u);
  bool sawBuffer = false;
  for (const auto& e : errors) {
    if (contains(e, "TORCH_MSPTI_BUFFER_SIZE")) {
      sawBuffer = true;
      EXPECT_TRUE(contains(e, "abc")) << e;
      EXPECT_TRUE(contains(e, "65536..268435456")) << e;
    }
  }
  EXPECT_TRUE(sawBuffer);
  const ConfigSnapshot snap = Config::instance().snapshot();
  EXPECT_EQ(snap.bufferSizeBytes, 8 << 20);
  EXPECT_EQ(snap.drainTimeoutMs, 1000);
  EXPECT_EQ(snap.drainQuietFlushes, 3);
}

TEST_F(ConfigTest, OutOfRangeEnvironmentValueIsReportedAndDefaultKept) {
  setenv("TORCH_MSPTI_BUFFER_SIZE", "65540", 1);  // in range, not a multiple of 8
  setenv("TORCH_MSPTI_BUFFER_POOL_CAP", "0", 1);
  setenv("TORCH_MSPTI_DRAIN_POLL_INTERVAL_MS", "7", 1);  // valid: applied
  Config::instance().reset();
  const auto errors = Config::instance().environmentErrors();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_TRUE(contains(errors[0], "TORCH_MSPTI_BUFFER_SIZE") && contains(errors[0], "65540") &&
              contains(errors[0], "multiple of 8"))
      << errors[0];
  EXPECT_TRUE(contains(errors[1], "TORCH_MSPTI_BUFFER_POOL_CAP") && contains(errors[1], "'0'") &&
              contains(errors[1], "1..4096"))
      << errors[1];
  const ConfigSnapshot snap = Config::instance().snapshot();
  EXPECT_EQ(snap.bufferSizeBytes, 8 << 20);
  EXPECT_EQ(snap.bufferPoolCap, 64);
  EXPECT_EQ(snap.drainPollIntervalMs, 7);
}

TEST_F(ConfigTest, BoolEnvironmentParsing) {
  setenv("TORCH_MSPTI_ENABLE_KERNELS", "off", 1);
  setenv("TORCH_MSPTI_ENABLE_MARKERS", "yes", 1);
  setenv("TORCH_MSPTI_ENABLE_COMMUNICATION", "maybe", 1);
  Config::instance().reset();
  const auto errors = Config::instance().environmentErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(contains(errors[0], "TORCH_MSPTI_ENABLE_COMMUNICATION") && contains(errors[0], "maybe")) << errors[0];
  const ConfigSnapshot snap = Config::instance().snapshot();
  EXPECT_FALSE(snap.enableKernels);
  EXPECT_TRUE(snap.enableMarkers);
  EXPECT_FALSE(snap.enableCommunication);  // default kept
}

TEST_F(ConfigTest, ResetRestoresDefaults) {
  Config& c = Config::instance();
  ASSERT_EQ(c.setInt("buffer_pool_cap", 9), "");
  ASSERT_EQ(c.setString("drain_order", "poll_first"), "");
  c.reset();
  EXPECT_EQ(c.snapshot().bufferPoolCap, 64);
  EXPECT_EQ(c.snapshot().drainOrder, DrainOrder::kAuto);
}

TEST_F(ConfigTest, DrainOrderChoices) {
  Config& c = Config::instance();
  const std::pair<const char*, DrainOrder> choices[] = {{"disable_first", DrainOrder::kDisableFirst},
                                                        {"poll_first", DrainOrder::kPollFirst},
                                                        {"auto", DrainOrder::kAuto}};
  for (const auto& [text, order] : choices) {
    EXPECT_EQ(c.setString("drain_order", text), "");
    EXPECT_EQ(c.snapshot().drainOrder, order);
    EXPECT_EQ(c.get("drain_order"), text);
  }
  const std::string err = c.setString("drain_order", "Poll_First");
  EXPECT_TRUE(contains(err, "drain_order") && contains(err, "Poll_First") && contains(err, "disable_first") &&
              contains(err, "poll_first") && contains(err, "auto"))
      << err;
  EXPECT_EQ(c.snapshot().drainOrder, DrainOrder::kAuto);

  setenv("TORCH_MSPTI_DRAIN_ORDER", "poll_first", 1);
  c.reset();
  EXPECT_EQ(c.snapshot().drainOrder, DrainOrder::kPollFirst);
  EXPECT_TRUE(c.environmentErrors().empty());
  setenv("TORCH_MSPTI_DRAIN_ORDER", "sideways", 1);
  c.reset();
  EXPECT_EQ(c.snapshot().drainOrder, DrainOrder::kAuto);
  ASSERT_EQ(c.environmentErrors().size(), 1u);
  EXPECT_TRUE(contains(c.environmentErrors()[0], "TORCH_MSPTI_DRAIN_ORDER") &&
              contains(c.environmentErrors()[0], "sideways"));
}

TEST_F(ConfigTest, LibraryPathFromEnvironmentAndSetter) {
  setenv("TORCH_MSPTI_LIBRARY", "/opt/x/libmspti.so", 1);
  Config::instance().reset();
  EXPECT_EQ(Config::instance().snapshot().libraryPath, "/opt/x/libmspti.so");
  EXPECT_EQ(Config::instance().setString("library_path", "/elsewhere/libmspti.so"), "");  // nothing loaded
  EXPECT_EQ(Config::instance().get("library_path"), "/elsewhere/libmspti.so");
}

TEST_F(ConfigTest, VisibleDevicesAreParsedAtEverySnapshot) {
  Config& c = Config::instance();
  struct Case {
    const char* env;
    std::vector<uint32_t> want;
  };
  const Case cases[] = {
      {"2,3", {2, 3}}, {"7", {7}}, {"4, 5", {4, 5}}, {"", {}},
      {"1,x,3", {1}},  {"x", {}},  {"0,1,", {0, 1}}, {"6,5,4,3", {6, 5, 4, 3}},
  };
  for (const auto& cs : cases) {
    setenv("ASCEND_RT_VISIBLE_DEVICES", cs.env, 1);
    EXPECT_EQ(c.snapshot().visibleDevices, cs.want) << "ASCEND_RT_VISIBLE_DEVICES='" << cs.env << "'";
  }
  unsetenv("ASCEND_RT_VISIBLE_DEVICES");
  EXPECT_TRUE(c.snapshot().visibleDevices.empty());
}

TEST_F(ConfigTest, SettingsDescribeRanges) {
  bool sawBuffer = false;
  for (const auto& s : Config::instance().settings()) {
    EXPECT_FALSE(s.description.empty()) << s.name;
    EXPECT_TRUE(Config::instance().get(s.name).has_value()) << s.name;
    if (s.name == "buffer_size") {
      sawBuffer = true;
      EXPECT_EQ(s.range, "65536..268435456, multiple of 8");
      EXPECT_EQ(s.unit, "bytes");
    }
  }
  EXPECT_TRUE(sawBuffer);
}

}  // namespace
}  // namespace torch_mspti::test
