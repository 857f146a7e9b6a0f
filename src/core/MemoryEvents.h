// The runtime's device allocations and releases (MEMORY records) as the trace shows them.
//
// MSPTI writes a MEMORY record as an interposed aclrtMalloc/aclrtFree returns (mspti.md 5.8): the
// host call's span, the address, the bytes, the device; no stream and no thread. These are the
// runtime's own allocations (a caching allocator's segments, HCCL buffers, workspaces), not
// torch's tensors, which torch's own [memory] events already show (profile_memory=True).
// At stop (build) each record goes through the session's admission (Admission.h): an earlier
// session's id is dropped as stale, its times are put on CLOCK_REALTIME (MSPTI's host clock, as
// API records' are) and it is windowed by its start on [start, collection end] (the drops counted
// in dropped.* and dropped_by_kind.MEMORY). Kept records are put on their logical device, ordered by time,
// and each is given the allocation call its correlation id names (the API record, and the op
// hint), so that the one link rule (LinkResolver) can place it in an op. processTrace
// (buildMemoryActivities) then writes per event:
//  * an instant on the device's "NPU memory" lane (kMemoryLane), named "Memory Allocation" or
//    "Memory Release", with bytes, address (hex), correlation, link and, when linked, the op's
//    correlation id ("op");
//  * a sample of the device's counter track "NPU runtime memory" whose value, "allocated", is the
//    net bytes the runtime allocated on that device since the session began (allocations minus
//    releases; it can be negative when the session frees memory allocated before it). Written as
//    kineto counter events where kineto has them (TorchCompat.h setCounter), else left out.
// Counts: memory.allocations / releases / releases_without_bytes / linked_to_op /
// counter_samples, rows.memory_events. Times: ns since the Unix epoch. Thread-safety: none.
#pragma once

#include <cstdint>
#include <vector>

#include <IActivityProfiler.h>
#include <libkineto.h>

#include "DeviceLanes.h"
#include "HostClock.h"
#include "LaunchTable.h"
#include "NpuRecords.h"
#include "OpTimeline.h"
#include "RecordStore.h"
#include "SessionCounters.h"

namespace torch_mspti {

struct MemoryEvent {
  MemoryRecord record;
  int32_t device = 0;     // logical device (ASCEND_RT_VISIBLE_DEVICES applied)
  Launch call;            // the allocation call for the link rule (no rows)
  int64_t allocated = 0;  // the device's net bytes allocated in the session after this event
};

struct MemoryTimeline {
  std::vector<MemoryEvent> events;  // by end time, then address

  static MemoryTimeline build(const RecordStore& store, Admission& admission,
                              const std::vector<uint32_t>& visibleDevices, SessionCounters& counters);
};

void buildMemoryActivities(const MemoryTimeline& timeline, const OpTimeline& ops, libkineto::CpuTraceBuffer& buffer,
                           DeviceLanes& lanes, SessionCounters& counters);

}  // namespace torch_mspti
