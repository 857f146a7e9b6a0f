// Turns a session's launches into kineto activities (processTrace).
//
// Per launch (one MSPTI correlation id, one or more device rows), with the link decided by the
// rule of LinkResolver.h:
//  * a PRIVATEUSE1_RUNTIME launch event named as MSPTI names the launch call, at the call's host
//    time: nested in the op it is linked to (clamped into the op's slice so viewers nest it), or,
//    for a thread that ran no op then, on that thread's own lane; it starts the ac2g flow and
//    carries `correlation` but no `stream` (HTA pairs it with its rows by correlation);
//  * each device row: CONCURRENT_KERNEL for kernels and collectives (collectives are kernels of
//    the NCCL kind on CUDA, and only kernel-type rows get device time in torch, kineto.md 2.4),
//    GPU_MEMCPY for copies, GPU_MEMSET for memsets; pid = logical device, tid = stream; named as
//    MSPTI names kernels and collectives and as kineto names CUDA copies ("Memcpy HtoD (Host ->
//    Device)", "Memset (Device)"); args device, stream, correlation, link, and the kind's facts:
//    kernel "type"; collective "type" (COMMUNICATION), "Collective name", "algorithm", "dtype",
//    "bytes", "comm name" and, from the collective join (CollectiveJoin.h), "In msg nelems",
//    "Process Group Name" and the other NCCL fields of a joined row; copy/memset "bytes",
//    "memory bandwidth (GB/s)", "copy kind", "async"; the flow's finish when a launch event exists;
//    linked to the op (External id, device time) only when the link is made;
//  * a GPU_USER_ANNOTATION span per (user range, device, stream) covering the rows launched inside
//    the range, like kineto's CUDA spans (GenericActivityProfiler GpuUserEventMap): id = the
//    range's correlation id, not linked, so torch credits it no op (pytorch#130730) and its
//    is_user_annotation keeps it out of the key_averages totals. kineto's Chrome writer widens
//    every GPU_USER_ANNOTATION by 1 ns on each side (output_json.cpp handleActivity, kineto
//    ce13b132), which would make the span overlap the rows that touch its first and last row on
//    the lane; so the span is handed to kineto 1 ns narrower on each side and is written exactly
//    over its rows (a span shorter than 2 ns cannot be narrowed and is written 2 ns long). When
//    two ranges' rows interleave on a stream (work of a range that ended on the host still
//    running after the next range's first row), their spans cross: the one that crosses an
//    earlier span goes to a lane of its own, "stream s user ranges (2)" (DeviceLanes.h
//    nestingLevels; counted in rows.annotations_on_extra_lanes), so that every lane nests.
// Activities are emplaced into the session's CpuTraceBuffer and logged by pointer; the buffer is
// handed to kineto through getTraceBuffer(), which keeps them alive (kineto.md 1.5).
// Thread-safety: none; kineto's processing thread.
#pragma once

#include <cstdint>
#include <string>

#include <IActivityProfiler.h>
#include <libkineto.h>

#include "CollectiveJoin.h"
#include "CorrelationIds.h"
#include "DeviceLanes.h"
#include "LaunchTable.h"
#include "OpTimeline.h"
#include "SessionCounters.h"

namespace torch_mspti {

struct BuildContext {
  const LaunchTable* launches = nullptr;
  const OpTimeline* ops = nullptr;
  CorrelationIds* ids = nullptr;
  int32_t processId = 0;                         // pid of the host process (lane of launch threads)
  const CollectiveTable* collectives = nullptr;  // may be null: no collective row is joined
};

void buildActivities(const BuildContext& in, libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes,
                     SessionCounters& counters);

}  // namespace torch_mspti
