// The device and stream lanes of the NPU part of a trace.
//
// Each NPU is a trace process whose pid is torch's logical device index (kineto writes the
// activity's `device` as pid, and torch reads it back as `device_index`), sorted below every CPU
// process: sort index kExceedMaxPid + device, above any real pid (kineto.md 2.2, 6). Each stream
// is a thread lane "stream N" sorted by stream id.
// MSPTI reports physical device ids; ASCEND_RT_VISIBLE_DEVICES renumbers them from 0 for torch.
// Thread-safety: none (used by one session on kineto's processing thread).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <IActivityProfiler.h>

namespace torch_mspti {

// Logical index of `physical` given ASCEND_RT_VISIBLE_DEVICES (empty list: identity). A device
// not in the list keeps its physical id.
int32_t logicalDevice(uint32_t physical, const std::vector<uint32_t>& visible);

class DeviceLanes {
 public:
  void add(int32_t device, int32_t stream) { lanes_.emplace(device, stream); }
  bool empty() const { return lanes_.empty(); }
  std::vector<int32_t> devices() const;

  static libkineto::DeviceInfo deviceInfo(int32_t device);
  std::vector<libkineto::ResourceInfo> resourceInfos() const;

 private:
  std::set<std::pair<int32_t, int32_t>> lanes_;
};

}  // namespace torch_mspti
