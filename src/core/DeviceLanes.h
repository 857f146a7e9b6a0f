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
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include <IActivityProfiler.h>

namespace torch_mspti {

inline constexpr int32_t kMemoryLane = 0x10000;
// Lanes of their own for spans that need not nest with their recorded lane (DeviceLanes::rangeLane):
// mstx ranges (MarkerActivities.h), beside their thread ("mstx ranges <tid>") or stream ("stream s
// mstx ranges"), and user ranges projected onto a stream (ActivityBuilder.h) that cross an earlier
// projection there ("stream s user ranges (2)"); a further level of each is "... (n)". Lane ids
// are handed out in order of first use, from kRangeLanesBase on a device (above every stream id,
// which has 16 bits, and kMemoryLane) and from kHostRangeLanesBase in the CPU process (above every
// Linux thread id, below 2^22).
inline constexpr int32_t kRangeLanesBase = 0x20000;
inline constexpr int32_t kHostRangeLanesBase = 0x40000000;
enum class RangeLane : uint8_t { kHostMstx, kStreamMstx, kStreamUserRanges };

// The nesting level of each span [start, end] of one lane, spans in any order: in order of start
// (the longer first on a tie), a span takes the first level where it nests inside the innermost
// span still open there or starts after every one of them ended. A span whose level is > 0 crossed
// a span before it. O(n log n + n * levels).
std::vector<int32_t> nestingLevels(const std::vector<std::pair<int64_t, int64_t>>& spans);

class DeviceLanes {
 public:
  void addStream(int32_t device, int32_t stream) { streams_.emplace(device, stream); }
  // torch_npu's built-in MSPTI backend writes {pid 0, sort 0x1000000, "NPU", "Ascend NPU"} into
  // every trace (PeerBackends.h); with it loaded, devices are named and sorted the same way
  // (name "NPU", label "Ascend NPU" for device 0 and "Ascend NPU <n>" for others, sort
  // 0x1000000 + n), so that each device process has one consistent description.
  void usePeerNames(bool on) { peerNames_ = on; }
  void addLaunchThread(int32_t pid, int32_t tid) {
    if (tid != keepName_) launchThreads_.emplace(pid, tid);
  }
  // A thread kineto always names (the one that started the profile, which torch records whatever
  // the settings): never renamed as a launch thread, even when the session was told of no op on it.
  void keepNameOf(int32_t tid) { keepName_ = tid; }
  void addMemoryLane(int32_t device) { streams_.emplace(device, kMemoryLane); }
  // The lane id for level `level` of the `kind` spans recorded on lane `of` (a tid or a stream)
  // of `pid` (the process, or the logical device): handed out on first use, named in resourceInfos.
  int32_t rangeLane(int32_t pid, RangeLane kind, int32_t of, int32_t level);
  std::vector<int32_t> devices() const;

  libkineto::DeviceInfo deviceInfo(int32_t device) const;
  std::vector<libkineto::ResourceInfo> resourceInfos() const;

 private:
  std::set<std::pair<int32_t, int32_t>> streams_;        // (device, stream)
  std::set<std::pair<int32_t, int32_t>> launchThreads_;  // (pid, tid)
  // (pid or device, kind, recorded lane, level) -> lane id
  std::map<std::tuple<int32_t, RangeLane, int32_t, int32_t>, int32_t> rangeLanes_;
  int32_t nextDeviceLane_ = kRangeLanesBase;
  int32_t nextHostLane_ = kHostRangeLanesBase;
  bool peerNames_ = false;
  int32_t keepName_ = -1;
};

}  // namespace torch_mspti
