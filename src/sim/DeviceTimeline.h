// The simulated device timeline: one tail per (device, stream). A task (kernel, collective, copy,
// memset) starts at max(launch + launch latency, end of the previous task on its stream); tasks on
// different streams overlap freely. Times are CLOCK_REALTIME ns and the timeline runs in real
// time: a task "has ended" when the wall clock passes its end. These are the true times; what the
// records report may differ (DeviceClock).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace torch_mspti::sim {

struct TaskSlot {
  uint64_t start;
  uint64_t end;
  uint64_t ordinal;  // 1 for the first task ever placed on its stream, then 2, 3, ...
};

class DeviceTimeline {
 public:
  DeviceTimeline() = default;
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  // Places `count` tasks of `durationNs` back to back on (device, stream), none starting before
  // `earliestStartNs`.
  std::vector<TaskSlot> place(uint32_t device, uint32_t stream, uint64_t earliestStartNs, uint64_t durationNs,
                              uint32_t count);
  // End of the last task on (device, stream); 0 when none.
  uint64_t streamTail(uint32_t device, uint32_t stream) const;
  // Latest end over the streams of `device`, or of every device when device < 0; 0 when none.
  uint64_t deviceTail(int64_t device) const;

 private:
  struct Stream {
    uint64_t tail = 0;
    uint64_t placed = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<uint32_t, uint32_t>, Stream> streams_;
};

}  // namespace torch_mspti::sim
