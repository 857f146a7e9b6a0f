// Turns the session's paired mstx markers (MarkerTable.h) into kineto activities (processTrace):
//  * a host marker (sourceKind HOST) goes on the lane of the thread that made it (pid, tid; a
//    range on that thread's mstx lane, below) as a
//    PRIVATEUSE1_DRIVER event ("privateuse1_driver" in the trace): a range as a span, a mark or an
//    unpaired start or end as a span of no length. Not USER_ANNOTATION or CPU_INSTANT_EVENT: torch
//    drops those from its events when it did not record them itself, with a warning that blames
//    kineto (kineto.md 1.6); a host-side privateuse1 type is a CPU event to torch, so a host range
//    is a row of its own in key_averages (its length as CPU time, as a record_function range);
//  * a device marker (sourceKind DEVICE) goes on its stream's lane (logical device, stream; a
//    range on that stream's mstx lane) as a
//    GPU_USER_ANNOTATION span, as ActivityBuilder writes user ranges on device lanes: not linked
//    to any op, so torch credits it no device time (its is_user_annotation keeps it out of the
//    key_averages totals, kineto.md 2.4); narrowed by kineto's 1 ns widening on each side
//    (ActivityBuilder.h). A device mark or unpaired end is such a span of no length.
// A range (paired start and end) is drawn whole on a lane of its own beside the one it was
// recorded on ("mstx ranges <tid>" in the CPU process, "stream <s> mstx ranges" on the device;
// DeviceLanes.h), because an mstx range need not nest with the ops, kernels or other ranges of its
// thread or stream (started inside one record_function and ended inside another, two ranges that
// cross, a device range over parts of two kernels), and viewers such as Perfetto drop or mis-nest
// slices that partially overlap on one track (google/perfetto#928, #4280). Ranges that cross an
// earlier range of their lane go one level further ("... (2)", as many as it takes; counted in
// rows.marker_ranges_on_extra_lanes), so that every lane nests. Marks and unpaired ends, spans of no
// length, stay on the recorded lane.
// Every activity carries args "domain" ("unknown" when no record named one), "marker id" and,
// for an instant kept in place of a range end, "unpaired" ("start" or "end"); the name is the
// message ("mstx range end" for an unpaired end, whose record has none; "unknown" for any other
// marker without one).
// Thread-safety: none; kineto's processing thread.
#pragma once

#include <libkineto.h>

#include "CorrelationIds.h"
#include "DeviceLanes.h"
#include "MarkerTable.h"
#include "OpTimeline.h"
#include "SessionCounters.h"

namespace torch_mspti {

void buildMarkerActivities(const MarkerTable& markers, const OpTimeline& ops, CorrelationIds& ids,
                           libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes, SessionCounters& counters);

}  // namespace torch_mspti
