// The kineto activity the plugin hands over for each device row, launch event, marker and memory
// event: a GenericTraceActivity whose args (the trace's "args" object) are kept as one rendered
// JSON fragment instead of kineto's map of strings.
//
// Why: torch reads every activity's metadataJson() twice while it turns the trace into its events
// (TransferEvents::lookup, torch/csrc/profiler/collection.cpp, looking for its own "Profiler Event
// Index" key), and once more when it exports the trace; GenericTraceActivity renders the map
// through a std::stringstream on each call (its constructor alone costs about a microsecond) and
// keeps each entry as two heap strings in a hash node. Here the fragment is rendered once as the
// args are added, each call returns a copy of it, and an activity's args take one string.
// The fragment is what GenericTraceActivity would write for the same args: `"key": value` pairs
// joined by ", ", quoted values written as given (kineto does not escape them either; the callers
// pass kineto-safe text), in the order added.
// Thread-safety: none (built on the profiler thread, read after).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <GenericTraceActivity.h>

namespace torch_mspti {

class NpuActivity final : public libkineto::GenericTraceActivity {
 public:
  // `argsBytes`: the args' expected length, reserved at once (their string grows once, not by doubling).
  NpuActivity(const libkineto::TraceSpan& span, libkineto::ActivityType type, const std::string& name,
              size_t argsBytes = 0)
      : GenericTraceActivity(span, type, name) {
    args_.reserve(argsBytes);
  }

  // Adds `"key": value` (a number).
  void arg(std::string_view key, int64_t value);
  void arg(std::string_view key, uint64_t value);
  void arg(std::string_view key, int32_t value) { arg(key, static_cast<int64_t>(value)); }
  void arg(std::string_view key, uint32_t value) { arg(key, static_cast<uint64_t>(value)); }
  void arg(std::string_view key, double value);
  // Adds `"key": "value"`; `value` must not need JSON escaping (as with addMetadataQuoted).
  void quotedArg(std::string_view key, std::string_view value);

  const std::string metadataJson() const override { return args_; }
  // The value of `key` as GenericTraceActivity gives it (unquoted), "" when absent.
  const std::string getMetadataValue(const std::string& key) const override;

 private:
  void key(std::string_view key);
  std::string args_;
};

}  // namespace torch_mspti
