// Typed plugin settings, their ranges, and the environment variables that set them.
//
// Every setting has a name (used by Python, diagnostics and the TORCH_MSPTI_<NAME> environment
// variable), a type and an allowed range. A profiling session takes an immutable snapshot at
// configure(); changes apply from the next session. All functions are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torch_mspti {

// Order of the tail drain in stop(); see DrainPolicy.h for what each does and why.
enum class DrainOrder : int {
  kAuto = 0,          // disableFirst when the library pulls device data on Disable, else pollFirst
  kDisableFirst = 1,  // Disable kinds, then poll FlushAll
  kPollFirst = 2,     // poll FlushAll with the kinds enabled, then Disable
};

struct ConfigSnapshot {
  int64_t bufferSizeBytes = 8 << 20;  // size of each activity buffer handed to MSPTI
  int64_t bufferPoolCap = 64;         // buffers outstanding at once; further requests declined
  int64_t drainPollIntervalMs = 5;    // sleep between FlushAll polls while draining
  int64_t drainQuietFlushes = 3;      // empty flushes that end a drain when nothing is known pending
  int64_t drainTimeoutMs = 1000;      // upper bound of the drain
  DrainOrder drainOrder = DrainOrder::kAuto;
  std::string libraryPath;  // explicit libmspti path ("" = search)
  bool enableKernels = true;
  bool enableExternalCorrelation = true;
  bool enableApiRecords = true;
  bool enableCommunication = false;
  bool enableMemcpyMemset = false;
  bool enableMarkers = false;
  // ASCEND_RT_VISIBLE_DEVICES as a list of physical ids (index = torch's logical device);
  // empty when unset, meaning logical == physical. Read at every snapshot().
  std::vector<uint32_t> visibleDevices;
};

// One setting as seen from Python/diagnostics.
struct SettingInfo {
  std::string name;         // e.g. "buffer_size"
  std::string type;         // "int", "bool", "str", "choice"
  std::string unit;         // "bytes", "ms", "" ...
  std::string range;        // human-readable allowed range
  std::string description;  // one line
};

class Config {
 public:
  // The process-wide settings (initialised from the environment on first use).
  static Config& instance();

  ConfigSnapshot snapshot() const;
  std::vector<SettingInfo> settings() const;

  // Value of one setting rendered as text (ints in decimal, bools "true"/"false").
  // Returns nullopt for an unknown name.
  std::optional<std::string> get(const std::string& name) const;

  // Sets one setting from a typed value. Returns "" on success or an error message naming the
  // field, the value and the allowed range. "library_path" is refused once a library is loaded.
  std::string setInt(const std::string& name, int64_t value);
  std::string setBool(const std::string& name, bool value);
  std::string setString(const std::string& name, const std::string& value);

  // Problems found in TORCH_MSPTI_* environment variables (each names the variable, the value and
  // the allowed range); such a variable is ignored and the default kept.
  std::vector<std::string> environmentErrors() const;

  // Restores defaults and re-reads the environment (tests).
  void reset();

 private:
  Config();
  void loadEnvironment();
};

}  // namespace torch_mspti
