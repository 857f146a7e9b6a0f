// Process-wide ids for the activities the plugin creates (launch events, kernels, flows).
//
// Ids live in [2^30, 2^31): disjoint from torch's small, increasing op ids (kineto.md 2.3), and
// valid both as GenericTraceActivity::id (int32) and as a flow id (uint32). The counter never
// resets between sessions, so host-side correlation ids stay unique across profiles; when it
// runs out it wraps to 2^30 and the wrap is counted.
// One counter per process (PluginContext); sessions receive it.
// Thread-safety: lock-free.
#pragma once

#include <atomic>
#include <cstdint>

namespace torch_mspti {

class CorrelationIds {
 public:
  static constexpr uint32_t kFirst = 1u << 30;
  static constexpr uint32_t kEnd = 1u << 31;  // exclusive

  // Counts from `first` (in [kFirst, kEnd)).
  explicit CorrelationIds(uint32_t first = kFirst) : next_(first) {}

  // Next id in [kFirst, kEnd).
  int32_t next();
  uint64_t wraps() const { return wraps_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> next_;
  std::atomic<uint64_t> wraps_{0};
};

}  // namespace torch_mspti
