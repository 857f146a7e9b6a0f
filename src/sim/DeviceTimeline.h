// The simulated device timeline: one tail per (device, stream). A kernel starts at
// max(launch + launch latency, end of the previous kernel on its stream); kernels on different
// streams overlap freely. Times are CLOCK_REALTIME ns and the timeline runs in real time: a kernel
// "has ended" when the wall clock passes its end.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace torch_mspti::sim {

struct KernelSlot {
  uint64_t start;
  uint64_t end;
};

class DeviceTimeline {
 public:
  DeviceTimeline() = default;
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  // Places `count` kernels of `durationNs` back to back on (device, stream), none starting before
  // `earliestStartNs`.
  std::vector<KernelSlot> place(uint32_t device, uint32_t stream, uint64_t earliestStartNs, uint64_t durationNs,
                                uint32_t count);
  // End of the last kernel on (device, stream); 0 when none.
  uint64_t streamTail(uint32_t device, uint32_t stream) const;
  // Latest end over the streams of `device`, or of every device when device < 0; 0 when none.
  uint64_t deviceTail(int64_t device) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> tails_;
};

}  // namespace torch_mspti::sim
