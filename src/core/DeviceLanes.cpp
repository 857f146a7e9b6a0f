#include "DeviceLanes.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <output_base.h>

#include "TorchCompat.h"

namespace torch_mspti {

std::vector<int32_t> DeviceLanes::devices() const {
  std::set<int32_t> out;
  for (const auto& [dev, stream] : streams_) out.insert(dev);
  // A device whose only spans are mstx ranges (its kernels dropped, or KERNEL not collected).
  for (const auto& [key, lane] : rangeLanes_)
    if (std::get<1>(key) != RangeLane::kHostMstx) out.insert(std::get<0>(key));
  return {out.begin(), out.end()};
}

libkineto::DeviceInfo DeviceLanes::deviceInfo(int32_t device) const {
  if (peerNames_) {
    return compat::makeDeviceInfo(device, 0x1000000 + device, "NPU",
                                  device == 0 ? std::string("Ascend NPU") : fmt::format("Ascend NPU {}", device));
  }
  return compat::makeDeviceInfo(device, libkineto::kExceedMaxPid + device, fmt::format("NPU {}", device),
                                fmt::format("NPU {}", device));
}

std::vector<int32_t> nestingLevels(const std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::vector<int32_t> level(spans.size(), 0);
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_tuple(spans[a].first, -spans[a].second, a) < std::make_tuple(spans[b].first, -spans[b].second, b);
  });
  std::vector<std::vector<int64_t>> open;  // per level, the ends of the spans open there, innermost last
  for (size_t i : order) {
    const auto [start, end] = spans[i];
    int32_t at = 0;
    for (;; ++at) {
      if (static_cast<size_t>(at) == open.size()) open.emplace_back();
      auto& ends = open[static_cast<size_t>(at)];
      while (!ends.empty() && ends.back() <= start) ends.pop_back();
      if (ends.empty() || ends.back() >= end) break;
    }
    open[static_cast<size_t>(at)].push_back(end);
    level[i] = at;
  }
  return level;
}

int32_t DeviceLanes::rangeLane(int32_t pid, RangeLane kind, int32_t of, int32_t level) {
  auto [it, fresh] = rangeLanes_.try_emplace({pid, kind, of, level}, 0);
  if (fresh) it->second = kind == RangeLane::kHostMstx ? nextHostLane_++ : nextDeviceLane_++;
  return it->second;
}

std::vector<libkineto::ResourceInfo> DeviceLanes::resourceInfos() const {
  std::vector<libkineto::ResourceInfo> out;
  out.reserve(streams_.size() + launchThreads_.size());
  for (const auto& [dev, stream] : streams_) {
    out.push_back(compat::makeResourceInfo(
        dev, stream, stream, stream == kMemoryLane ? std::string("NPU memory") : fmt::format("stream {}", stream)));
  }
  for (const auto& [pid, tid] : launchThreads_) {
    out.push_back(compat::makeResourceInfo(pid, tid, tid, fmt::format("NPU launch thread {}", tid)));
  }
  for (const auto& [key, lane] : rangeLanes_) {
    const auto& [pid, kind, of, level] = key;
    const std::string more = level ? fmt::format(" ({})", level + 1) : std::string();
    std::string name = kind == RangeLane::kHostMstx     ? fmt::format("mstx ranges {}{}", of, more)
                       : kind == RangeLane::kStreamMstx ? fmt::format("stream {} mstx ranges{}", of, more)
                                                        : fmt::format("stream {} user ranges{}", of, more);
    out.push_back(compat::makeResourceInfo(pid, lane, lane, std::move(name)));
  }
  return out;
}

}  // namespace torch_mspti
