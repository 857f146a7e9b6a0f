// The per-kind enable switches (msptiActivityEnable/Disable/IsEnabled), one atomic each, as in
// MSPTI's std::array<atomic<bool>, 13> (mspti.md 2.3).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>

#include "ActivityKinds.h"
#include "Generation.h"
#include "mspti/mspti_activity.h"

namespace torch_mspti::sim {

class ActivitySwitches {
 public:
  // Kinds 1..12 (MARKER..RUNTIME_API) are the ones Enable/Disable accept (mspti.md 2.3); older
  // generations stop at the last kind they knew (the kind table's first generation per kind).
  static bool isValidKind(int kind) { return kind >= 0 && kindKnownTo(static_cast<uint32_t>(kind), kGeneration); }

  // HCCL, MEMORY, MEMSET and MEMCPY need libmspti in LD_PRELOAD in 26.x (mspti.md 2.3, 5.5: the
  // kind table's needsPreload); the error code did not exist before 26.0.
  static bool needsLdPreload(int kind) {
    const ActivityKindInfo* k = kind >= 0 ? activityKind(static_cast<uint32_t>(kind)) : nullptr;
    return kLdPreloadRule && k && k->needsPreload;
  }

  void set(int kind, bool on) {
    if (isValidKind(kind)) {
      switches_[static_cast<size_t>(kind)].store(on, std::memory_order_release);
    }
  }

  // The real IsEnabled does no bounds check (undefined behaviour for kind >= 13, mspti.md 2.3);
  // the simulator answers false instead of reading past its array.
  bool isOn(int kind) const {
    return isValidKind(kind) && switches_[static_cast<size_t>(kind)].load(std::memory_order_acquire);
  }

  // Whether the device tasks (driver channel readers) of KERNEL or COMMUNICATION run. MSPTI starts
  // them when that kind is enabled on a subscribed process, Disable stops that kind's and
  // Unsubscribe stops all; Subscribe alone does not restart them, so enabling before subscribing
  // collects no device record (mspti.md 2.3, 5.6). Other kinds have no device tasks (false).
  void setDeviceTasksRunning(int kind, bool running) {
    if (std::atomic<bool>* tasks = deviceTasks(kind)) {
      tasks->store(running, std::memory_order_release);
    }
  }
  void stopAllDeviceTasks() {
    kernelTasks_.store(false, std::memory_order_release);
    communicationTasks_.store(false, std::memory_order_release);
  }
  bool deviceTasksRunning(int kind) const {
    return kind == MSPTI_ACTIVITY_KIND_KERNEL          ? kernelTasks_.load(std::memory_order_acquire)
           : kind == MSPTI_ACTIVITY_KIND_COMMUNICATION ? communicationTasks_.load(std::memory_order_acquire)
                                                       : false;
  }

 private:
  std::array<std::atomic<bool>, MSPTI_ACTIVITY_KIND_COUNT> switches_{};
  std::atomic<bool>* deviceTasks(int kind) {
    return kind == MSPTI_ACTIVITY_KIND_KERNEL          ? &kernelTasks_
           : kind == MSPTI_ACTIVITY_KIND_COMMUNICATION ? &communicationTasks_
                                                       : nullptr;
  }

  std::atomic<bool> kernelTasks_{false};
  std::atomic<bool> communicationTasks_{false};
};

}  // namespace torch_mspti::sim
