// The lanes the plugin owns in a trace: one process per NPU and one lane per stream on it, plus
// a host lane for each thread that launched device work while running no op.
//
// Each NPU is a trace process whose pid is torch's logical device index (kineto writes an
// activity's `device` as pid and torch reads it back as device_index), sorted below every CPU
// process: sort index kExceedMaxPid + device, above any real pid (kineto.md 2.2, 6). Each stream
// is a thread lane "stream N" sorted by stream id. A launch thread that runs no op (torch_npu's
// task queue, a housekeeping thread) is unknown to kineto, which names only threads with CPU
// activities: the plugin names it "NPU launch thread <tid>" in the CPU process. Threads that run
// ops keep kineto's name (the plugin names only lanes it owns). A device with MEMORY records has
// one more lane, "NPU memory" (kMemoryLane, after every stream: stream ids have 16 bits,
// mspti.md 4), for the runtime's allocations and its memory counter track (MemoryEvents.h).
// Thread-safety: none (one session, kineto's processing thread).
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include <IActivityProfiler.h>

namespace torch_mspti {

inline constexpr int32_t kMemoryLane = 0x10000;
// mstx ranges are drawn on lanes of their own, beside the lane they were recorded on, so that
// every lane nests (MarkerActivities.h): a device range of stream s on lane kDeviceRangeLanes +
// s * kRangeLevels + level ("stream s mstx ranges", after the memory lane), a host range of
// thread t on kHostRangeLanes + t * kRangeLevels + level ("mstx ranges <t>"); Linux thread ids
// are below 2^22 (pid_max), stream ids below 2^16 (mspti.md 4). Level 0 holds every range that
// nests with the ones before it; a range that crosses one goes one level down ("... (2)").
inline constexpr int32_t kRangeLevels = 8;
inline constexpr int32_t kDeviceRangeLanes = 0x20000;
inline constexpr int32_t kHostRangeLanes = 0x40000000;
// A user range projected onto a stream (ActivityBuilder.h) that crosses an earlier projection on
// that stream (two ranges whose kernels interleave on it) goes to kAnnotationLanes + s *
// kRangeLevels + level ("stream s user ranges (2)"); level 0 stays on the stream's lane.
inline constexpr int32_t kAnnotationLanes = 0x30000;

// The nesting level of each span [start, end] of one lane, spans in any order: in order of start
// (the longer first on a tie), a span takes the first level where it nests inside the innermost
// span still open there or starts after every one of them ended; levels are below `maxLevels` (the
// last one takes the rest). A span whose level is > 0 crossed a span before it.
std::vector<int32_t> nestingLevels(const std::vector<std::pair<int64_t, int64_t>>& spans, int32_t maxLevels);

class DeviceLanes {
 public:
  void addStream(int32_t device, int32_t stream) { streams_.emplace(device, stream); }
  // torch_npu's built-in MSPTI backend writes {pid 0, sort 0x1000000, "NPU", "Ascend NPU"} into
  // every trace (PeerBackends.h); with it loaded, devices are named and sorted the same way
  // (name "NPU", label "Ascend NPU" for device 0 and "Ascend NPU <n>" for others, sort
  // 0x1000000 + n), so that each device process has one consistent description.
  void usePeerNames(bool on) { peerNames_ = on; }
  void addLaunchThread(int32_t pid, int32_t tid) { launchThreads_.emplace(pid, tid); }
  void addMemoryLane(int32_t device) { streams_.emplace(device, kMemoryLane); }
  // A lane of mstx ranges (kDeviceRangeLanes, kHostRangeLanes): `pid` is the device or the process.
  void addRangeLane(int32_t pid, int32_t lane) { rangeLanes_.emplace(pid, lane); }
  std::vector<int32_t> devices() const;

  libkineto::DeviceInfo deviceInfo(int32_t device) const;
  std::vector<libkineto::ResourceInfo> resourceInfos() const;

 private:
  std::set<std::pair<int32_t, int32_t>> streams_;        // (device, stream)
  std::set<std::pair<int32_t, int32_t>> launchThreads_;  // (pid, tid)
  std::set<std::pair<int32_t, int32_t>> rangeLanes_;     // (pid or device, lane)
  bool peerNames_ = false;
};

}  // namespace torch_mspti
