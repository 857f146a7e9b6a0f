#include "SimOptions.h"

#include <climits>
#include <cstring>

#include "Generation.h"

namespace torch_mspti::sim {

namespace {

constexpr int64_t kMaxDurationNs = 600LL * 1000000000LL;      // 10 min: far beyond any sane setting
constexpr int64_t kMaxClockOffsetNs = 3600LL * 1000000000LL;  // 1 h either way
constexpr int64_t kMaxDriftPpm = 100000;                      // 10 %

int findOption(const char* key) {
  if (key == nullptr) {
    return -1;
  }
  const auto& all = SimOptions::specs();
  for (size_t i = 0; i < all.size(); ++i) {
    if (std::strcmp(all[i].key, key) == 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace

const std::array<OptionSpec, static_cast<size_t>(Option::kCount)>& SimOptions::specs() {
  // Order matches enum Option.
  static const std::array<OptionSpec, static_cast<size_t>(Option::kCount)> kSpecs = {{
      {"delivery_delay_ns", 200000000, 0, kMaxDurationNs},
      {"launch_latency_ns", 5000, 0, kMaxDurationNs},
      {"disable_pulls", kDisablePullsByDefault ? 1 : 0, 0, 1},
      {"driver_flush_ns", 20000000, 0, kMaxDurationNs},
      {"drop_after_disable", 1, 0, 1},
      {"per_thread_stacks", 0, 0, 1},
      {"buffer_threshold_pct", 80, 1, 100},
      {"require_enable_after_subscribe", 1, 0, 1},
      {"copies_at_call_end", 1, 0, 1},
      {"parse_after_pull_ns", 1000000, 0, kMaxDurationNs},
      {"api_clock", 0, 0, 1},
      {"device_clock_offset_ns", 0, -kMaxClockOffsetNs, kMaxClockOffsetNs},
      {"device_clock_drift_ppm", 0, -kMaxDriftPpm, kMaxDriftPpm},
      {"early_start_every", 0, 0, 1000000000},
      {"early_start_ns", 1000, 0, kMaxDurationNs},
      {"deliver_after_unsubscribe", 0, 0, 1},
      {"kernels_need_preload", kKernelsNeedPreloadByDefault ? 1 : 0, 0, 1},
      {"destroy_at_exit", 0, 0, 1},
      {"api_records_per_launch", 0, 0, 64},
      {"unsubscribe_poll_ns", 0, 0, kMaxDurationNs},
      {"throw_in", 0, 0, 0xff},
      {"reorder_external", 0, 0, 2},
      {"duplicate_kernel_records", 0, 0, 1},
      {"bad_timing_every", 0, 0, 1000000000},
      {"unknown_kind_every", 0, 0, 1000000000},
      {"never_deliver", 0, 0, 1},
      {"foreign_correlation_id", 0, INT64_MIN + 1, INT64_MAX},
      {"completion_delay_ns", 0, 0, kMaxDurationNs},
  }};
  return kSpecs;
}

SimOptions::SimOptions() { resetDefaults(); }

void SimOptions::resetDefaults() {
  const auto& all = specs();
  for (size_t i = 0; i < all.size(); ++i) {
    values_[i].store(all[i].defaultValue, std::memory_order_relaxed);
  }
}

int SimOptions::set(const char* key, int64_t value) {
  const int index = findOption(key);
  if (index < 0) {
    return -1;
  }
  const OptionSpec& spec = specs()[static_cast<size_t>(index)];
  if (value < spec.minValue || value > spec.maxValue) {
    return -1;
  }
  values_[static_cast<size_t>(index)].store(value, std::memory_order_relaxed);
  return 0;
}

int64_t SimOptions::get(const char* key) const {
  const int index = findOption(key);
  return index < 0 ? INT64_MIN : values_[static_cast<size_t>(index)].load(std::memory_order_relaxed);
}

}  // namespace torch_mspti::sim
