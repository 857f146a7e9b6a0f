#include "DeviceTimeline.h"

#include <algorithm>

namespace torch_mspti::sim {

std::vector<TaskSlot> DeviceTimeline::place(uint32_t device, uint32_t stream, uint64_t earliestStartNs,
                                            uint64_t durationNs, uint32_t count) {
  std::vector<TaskSlot> slots;
  slots.reserve(count);
  std::lock_guard<std::mutex> lock(mutex_);
  Stream& state = streams_[{device, stream}];
  uint64_t start = std::max(earliestStartNs, state.tail);
  for (uint32_t i = 0; i < count; ++i) {
    slots.push_back({start, start + durationNs, ++state.placed});
    start += durationNs;
  }
  if (!slots.empty()) {
    state.tail = slots.back().end;
  }
  return slots;
}

uint64_t DeviceTimeline::streamTail(uint32_t device, uint32_t stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find({device, stream});
  return it == streams_.end() ? 0 : it->second.tail;
}

uint64_t DeviceTimeline::deviceTail(int64_t device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t latest = 0;
  for (const auto& [key, state] : streams_) {
    if (device < 0 || key.first == static_cast<uint64_t>(device)) {
      latest = std::max(latest, state.tail);
    }
  }
  return latest;
}

}  // namespace torch_mspti::sim
