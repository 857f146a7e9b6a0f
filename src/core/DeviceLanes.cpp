#include "DeviceLanes.h"

#include <fmt/format.h>
#include <output_base.h>

#include <ThreadUtil.h>

namespace torch_mspti {

int32_t logicalDevice(uint32_t physical, const std::vector<uint32_t>& visible) {
  for (size_t i = 0; i < visible.size(); ++i)
    if (visible[i] == physical) return static_cast<int32_t>(i);
  return static_cast<int32_t>(physical);
}

std::vector<int32_t> DeviceLanes::devices() const {
  std::vector<int32_t> out;
  for (const auto& [dev, stream] : lanes_)
    if (out.empty() || out.back() != dev) out.push_back(dev);
  return out;
}

libkineto::DeviceInfo DeviceLanes::deviceInfo(int32_t device) {
  return libkineto::DeviceInfo{
      .id = device,
      .sortIndex = libkineto::kExceedMaxPid + device,
      .name = fmt::format("NPU {}", device),
      .label = fmt::format("NPU {}", device),
  };
}

std::vector<libkineto::ResourceInfo> DeviceLanes::resourceInfos() const {
  std::vector<libkineto::ResourceInfo> out;
  out.reserve(lanes_.size());
  for (const auto& [dev, stream] : lanes_) {
    out.push_back(libkineto::ResourceInfo{
        .id = stream,
        .sortIndex = stream,
        .deviceId = dev,
        .name = fmt::format("stream {}", stream),
    });
  }
  return out;
}

}  // namespace torch_mspti
