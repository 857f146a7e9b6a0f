// The simulator's state: one object per process, created when the library is loaded and never
// destroyed (its threads outlive every session and must find it intact at process exit, as
// MSPTI's own worker threads do). Only the two extern "C" files (MsptiExports.cpp,
// SimControl.cpp) reach it through instance(); the components get their dependencies passed in.
#pragma once

#include <cstdint>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "DeliveryThread.h"
#include "DeviceTimeline.h"
#include "Environment.h"
#include "ExternalCorrelation.h"
#include "KernelLauncher.h"
#include "NameTable.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "Subscriber.h"
#include "mspti/mspti_activity.h"
#include "mspti/mspti_callback.h"
#include "mspti_sim.h"

namespace torch_mspti::sim {

class Simulator {
 public:
  static Simulator& instance();

  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  msptiResult subscribe(msptiSubscriberHandle* handle, msptiCallbackFunc callback, void* userdata);
  msptiResult unsubscribe(msptiSubscriberHandle handle);
  msptiResult enable(int kind);
  msptiResult disable(int kind);
  bool isEnabled(int kind) const { return switches_.isOn(kind); }
  msptiResult pushExternalCorrelationId(uint32_t kind, uint64_t id);
  msptiResult popExternalCorrelationId(uint32_t kind, uint64_t* lastId);

  ActivityBuffers& buffers() { return buffers_; }
  KernelLauncher& launcher() { return launcher_; }
  DeviceTimeline& timeline() { return timeline_; }
  SimOptions& options() { return options_; }
  Environment& environment() { return environment_; }
  void fillStats(msptiSimStats* out) const;

 private:
  Simulator();

  SimOptions options_;
  SimCounters counters_;
  Environment environment_;
  NameTable names_;
  ActivitySwitches switches_;
  Subscriber subscriber_;
  ExternalCorrelation externalCorrelation_;
  DeviceTimeline timeline_;
  ActivityBuffers buffers_;
  DeliveryThread delivery_;  // its sink calls launcher_, built next (the thread starts later)
  KernelLauncher launcher_;
};

}  // namespace torch_mspti::sim
