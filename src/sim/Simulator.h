// The simulator's state: one object per process, created when the library is loaded and never
// destroyed (its threads outlive every session and must find it intact at process exit, as
// MSPTI's own worker threads do). Only the two extern "C" files (MsptiExports.cpp,
// SimControl.cpp) reach it through instance(); the components get their dependencies passed in.
#pragma once

#include <atomic>
#include <cstdint>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "CannRuntime.h"
#include "CorrelationIds.h"
#include "DeliveryThread.h"
#include "DeviceClock.h"
#include "DeviceRecordParser.h"
#include "DeviceTimeline.h"
#include "Environment.h"
#include "ExternalCorrelation.h"
#include "HostRecords.h"
#include "MemoryHooks.h"
#include "MstxMarkers.h"
#include "NameTable.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "Subscriber.h"
#include "TaskLauncher.h"
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
  CannRuntime& runtime() { return runtime_; }
  MemoryHooks& memoryHooks() { return memoryHooks_; }
  MstxMarkers& markers() { return markers_; }
  DeviceTimeline& timeline() { return timeline_; }
  SimOptions& options() { return options_; }
  Environment& environment() { return environment_; }
  // msptiSimCompleteForeignBuffer (ForeignBuffer.h).
  int completeForeignBuffer(uint32_t kernels, bool onNewThread);
  void fillStats(msptiSimStats* out) const;
  // A counter by its msptiSimGetCounter name; UINT64_MAX for an unknown name.
  uint64_t counter(const char* name) const;

 private:
  Simulator();

  SimOptions options_;
  SimCounters counters_;
  Environment environment_;
  NameTable names_;
  ActivitySwitches switches_;
  Subscriber subscriber_;
  std::atomic<uint64_t> subscribedAtNs_{0};  // CLOCK_REALTIME ns of the latest Subscribe
  ExternalCorrelation externalCorrelation_;
  DeviceTimeline timeline_;
  DeviceClock deviceClock_{options_};  // t0 of the drift: when the library was loaded
  ActivityBuffers buffers_;
  CorrelationIds ids_;
  HostRecords hostRecords_;
  DeviceRecordParser parser_;
  DeliveryThread delivery_;  // its sink is parser_ (the thread starts with the first record)
  TaskLauncher launcher_;
  CannRuntime runtime_;
  MemoryHooks memoryHooks_;
  MstxMarkers markers_;
};

}  // namespace torch_mspti::sim
