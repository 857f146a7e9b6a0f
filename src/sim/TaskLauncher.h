// The launch path shared by every device task the simulated runtime issues: kernels
// (msptiSimLaunchKernel(s)), collectives (msptiSimLaunchCommunication), copies and memsets
// (msptiSimMemcpy / msptiSimMemset). What the CANN runtime, libprofapi and MSPTI do together for
// one launch on the calling thread (mspti.md 4, 5.4):
//  1. if the task is reported to MSPTI at all (DeviceTask::reportable), a subscriber exists and
//     the task's record kind is enabled, a correlation id is minted; it becomes the thread's
//     current id and, with EXTERNAL_CORRELATION on, one external record per non-empty stack is
//     written at once;
//  2. the task(s) go on the device timeline, and with an id, their device records are scheduled
//     on the driver reader, `delivery delay` after each task's end (unless no device task reads
//     the channel: those records are counted as dropped), with their times as the device clock
//     reports them (DeviceClock, option early_start_every);
//  3. a synchronous call waits for its last task to end;
//  4. while subscribed, the call's API record (DeviceTask::apiName) with its host span.
// A copy's MEMCPY record is not a device record (option copies_at_call_end, default on): the
// interposed ACL call writes it itself at its end, spanning the host call (mspti.md 5.7).
#pragma once

#include <atomic>
#include <cstdint>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "CorrelationIds.h"
#include "DeliveryThread.h"
#include "DeviceClock.h"
#include "DeviceRecord.h"
#include "DeviceRecordParser.h"
#include "DeviceTimeline.h"
#include "Environment.h"
#include "ExternalCorrelation.h"
#include "HostRecords.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "Subscriber.h"

namespace torch_mspti::sim {

// One launch call: `count` tasks of `durationNs` each, back to back on (device, stream).
struct DeviceTask {
  DeviceRecord prototype;  // its kind and kind-specific fields (name, bytes, ...); the rest is filled in
  bool reportable;         // the runtime reports this task to MSPTI's parser at all
  uint32_t device;         // logical index; records carry the physical id
  uint32_t stream;
  uint64_t durationNs;
  uint32_t count;
  const char* apiName;  // the API record written after the launch
  bool hostWaits;       // synchronous call: returns once its last task has ended
  // Runtime calls the launching thread makes around the launch (option api_records_per_launch):
  // API records written before it (carrying the previous id) and after it (sharing the new one).
  uint32_t callsBefore;
  uint32_t callsAfter;
};

struct LaunchContext {
  const SimOptions& options;
  SimCounters& counters;
  const Environment& environment;
  const ActivitySwitches& switches;
  const Subscriber& subscriber;
  const ExternalCorrelation& externalCorrelation;
  DeviceTimeline& timeline;
  const DeviceClock& deviceClock;
  CorrelationIds& ids;
  HostRecords& hostRecords;
  DeliveryThread& delivery;
  DeviceRecordParser& parser;  // writes a record into the buffer now (copies at their call's end)
};

class TaskLauncher {
 public:
  explicit TaskLauncher(const LaunchContext& context) : ctx_(context) {}
  TaskLauncher(const TaskLauncher&) = delete;
  TaskLauncher& operator=(const TaskLauncher&) = delete;

  // Returns the minted correlation id, or 0 when none was minted (the tasks still run).
  uint64_t launch(const DeviceTask& task);

 private:
  // Whether a device task reads the channel the records of `kind` travel on.
  bool deviceReports(int kind) const;
  // Reported start and end of `slot` (device clock, early starts).
  void reportTiming(DeviceRecord& record, const TaskSlot& slot) const;
  // `count` runtime-call API records from `names` (cycled), each a call of its own.
  void writeRuntimeCalls(const char* const* names, size_t nameCount, uint32_t count);
  // A copy's MEMCPY record over [startNs, now] (host clock), written into the buffer now, with
  // the held-back external records when `withExternals` (option reorder_external).
  void writeAtCallEnd(const DeviceTask& task, uint64_t correlationId, uint64_t epoch, uint64_t startNs,
                      bool withExternals);

  LaunchContext ctx_;
};

}  // namespace torch_mspti::sim
