#include "Config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace torch_mspti {
namespace {

enum class Type { kInt, kBool, kChoice, kPath, kDomains };

const char* const kDrainOrders[] = {"auto", "disable_first", "poll_first", nullptr};
const char* const kProfilerModes[] = {"auto", "mspti", "off", nullptr};

// A choice setting's enum field, read and written as the index of its word in `choices` (the
// enum's values are those indices, Config.h).
struct ChoiceField {
  int (*get)(const ConfigSnapshot&) = nullptr;
  void (*set)(ConfigSnapshot&, int) = nullptr;
};
template <auto Field>
constexpr ChoiceField choiceField() {
  using Enum = std::remove_reference_t<decltype(std::declval<ConfigSnapshot&>().*Field)>;
  return {[](const ConfigSnapshot& v) { return static_cast<int>(v.*Field); },
          [](ConfigSnapshot& v, int i) { v.*Field = static_cast<Enum>(i); }};
}

// The table. Ranges: MSPTI warns below 2 MiB per buffer and its Python monitor allows up to
// 256 MiB (mspti.md 5.1); from 64 KiB so tests can force many buffers; multiples of 8 because
// records lie 8-aligned back to back (mspti.md 3.1).
struct Setting {
  const char* name;
  const char* env;  // nullptr: TORCH_MSPTI_<NAME>
  Type type;
  const char* unit;
  const char* defaultText;
  const char* description;
  int64_t ConfigSnapshot::* intField = nullptr;
  bool ConfigSnapshot::* boolField = nullptr;
  int64_t lo = 0, hi = 0, multipleOf = 1;
  const char* const* choices = nullptr;
  ChoiceField choice;
  bool importOnly = false;
};

const Setting kSettings[] = {
    {"buffer_size", nullptr, Type::kInt, "bytes", "8388608",
     "size of each activity buffer handed to MSPTI (the variable also takes K, M, G suffixes)",
     &ConfigSnapshot::bufferSizeBytes, nullptr, 64 << 10, 256 << 20, 8},
    {"buffer_pool_cap", nullptr, Type::kInt, "buffers", "64",
     "activity buffers outstanding at once; further requests are declined and counted", &ConfigSnapshot::bufferPoolCap,
     nullptr, 1, 4096},
    {"drain_poll_interval_ms", nullptr, Type::kInt, "ms", "5", "pause between FlushAll polls while stop() drains",
     &ConfigSnapshot::drainPollIntervalMs, nullptr, 1, 1000},
    {"drain_quiet_flushes", nullptr, Type::kInt, "flushes", "3",
     "consecutive empty flushes that end a drain when no pending launch is known", &ConfigSnapshot::drainQuietFlushes,
     nullptr, 1, 1000},
    {"drain_timeout_ms", nullptr, Type::kInt, "ms", "1000", "upper bound of the drain in stop()",
     &ConfigSnapshot::drainTimeoutMs, nullptr, 0, 600000},
    {"max_session_records", nullptr, Type::kInt, "records", "67108864",
     "records one session keeps (device, API and external-correlation records together; a kernel launch is about "
     "3); more are dropped and counted (dropped.over_cap). At the default, about 7.4 GB at the peak in stop(): "
     "~110 bytes per record (the records, the ledger, and the launch table built at stop)",
     &ConfigSnapshot::maxSessionRecords, nullptr, 1, int64_t{1} << 31},
    {"drain_order", nullptr, Type::kChoice, "", "auto",
     "disable_first (MSPTI 26.1 pulls device data on Disable: pulled by a kind no pending launch needs) or "
     "poll_first; auto picks by library generation",
     nullptr, nullptr, 0, 0, 1, kDrainOrders, choiceField<&ConfigSnapshot::drainOrder>()},
    {"profiler", nullptr, Type::kChoice, "", "auto",
     "which PrivateUse1 profiler serves the NPU lane: auto and mspti = torch-mspti (also when torch_npu's "
     "built-in MSPTI backend is loaded), off = not torch-mspti; read when torch_mspti is imported",
     nullptr, nullptr, 0, 0, 1, kProfilerModes, choiceField<&ConfigSnapshot::profiler>(), true},
    {"library_path", "TORCH_MSPTI_LIBRARY", Type::kPath, "path", "",
     "explicit libmspti.so (\"\" = search); fixed once a library is loaded"},
    {"allow_missing_profapi", nullptr, Type::kBool, "", "false",
     "load an explicit library_path even when CANN's libprofapi.so cannot be found (real libmspti then terminates "
     "the process at load; the simulator and other MSPTI implementations do not need it)",
     nullptr, &ConfigSnapshot::allowMissingProfapi},
    {"synchronize_devices", nullptr, Type::kBool, "", "true",
     "stop() waits for every PrivateUse1 device (torch.profiler synchronises only the current one), so kernels "
     "launched in the window and still running are collected",
     nullptr, &ConfigSnapshot::synchronizeDevices},
    {"unsubscribe_at_stop", nullptr, Type::kBool, "", "false",
     "stop() calls msptiUnsubscribe itself (about 1 s on the real library) instead of a background thread after "
     "it: for a program that starts another MSPTI consumer within milliseconds of a profile's end, which MSPTI "
     "refuses while a background Unsubscribe is stopping its device tasks",
     nullptr, &ConfigSnapshot::unsubscribeAtStop},
    {"enable_kernels", nullptr, Type::kBool, "", "true", "collect KERNEL records", nullptr,
     &ConfigSnapshot::enableKernels},
    {"enable_external_correlation", nullptr, Type::kBool, "", "true",
     "collect EXTERNAL_CORRELATION records (the op hint of each launch)", nullptr,
     &ConfigSnapshot::enableExternalCorrelation},
    {"enable_api_records", nullptr, Type::kBool, "", "true",
     "collect API/RUNTIME_API records (launching thread and host time: what verifies each link)", nullptr,
     &ConfigSnapshot::enableApiRecords},
    {"enable_communication", nullptr, Type::kBool, "", "true",
     "collect COMMUNICATION records (HCCL/LCCL collectives; MSPTI 8.2 and newer)", nullptr,
     &ConfigSnapshot::enableCommunication},
    {"enable_memcpy_memset", nullptr, Type::kBool, "", "true",
     "collect MEMCPY/MEMSET records (need libmspti.so in LD_PRELOAD from process start)", nullptr,
     &ConfigSnapshot::enableMemcpyMemset},
    {"enable_memory", nullptr, Type::kBool, "", "true",
     "collect MEMORY records: the runtime's device allocations and releases (need libmspti.so in LD_PRELOAD "
     "from process start)",
     nullptr, &ConfigSnapshot::enableMemory},
    {"enable_markers", nullptr, Type::kBool, "", "true",
     "collect MARKER records (torch_npu.npu.mstx marks and ranges) into the trace", nullptr,
     &ConfigSnapshot::enableMarkers},
    {"marker_domains", nullptr, Type::kDomains, "", "",
     "mstx domains MSPTI records, as msprof's --mstx-domain-include/--mstx-domain-exclude: include:NAME,... or "
     "exclude:NAME,... (\"default\" is the default domain; \"\" = every domain); applied through "
     "msptiActivityEnable/DisableMarkerDomain (CANN 8.3 and newer)",
     nullptr, nullptr, 0, 0, 1, nullptr, ChoiceField{}},
};

const Setting* find(const std::string& name) {
  for (const auto& s : kSettings)
    if (name == s.name) return &s;
  return nullptr;
}

std::string envName(const Setting& s) {
  if (s.env) return s.env;
  std::string out = "TORCH_MSPTI_";
  for (const char* c = s.name; *c; ++c) out += static_cast<char>(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
  return out;
}

std::string rangeText(const Setting& s) {
  switch (s.type) {
    case Type::kInt:
      return s.multipleOf > 1 ? fmt::format("{}..{} {}, a multiple of {}", s.lo, s.hi, s.unit, s.multipleOf)
                              : fmt::format("{}..{} {}", s.lo, s.hi, s.unit);
    case Type::kBool: return "true/false";
    case Type::kChoice: {
      std::string out;
      for (const char* const* c = s.choices; *c; ++c) out += (out.empty() ? "" : ", ") + std::string(*c);
      return out;
    }
    case Type::kPath: return "absolute path, or empty to search";
    case Type::kDomains: return "include:NAME[,NAME...], exclude:NAME[,NAME...], or empty for every domain";
  }
  return "";
}

const char* typeText(Type t) {
  switch (t) {
    case Type::kInt: return "int";
    case Type::kBool: return "bool";
    case Type::kChoice: return "choice";
    case Type::kPath: return "path";
    case Type::kDomains: return "domains";
  }
  return "";
}

std::optional<bool> parseBool(const std::string& t) {
  for (const char* yes : {"1", "true", "TRUE", "True", "on", "yes"})
    if (t == yes) return true;
  for (const char* no : {"0", "false", "FALSE", "False", "off", "no"})
    if (t == no) return false;
  return std::nullopt;
}

std::string checkInt(const Setting& s, int64_t v) {
  if (v >= s.lo && v <= s.hi && v % s.multipleOf == 0) return "";
  return fmt::format("{}: {} is out of range; allowed {}", s.name, v, rangeText(s));
}

// "include:a, b" -> {kInclude, {a, b}}; "" (or blanks) -> every domain. "" or the error.
std::string parseMarkerDomains(const Setting& s, const std::string& text, MarkerDomainFilter& out) {
  auto trim = [](std::string t) {
    const size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
  };
  const std::string all = trim(text);
  MarkerDomainFilter f;
  if (all.empty()) {
    out = f;
    return "";
  }
  const size_t colon = all.find(':');
  const std::string mode = trim(all.substr(0, colon));
  if (colon == std::string::npos || (mode != "include" && mode != "exclude"))
    return fmt::format("{}: '{}' is not allowed; use {}", s.name, text, rangeText(s));
  f.mode = mode == "include" ? MarkerDomainFilter::Mode::kInclude : MarkerDomainFilter::Mode::kExclude;
  std::string rest = all.substr(colon + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t comma = rest.find(',', start);
    const std::string name = trim(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (name.empty()) return fmt::format("{}: '{}' has an empty domain name; use {}", s.name, text, rangeText(s));
    if (std::find(f.names.begin(), f.names.end(), name) == f.names.end()) f.names.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  out = std::move(f);
  return "";
}

// The shift of a size suffix ("" 0, K 10, M 20, G 30); nullopt for any other.
std::optional<int> suffixShift(const std::string& suffix) {
  if (suffix.empty()) return 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") return 10;
  if (suffix == "M" || suffix == "m" || suffix == "MiB") return 20;
  if (suffix == "G" || suffix == "g" || suffix == "GiB") return 30;
  return std::nullopt;
}

// Optional '-', digits, a known suffix: an integer, whether or not it fits 64 bits.
bool isIntegerText(const std::string& text) {
  const size_t first = !text.empty() && text[0] == '-' ? 1 : 0;
  const size_t end = text.find_first_not_of("0123456789", first);
  const size_t digitsEnd = end == std::string::npos ? text.size() : end;
  return digitsEnd > first && suffixShift(text.substr(digitsEnd)).has_value();
}

// Applies `text` to `values`; "" or the error.
std::string applyText(ConfigSnapshot& values, const Setting& s, const std::string& text) {
  switch (s.type) {
    case Type::kInt: {
      const auto v = parseSize(text);
      if (!v)  // digits that overflow 64 bits are an integer out of range, not a malformed one
        return fmt::format("{}: '{}' is {}; allowed {}", s.name, text,
                           isIntegerText(text) ? "out of range" : "not an integer", rangeText(s));
      std::string err = checkInt(s, *v);
      if (err.empty()) values.*(s.intField) = *v;
      return err;
    }
    case Type::kBool: {
      const auto v = parseBool(text);
      if (!v) return fmt::format("{}: '{}' is not a boolean; use 1/0, true/false, on/off", s.name, text);
      values.*(s.boolField) = *v;
      return "";
    }
    case Type::kChoice: {
      // Case and surrounding blanks do not matter ("MSPTI " is mspti).
      std::string word;
      for (char ch : text)
        if (ch != ' ' && ch != '\t') word += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
      for (int i = 0; s.choices[i]; ++i) {
        if (word == s.choices[i]) {
          s.choice.set(values, i);
          return "";
        }
      }
      return fmt::format("{}: '{}' is not allowed; use {}", s.name, text, rangeText(s));
    }
    case Type::kPath: values.libraryPath = text; return "";
    case Type::kDomains: return parseMarkerDomains(s, text, values.markerDomains);
  }
  return "";
}

std::string valueText(const ConfigSnapshot& v, const Setting& s) {
  switch (s.type) {
    case Type::kInt: return std::to_string(v.*(s.intField));
    case Type::kBool: return v.*(s.boolField) ? "true" : "false";
    case Type::kChoice: return s.choices[s.choice.get(v)];
    case Type::kPath: return v.libraryPath;
    case Type::kDomains: return v.markerDomains.text();
  }
  return "";
}

// "2,3" -> {2, 3}. Parsing stops at the first entry that is not a number, as the runtime
// ignores devices after an invalid entry.
std::vector<uint32_t> parseVisibleDevices(const char* raw) {
  std::vector<uint32_t> out;
  if (!raw) return out;
  const char* p = raw;
  while (*p) {
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(p, &end, 10);
    if (end == p || errno != 0 || v > 0xFFFFFFFFul) break;
    out.push_back(static_cast<uint32_t>(v));
    p = end;
    while (*p == ' ') ++p;
    if (*p != ',') break;
    ++p;
  }
  return out;
}

}  // namespace

std::string MarkerDomainFilter::text() const {
  if (mode == Mode::kAll) return "";
  std::string out = mode == Mode::kInclude ? "include:" : "exclude:";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + names[i];
  return out;
}

bool MarkerDomainFilter::admits(const std::string& domain) const {
  const bool listed = std::find(names.begin(), names.end(), domain) != names.end();
  return mode == Mode::kAll || (mode == Mode::kInclude ? listed : !listed);
}

const char* boolSettingName(bool ConfigSnapshot::* field) {
  for (const Setting& s : kSettings)
    if (s.type == Type::kBool && s.boolField == field) return s.name;
  return nullptr;
}

std::optional<int64_t> parseSize(const std::string& text) {
  if (!isIntegerText(text)) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0) return std::nullopt;
  const int shift = *suffixShift(end);
  if (v > (INT64_MAX >> shift) || v < (INT64_MIN >> shift)) return std::nullopt;
  return static_cast<int64_t>(v) * (int64_t{1} << shift);
}

ConfigSnapshot Config::defaults() {
  ConfigSnapshot v;
  for (const auto& s : kSettings) applyText(v, s, s.defaultText);
  return v;
}

Config::Config() {
  std::lock_guard<std::mutex> lock(mutex_);
  loadEnvironmentLocked();
}

void Config::loadEnvironmentLocked() {
  values_ = defaults();
  envErrors_.clear();
  for (const auto& s : kSettings) {
    const std::string env = envName(s);
    const char* raw = std::getenv(env.c_str());
    if (!raw || !*raw) continue;
    const std::string err = applyText(values_, s, raw);
    if (!err.empty())
      envErrors_.push_back(fmt::format("{}='{}' is ignored: {}; the default {} is kept", env, raw, err,
                                       *s.defaultText ? s.defaultText : "\"\""));
  }
  if (!lockedLibraryPath_.empty()) values_.libraryPath = lockedLibraryPath_;
}

ConfigSnapshot Config::snapshot() const {
  ConfigSnapshot s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = values_;
  }
  s.visibleDevices = parseVisibleDevices(std::getenv("ASCEND_RT_VISIBLE_DEVICES"));
  const char* preload = std::getenv("LD_PRELOAD");
  s.libmsptiPreloaded = preload && std::strstr(preload, "libmspti.so") != nullptr;
  s.ldPreload = preload ? preload : "";
  return s;
}

bool libraryPreloaded(const ConfigSnapshot& s, const std::string& libraryPath) {
  if (s.libmsptiPreloaded) return true;
  const size_t slash = libraryPath.rfind('/');
  const std::string file = slash == std::string::npos ? libraryPath : libraryPath.substr(slash + 1);
  return !file.empty() && s.ldPreload.find(file) != std::string::npos;
}

std::vector<SettingInfo> Config::settings() {
  std::vector<SettingInfo> out;
  for (const auto& s : kSettings)
    out.push_back(
        {s.name, envName(s), typeText(s.type), s.unit, rangeText(s), s.defaultText, s.description, s.importOnly});
  return out;
}

std::optional<std::string> Config::get(const std::string& name) const {
  const Setting* s = find(name);
  if (!s) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  return valueText(values_, *s);
}

std::string Config::setInt(const std::string& name, int64_t value) {
  const Setting* s = find(name);
  if (!s || s->type != Type::kInt) return fmt::format("{}: not an integer setting", name);
  std::string err = checkInt(*s, value);
  if (!err.empty()) return err;
  std::lock_guard<std::mutex> lock(mutex_);
  values_.*(s->intField) = value;
  return "";
}

std::string Config::setBool(const std::string& name, bool value) {
  const Setting* s = find(name);
  if (!s || s->type != Type::kBool) return fmt::format("{}: not a boolean setting", name);
  std::lock_guard<std::mutex> lock(mutex_);
  values_.*(s->boolField) = value;
  return "";
}

std::string Config::setText(const std::string& name, const std::string& value) {
  const Setting* s = find(name);
  if (!s || (s->type != Type::kChoice && s->type != Type::kPath && s->type != Type::kDomains))
    return fmt::format("{}: not a text setting", name);
  if (s->importOnly)
    return fmt::format("{}: read when torch_mspti is imported; set {} in the environment before importing torch", name,
                       envName(*s));
  std::lock_guard<std::mutex> lock(mutex_);
  if (s->type == Type::kPath && !lockedLibraryPath_.empty() && value != lockedLibraryPath_)
    return fmt::format(
        "library_path: cannot change to '{}': MSPTI library '{}' is already loaded and stays loaded for the life of "
        "the process (MSPTI keeps callbacks and threads); set it before the first profiling session",
        value, lockedLibraryPath_);
  return applyText(values_, *s, value);
}

std::vector<std::string> Config::environmentErrors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return envErrors_;
}

void Config::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  loadEnvironmentLocked();
}

void Config::lockLibraryPath(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  lockedLibraryPath_ = path;
  values_.libraryPath = path;
}

}  // namespace torch_mspti
