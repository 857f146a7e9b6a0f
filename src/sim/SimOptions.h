// The simulator's tunables (msptiSimSetOption / msptiSimGetOption keys).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace torch_mspti::sim {

enum class Option : size_t {
  kDeliveryDelayNs,       // kernel end -> record written by the driver reader (mspti.md 5.3: ~200 ms)
  kLaunchLatencyNs,       // host launch -> earliest device start
  kDisablePulls,          // Disable(KERNEL) pulls ended kernels' records first (26.1 halProfDataFlush)
  kDriverFlushNs,         // time the driver flush inside Disable takes (mspti.md 2.3: at most 20 ms)
  kDropAfterDisable,      // records due while KERNEL is disabled are discarded (parser stopped)
  kPerThreadStacks,       // external-correlation stacks per thread (NOT the real behaviour, 5.4)
  kBufferThresholdPct,    // current buffer is queued once this full (ACTIVITY_BUFFER_THRESHOLD 0.8)
  kEnableAfterSubscribe,  // kernel device tasks start only at Enable(KERNEL) while subscribed (5.6)
  kCopiesAtCallEnd,       // 1: MEMCPY written by the ACL call at its end, host span (5.7); 0: as a device record
  kParseAfterPullNs,      // records a Disable's driver flush pulled are parsed this long after it returns (2.3)
  // Harsh modes: behaviour some MSPTI builds have (mspti.md 4, 5.5, 11), off by default:
  kApiClock,                 // 1: API records report CLOCK_MONOTONIC_RAW host times
  kDeviceClockOffsetNs,      // device record times are reported this far off the host clock
  kDeviceClockDriftPpm,      // ... plus this drift (parts per million since the library was loaded)
  kEarlyStartEvery,          // every Nth task on a stream is reported starting early (0 = off)
  kEarlyStartNs,             // ... by this much
  kDeliverAfterUnsubscribe,  // 1: Unsubscribe keeps records in flight; they land in a later session
  kKernelsNeedPreload,       // 1: KERNEL/COMMUNICATION records only with libmspti in LD_PRELOAD
  kDestroyAtExit,            // 1: MSPTI entry points abort once static destruction tore the library down
  kApiRecordsPerLaunch,      // extra runtime API records around each kernel launch
  kUnsubscribePollNs,        // Unsubscribe joins a channel poller whose poll lasts this long (2.2)
  // Fault injection (not MSPTI behaviour; the faults a plugin must survive, mspti.md 6, 11):
  kThrowIn,                 // bitmask of entry points that throw a C++ exception (MSPTI_SIM_THROW_*)
  kReorderExternal,         // 1: external record right after its kernel's; 2: in a later buffer
  kDuplicateKernelRecords,  // every KERNEL record is written twice
  kBadTimingEvery,          // every Nth KERNEL record gets zero or inverted timing (0 = off)
  kUnknownKindEvery,        // a record of kind 99 precedes every Nth KERNEL record (0 = off)
  kNeverDeliver,            // kernels run but their records never reach a buffer
  kForeignCorrelationId,    // != 0: msptiSimCompleteForeignBuffer's records carry this id (as uint64)
  kCompletionDelayNs,       // a full buffer's worker waits this long before the complete callback
  kCount
};

struct OptionSpec {
  const char* key;
  int64_t defaultValue;
  int64_t minValue;
  int64_t maxValue;
};

// Lock-free: every value is one atomic, read on the hot paths (launch, delivery).
class SimOptions {
 public:
  SimOptions();
  SimOptions(const SimOptions&) = delete;
  SimOptions& operator=(const SimOptions&) = delete;

  // 0 on success, -1 for an unknown key or a value outside [min, max].
  int set(const char* key, int64_t value);
  // INT64_MIN for an unknown key.
  int64_t get(const char* key) const;
  int64_t get(Option option) const { return values_[static_cast<size_t>(option)].load(std::memory_order_relaxed); }
  bool flag(Option option) const { return get(option) != 0; }
  void resetDefaults();

  static const std::array<OptionSpec, static_cast<size_t>(Option::kCount)>& specs();

 private:
  std::array<std::atomic<int64_t>, static_cast<size_t>(Option::kCount)> values_;
};

}  // namespace torch_mspti::sim
