// The process environment the real library and runtime read once: LD_PRELOAD (MSPTI 26.x caches
// whether it names libmspti, mspti.md 2.3) and ASCEND_RT_VISIBLE_DEVICES (the runtime's logical ->
// physical device map, mspti.md 4). Read when the simulator is loaded; reload() re-reads them.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace torch_mspti::sim {

class Environment {
 public:
  Environment() { reload(); }
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  void reload();

  // True when LD_PRELOAD contains "libmspti.so" (the real library's test) or this simulator's own
  // file name (e.g. "libmspti_sim_26_0.so"), so that preloading the simulator itself qualifies
  // while preloading a different simulator build does not.
  bool ldPreloadHasMspti() const;

  // Physical id of logical device `logical`: the logical-th entry of ASCEND_RT_VISIBLE_DEVICES,
  // or `logical` itself when the variable is unset, empty or has no such entry.
  uint32_t physicalDevice(uint32_t logical) const;

 private:
  mutable std::mutex mutex_;
  bool ldPreloadHasMspti_ = false;
  std::vector<uint32_t> visibleDevices_;
};

}  // namespace torch_mspti::sim
