// The plugin's settings: one table (Config.cpp kSettings) gives each setting its name, the
// environment variable that sets it, its type, unit, default, allowed range and description;
// the snapshot struct, validation, environment parsing, diagnostics, the Python
// `torch_mspti.config` surface and its docstring all come from that table (the README's settings
// table is checked against it by tests/test_config.py).
//
// A profiling session takes an immutable ConfigSnapshot when kineto configures it; changes apply
// from the next session. Thread-safety: every Config method is thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_mspti {

// Order of the tail drain in stop(); see DrainPolicy.h for what each does and why.
enum class DrainOrder : int {
  kAuto = 0,          // kDisableFirst when the library pulls device data on Disable, else kPollFirst
  kDisableFirst = 1,  // pull device data with a kind no pending launch needs, poll, then Disable the rest
  kPollFirst = 2,     // poll FlushAll with the kinds enabled, then Disable
};

// Which PrivateUse1 profiler serves the NPU lane (TORCH_MSPTI_PROFILER; see Registration.h).
enum class ProfilerMode : int { kAuto = 0, kMspti = 1, kOff = 2 };

// Values of every setting for one session. Built by Config (never default-constructed with
// meaningful values: use Config::defaults()).
// The marker_domains setting: which mstx domains MSPTI records (mspti.md 5.9). msprof's convention:
// an include list or an exclude list of domain names ("default" is the default domain), never
// both; with neither, every domain.
struct MarkerDomainFilter {
  enum class Mode : uint8_t { kAll, kInclude, kExclude };
  Mode mode = Mode::kAll;
  std::vector<std::string> names;  // not empty unless kAll
  // "", "include:a,b" or "exclude:a,b" (the setting's text).
  std::string text() const;
  // Whether a marker of `domain` is collected under this filter.
  bool admits(const std::string& domain) const;
};

struct ConfigSnapshot {
  int64_t bufferSizeBytes = 0;      // size of each activity buffer handed to MSPTI
  int64_t bufferPoolCap = 0;        // buffers outstanding at once; further requests declined
  int64_t drainPollIntervalMs = 0;  // sleep between FlushAll polls while draining
  int64_t drainQuietFlushes = 0;    // empty flushes that end a drain when nothing is known pending
  int64_t drainTimeoutMs = 0;       // upper bound of the drain
  int64_t maxSessionRecords = 0;    // records one session keeps (device, API, external); more counted
  DrainOrder drainOrder = DrainOrder::kAuto;
  ProfilerMode profiler = ProfilerMode::kAuto;
  std::string libraryPath;           // explicit libmspti path ("" = search)
  bool allowMissingProfapi = false;  // load an explicit library even without libprofapi.so
  bool synchronizeDevices = false;   // stop() synchronises every PrivateUse1 device first
  bool unsubscribeAtStop = false;    // stop() unsubscribes itself instead of SubscriptionRelease
  bool enableKernels = false;
  bool enableExternalCorrelation = false;
  bool enableApiRecords = false;
  bool enableCommunication = false;
  bool enableMemcpyMemset = false;
  bool enableMemory = false;
  bool enableMarkers = false;
  MarkerDomainFilter markerDomains;
  // ASCEND_RT_VISIBLE_DEVICES as a list of physical ids (index = torch's logical device); empty
  // when unset, meaning logical == physical. Read at every snapshot().
  std::vector<uint32_t> visibleDevices;
  // LD_PRELOAD names libmspti.so (MSPTI 26.x needs that for MEMCPY/MEMSET, mspti.md 5.5). Read
  // at every snapshot(), as is the raw variable (ldPreload) for libraryPreloaded().
  bool libmsptiPreloaded = false;
  std::string ldPreload;
};

// The name of the bool setting stored in `field` ("enable_kernels" for
// &ConfigSnapshot::enableKernels); nullptr when no setting is stored there.
const char* boolSettingName(bool ConfigSnapshot::* field);

// Whether the MSPTI library loaded from `libraryPath` was preloaded at process start: LD_PRELOAD
// names libmspti.so, or the loaded library's own file name (a library under another name, such as
// torch-mspti's simulator libmspti_sim.so, matches on its own name the way it checks the preload
// itself). `libraryPath` may be empty (then only libmspti.so counts).
bool libraryPreloaded(const ConfigSnapshot& s, const std::string& libraryPath);

// One setting as Python, diagnostics and the documentation see it.
struct SettingInfo {
  std::string name;         // e.g. "buffer_size"
  std::string env;          // e.g. "TORCH_MSPTI_BUFFER_SIZE"
  std::string type;         // "int", "bool", "choice", "path", "domains"
  std::string unit;         // "bytes", "ms", "" ...
  std::string range;        // human-readable allowed values
  std::string defaultText;  // the default, as text
  std::string description;  // one line
  bool importOnly = false;  // read once when the package is imported (cannot change later)
};

class Config {
 public:
  // Reads the environment (TORCH_MSPTI_* variables).
  Config();
  Config(const Config&) = delete;
  Config& operator=(const Config&) = delete;

  // Every setting at its default (no environment).
  static ConfigSnapshot defaults();

  ConfigSnapshot snapshot() const;
  static std::vector<SettingInfo> settings();

  // Value of one setting as text (ints in decimal, bools "true"/"false", choices by name);
  // nullopt for an unknown name.
  std::optional<std::string> get(const std::string& name) const;

  // Set one setting. Each returns "" on success or an error naming the setting, the value and
  // the allowed range. "library_path" is refused once a library is loaded (lockLibraryPath), and
  // import-only settings are refused always.
  std::string setInt(const std::string& name, int64_t value);
  std::string setBool(const std::string& name, bool value);
  std::string setText(const std::string& name, const std::string& value);

  // Problems found in TORCH_MSPTI_* environment variables: each names the variable, the value,
  // the allowed range and the default kept.
  std::vector<std::string> environmentErrors() const;

  // Restores the defaults and re-reads the environment. A library path fixed by lockLibraryPath
  // stays (the library stays loaded).
  void reset();

  // The library at `path` is loaded for the life of the process: library_path now reads `path`
  // and cannot change.
  void lockLibraryPath(const std::string& path);

  // For the fork guard: hold the lock across fork().
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  void loadEnvironmentLocked();

  mutable std::mutex mutex_;
  ConfigSnapshot values_;
  std::vector<std::string> envErrors_;
  std::string lockedLibraryPath_;
};

// "64M" -> 67108864; also K, G and KiB/MiB/GiB (binary multiples); plain digits (with an optional
// leading '-') as they are. nullopt when `text` is not an integer with an optional suffix.
std::optional<int64_t> parseSize(const std::string& text);

}  // namespace torch_mspti
