#include "Config.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <mutex>

#include <fmt/format.h>

#include "MsptiLibrary.h"

namespace torch_mspti {
namespace {

std::mutex gMutex;
ConfigSnapshot gValues;
std::vector<std::string> gEnvErrors;

struct IntSetting {
  const char* name;
  const char* unit;
  int64_t lo;
  int64_t hi;
  int64_t multipleOf;
  int64_t ConfigSnapshot::* field;
  const char* description;
};

// Ranges: MSPTI warns below 2 MiB and its Python monitor allows up to 256 MiB (mspti.md 5.1);
// we accept from 64 KiB so tests can force many buffers, and require 8-byte multiples because
// records are 8-aligned back to back.
const IntSetting kIntSettings[] = {
    {"buffer_size", "bytes", 64 << 10, 256 << 20, 8, &ConfigSnapshot::bufferSizeBytes,
     "size of each activity buffer handed to MSPTI"},
    {"buffer_pool_cap", "buffers", 1, 4096, 1, &ConfigSnapshot::bufferPoolCap,
     "activity buffers outstanding at once; further requests are declined and counted"},
    {"drain_poll_interval_ms", "ms", 1, 1000, 1, &ConfigSnapshot::drainPollIntervalMs,
     "pause between FlushAll polls while stop() drains"},
    {"drain_quiet_flushes", "flushes", 1, 1000, 1, &ConfigSnapshot::drainQuietFlushes,
     "consecutive empty flushes that end a drain when no pending launch is known"},
    {"drain_timeout_ms", "ms", 0, 600000, 1, &ConfigSnapshot::drainTimeoutMs, "upper bound of the drain in stop()"},
};

struct BoolSetting {
  const char* name;
  bool ConfigSnapshot::* field;
  const char* description;
};

const BoolSetting kBoolSettings[] = {
    {"enable_kernels", &ConfigSnapshot::enableKernels, "collect KERNEL records"},
    {"enable_external_correlation", &ConfigSnapshot::enableExternalCorrelation,
     "collect EXTERNAL_CORRELATION records (links kernels to ops)"},
    {"enable_api_records", &ConfigSnapshot::enableApiRecords,
     "collect API/RUNTIME_API records (launch thread and host time)"},
    {"enable_communication", &ConfigSnapshot::enableCommunication, "collect COMMUNICATION records"},
    {"enable_memcpy_memset", &ConfigSnapshot::enableMemcpyMemset,
     "collect MEMCPY/MEMSET records (MSPTI 26.x needs libmspti.so in LD_PRELOAD)"},
    {"enable_markers", &ConfigSnapshot::enableMarkers, "collect MARKER records"},
};

const char* const kDrainOrderNames[] = {"auto", "disable_first", "poll_first"};

std::string envName(const std::string& setting) {
  if (setting == "library_path") return "TORCH_MSPTI_LIBRARY";
  std::string out = "TORCH_MSPTI_";
  for (char c : setting) out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return out;
}

const IntSetting* findInt(const std::string& name) {
  for (const auto& s : kIntSettings)
    if (name == s.name) return &s;
  return nullptr;
}

const BoolSetting* findBool(const std::string& name) {
  for (const auto& s : kBoolSettings)
    if (name == s.name) return &s;
  return nullptr;
}

std::string checkInt(const IntSetting& s, int64_t v) {
  if (v < s.lo || v > s.hi || v % s.multipleOf != 0) {
    std::string extra = s.multipleOf > 1 ? fmt::format(", a multiple of {}", s.multipleOf) : "";
    return fmt::format("{}: {} is out of range; allowed {}..{} {}{}", s.name, v, s.lo, s.hi, s.unit, extra);
  }
  return "";
}

std::optional<bool> parseBool(const std::string& text) {
  if (text == "1" || text == "true" || text == "TRUE" || text == "True" || text == "on" || text == "yes") return true;
  if (text == "0" || text == "false" || text == "FALSE" || text == "False" || text == "off" || text == "no")
    return false;
  return std::nullopt;
}

// Caller holds gMutex.
std::string setIntLocked(const std::string& name, int64_t value) {
  const IntSetting* s = findInt(name);
  if (!s) return fmt::format("{}: not an integer setting", name);
  std::string err = checkInt(*s, value);
  if (err.empty()) gValues.*(s->field) = value;
  return err;
}

std::string setStringLocked(const std::string& name, const std::string& value) {
  if (name == "drain_order") {
    for (int i = 0; i < 3; ++i) {
      if (value == kDrainOrderNames[i]) {
        gValues.drainOrder = static_cast<DrainOrder>(i);
        return "";
      }
    }
    return fmt::format("drain_order: '{}' is not allowed; use auto, disable_first or poll_first", value);
  }
  if (name == "library_path") {
    const std::string loaded = loadedLibraryPath();
    if (!loaded.empty() && value != gValues.libraryPath) {
      return fmt::format(
          "library_path: cannot change to '{}': MSPTI library '{}' is already loaded and stays loaded for the life "
          "of the process (MSPTI keeps callbacks and threads); set it before the first profiling session",
          value, loaded);
    }
    gValues.libraryPath = value;
    return "";
  }
  return fmt::format("{}: not a text setting", name);
}

}  // namespace

Config& Config::instance() {
  static Config* config = new Config();  // never destroyed: MSPTI threads may read it at exit
  return *config;
}

Config::Config() {
  std::lock_guard<std::mutex> lock(gMutex);
  loadEnvironment();
}

void Config::loadEnvironment() {
  gValues = ConfigSnapshot{};
  gEnvErrors.clear();
  for (const auto& s : kIntSettings) {
    const std::string env = envName(s.name);
    const char* raw = std::getenv(env.c_str());
    if (!raw || !*raw) continue;
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(raw, &end, 10);
    if (errno != 0 || end == raw || *end != '\0') {
      gEnvErrors.push_back(fmt::format("{}='{}' is not an integer; allowed {}..{} {} (ignored, default kept)", env, raw,
                                       s.lo, s.hi, s.unit));
      continue;
    }
    std::string err = checkInt(s, v);
    if (!err.empty()) gEnvErrors.push_back(fmt::format("{}='{}': {} (ignored, default kept)", env, raw, err));
    else gValues.*(s.field) = v;
  }
  for (const auto& s : kBoolSettings) {
    const std::string env = envName(s.name);
    const char* raw = std::getenv(env.c_str());
    if (!raw || !*raw) continue;
    auto v = parseBool(raw);
    if (!v)
      gEnvErrors.push_back(
          fmt::format("{}='{}' is not a boolean; use 1/0, true/false, on/off (ignored, default kept)", env, raw));
    else gValues.*(s.field) = *v;
  }
  if (const char* raw = std::getenv("TORCH_MSPTI_DRAIN_ORDER"); raw && *raw) {
    std::string err = setStringLocked("drain_order", raw);
    if (!err.empty()) gEnvErrors.push_back(fmt::format("TORCH_MSPTI_DRAIN_ORDER: {} (ignored, default kept)", err));
  }
  if (const char* raw = std::getenv("TORCH_MSPTI_LIBRARY"); raw && *raw) gValues.libraryPath = raw;
}

// "2,3" -> {2, 3}. Parsing stops at the first entry that is not a number, as the runtime
// ignores devices after an invalid entry.
static std::vector<uint32_t> parseVisibleDevices(const char* raw) {
  std::vector<uint32_t> out;
  if (!raw) return out;
  const char* p = raw;
  while (*p) {
    char* end = nullptr;
    errno = 0;
    unsigned long v = std::strtoul(p, &end, 10);
    if (end == p || errno != 0 || v > 0xFFFFFFFFul) break;
    out.push_back(static_cast<uint32_t>(v));
    p = end;
    while (*p == ' ') ++p;
    if (*p != ',') break;
    ++p;
  }
  return out;
}

ConfigSnapshot Config::snapshot() const {
  std::lock_guard<std::mutex> lock(gMutex);
  ConfigSnapshot s = gValues;
  s.visibleDevices = parseVisibleDevices(std::getenv("ASCEND_RT_VISIBLE_DEVICES"));
  return s;
}

std::vector<SettingInfo> Config::settings() const {
  std::vector<SettingInfo> out;
  for (const auto& s : kIntSettings) {
    std::string range = fmt::format("{}..{}", s.lo, s.hi);
    if (s.multipleOf > 1) range += fmt::format(", multiple of {}", s.multipleOf);
    out.push_back({s.name, "int", s.unit, range, s.description});
  }
  out.push_back({"drain_order", "choice", "", "auto, disable_first, poll_first",
                 "order of Disable and FlushAll polling in stop()"});
  out.push_back({"library_path", "str", "path", "absolute path or empty (search)",
                 "explicit libmspti.so path; fixed once a library is loaded"});
  for (const auto& s : kBoolSettings) out.push_back({s.name, "bool", "", "true/false", s.description});
  return out;
}

std::optional<std::string> Config::get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(gMutex);
  if (const IntSetting* s = findInt(name)) return std::to_string(gValues.*(s->field));
  if (const BoolSetting* s = findBool(name)) return std::string(gValues.*(s->field) ? "true" : "false");
  if (name == "drain_order") return std::string(kDrainOrderNames[static_cast<int>(gValues.drainOrder)]);
  if (name == "library_path") return gValues.libraryPath;
  return std::nullopt;
}

std::string Config::setInt(const std::string& name, int64_t value) {
  std::lock_guard<std::mutex> lock(gMutex);
  return setIntLocked(name, value);
}

std::string Config::setBool(const std::string& name, bool value) {
  std::lock_guard<std::mutex> lock(gMutex);
  const BoolSetting* s = findBool(name);
  if (!s) return fmt::format("{}: not a boolean setting", name);
  gValues.*(s->field) = value;
  return "";
}

std::string Config::setString(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> lock(gMutex);
  return setStringLocked(name, value);
}

std::vector<std::string> Config::environmentErrors() const {
  std::lock_guard<std::mutex> lock(gMutex);
  return gEnvErrors;
}

void Config::reset() {
  std::lock_guard<std::mutex> lock(gMutex);
  loadEnvironment();
}

}  // namespace torch_mspti
