// Turns a session's records into kineto activities (processTrace).
//
// Per launch (one MSPTI correlation id, one or more kernels):
//  * link: the CUSTOM0 external id of the launch is torch's op id; getLinkedActivity resolves it
//    (never called with 0). Without external correlation (CANN 8.0.RC3) the op is the innermost
//    op interval recorded at push/pop on the API record's thread that contains the API record's
//    start (CorrelationForwarder interval mode). When the launch's API record names another thread than the op's,
//    the link is wrong (MSPTI's global stack, queued launches; mspti.md 5.4) and is rejected;
//    a kernel that starts before its op started is rejected the same way;
//  * a PRIVATEUSE1_RUNTIME launch event on the op's host lane at the host launch time (the API
//    record's start when it lies inside the op, else the op's start: some MSPTI builds reported
//    raw monotonic host times), clamped into the op's slice so viewers nest it; it starts the
//    ac2g flow and carries `correlation` but no `stream` (HTA pairs it with its kernels);
//  * each kernel: a CONCURRENT_KERNEL activity, pid = logical device, tid = stream, named exactly
//    as MSPTI names it, args device/stream/correlation/type, finishing the flow when linked.
// Dropped and counted: duplicates, zero or inverted timing, kernels outside the capture window.
// Activities are emplaced into the session's CpuTraceBuffer and logged by pointer; the buffer is
// handed to kineto through getTraceBuffer(), which keeps them alive (kineto.md 1.5).
// Thread-safety: none; runs on kineto's processing thread.
#pragma once

#include <cstdint>
#include <vector>

#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include "CorrelationForwarder.h"
#include "DeviceLanes.h"
#include "RecordStore.h"
#include "SessionStats.h"

namespace torch_mspti {

struct BuildInput {
  const RecordStore* store = nullptr;
  const libkineto::getLinkedActivityCallback* linked = nullptr;  // may be null: nothing links
  int64_t windowStart = 0;                                       // ns since the epoch; 0 = no window
  int64_t windowEnd = 0;
  std::vector<uint32_t> visibleDevices;
  const std::vector<OpInterval>* intervals = nullptr;  // interval mode only; may be null
};

void buildActivities(const BuildInput& in, libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes,
                     SessionCounters& counters);

}  // namespace torch_mspti
