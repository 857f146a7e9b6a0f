// The counters of one profiling session: one list (TORCH_MSPTI_SESSION_COUNTERS) from which the
// struct, the sum over sessions, the difference of two readings, the JSON of the health report
// and diagnostics, and the Python properties are generated.
//
// Nothing the plugin drops, repairs or cannot link goes uncounted. Each counter belongs to a
// group (the JSON object it is written in) and a phase: kStop counters are final when the
// session has stopped, so they are in the trace's health report (kineto reads the report before
// processTrace); kTrace counters are computed in processTrace (rows and links), so they are in
// torch_mspti.diagnostics() and in each device row's "link" argument, not in the report.
// Thread-safety: plain data, owned by one session.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <mspti/mspti_activity.h>

#include "LinkStates.h"

namespace torch_mspti {

enum class CounterPhase : uint8_t { kStop, kTrace };
enum class CounterMerge : uint8_t { kSum, kMax };

// One "links" counter per link state (LinkStates.h), keyed by the state's name.
#define TORCH_MSPTI_LINK_COUNTER(X, e, name, linked, field, meaning) X("links", field, name, kTrace, kSum, meaning)

// X(group, field, json key, phase, merge, description)
#define TORCH_MSPTI_SESSION_COUNTERS(X)                                                                                \
  X("buffers", buffersRequested, "requested", kStop, kSum, "buffers MSPTI asked for")                                  \
  X("buffers", buffersCompleted, "completed", kStop, kSum, "buffers MSPTI handed back")                                \
  X("buffers", buffersDeclined, "declined", kStop, kSum,                                                               \
    "requests refused at the pool cap (MSPTI drops records until it gets a buffer)")                                   \
  X("buffers", nullCompletions, "null_completions", kStop, kSum, "completions with a NULL buffer (after a decline)")   \
  X("buffers", foreignBuffers, "foreign", kStop, kSum,                                                                 \
    "buffers another tool requested, completed into our callback: walked, never recycled or freed")                    \
  X("buffers", abandonedBuffers, "abandoned", kStop, kSum,                                                             \
    "buffers whose tail held an unknown kind or a truncated record")                                                   \
  X("buffers", abandonedBytes, "abandoned_bytes", kStop, kSum, "bytes not walked in abandoned buffers")                \
  X("buffers", failedCompletions, "failed", kStop, kSum,                                                               \
    "completions that threw (out of memory copying or recycling): the buffer freed, its unappended records lost")      \
  X("correlation", correlationErrors, "errors", kStop, kSum, "failed external-correlation push/pop calls")             \
  X("correlation", correlationOverflow, "overflow", kStop, kSum,                                                       \
    "ops nested deeper than the per-thread stack (not forwarded, not logged)")                                         \
  X("correlation", unbalancedAtStop, "unbalanced_at_stop", kStop, kSum,                                                \
    "ids still on MSPTI's stack at stop (popped by stop)")                                                             \
  X("correlation", correlationInterleaved, "interleaved", kStop, kSum,                                                 \
    "pops that returned another thread's id: threads interleave on MSPTI's process-global stack")                      \
  X("correlation", junkCorrelationIds, "junk_ids", kStop, kSum,                                                        \
    "launched correlation ids apart from the session's own run of ids (foreign or misread records): never a "          \
    "watermark")                                                                                                       \
  X("correlation", opsLogged, "ops_logged", kStop, kSum, "op and user-range ids logged per thread")                    \
  X("correlation", opLogLost, "op_log_lost", kStop, kSum, "op ids not logged (no memory for a log chunk)")             \
  X("correlation", staleStackEntries, "stale_stack_entries", kStop, kSum,                                              \
    "entries of earlier sessions cleared from a thread's stack (pops that arrived on another thread)")                 \
  X("dropped", outOfWindow, "out_of_window", kStop, kSum,                                                              \
    "device records whose launch, and memory events and markers whose own time, lie outside the profiling window")     \
  X("dropped", invalidTiming, "invalid_timing", kStop, kSum,                                                           \
    "device records without timing (start = end = 0) or with end < start")                                             \
  X("dropped", duplicates, "duplicates", kStop, kSum, "duplicate device records")                                      \
  X("dropped", staleRecords, "earlier_session", kStop, kSum,                                                           \
    "records of an earlier session delivered into this one (MSPTI delivering after Unsubscribe)")                      \
  X("dropped", afterCollection, "after_collection", kStop, kSum,                                                       \
    "records completed after this session had finished collecting")                                                    \
  X("dropped", orphanRecords, "orphan", kStop, kSum, "records delivered while no session was collecting")              \
  X("dropped", overCap, "over_cap", kStop, kSum, "records not kept: the session already held max_session_records")     \
  X("repaired", overlapRepairs, "overlaps", kStop, kSum,                                                               \
    "device rows moved so that no two rows of one stream overlap")                                                     \
  X("repaired", maxOverlapShiftNs, "max_shift_ns", kStop, kMax, "largest start shift of such a repair, ns")            \
  X("repaired", zeroDuration, "zero_duration", kStop, kSum, "device records with start = end != 0, kept as such")      \
  X("repaired", deviceBeforeLaunch, "device_before_launch", kStop, kSum,                                               \
    "device rows that start before their launch call (device clock behind the host clock)")                            \
  X("markers", markerMarks, "marks", kStop, kSum, "mstx marks (instant MARKER records)")                               \
  X("markers", markerRanges, "ranges", kStop, kSum, "mstx ranges paired by id (start and end records)")                \
  X("markers", markerUnpairedStarts, "unpaired_starts", kStop, kSum,                                                   \
    "range starts without an end (the range ends after the window): kept as instants")                                 \
  X("markers", markerUnpairedEnds, "unpaired_ends", kStop, kSum,                                                       \
    "range ends without a start (the range began before the window): kept as instants")                                \
  X("markers", markerUnknownFlag, "unknown_flag", kStop, kSum,                                                         \
    "MARKER records whose flag is not one MARKER_* value: kept as instants")                                           \
  X("markers", markerNotIncluded, "not_included", kStop, kSum,                                                         \
    "markers of a domain outside marker_domains' include list: dropped")                                               \
  X("collectives", collectiveRows, "rows", kStop, kSum, "COMMUNICATION rows kept (CollectiveJoin.h)")                  \
  X("collectives", collectivesJoined, "joined", kStop, kSum,                                                           \
    "collective rows joined with their communication mstx range and their process group: kineto's NCCL fields")        \
  X("collectives", collectivesUnjoined, "unjoined", kStop, kSum,                                                       \
    "collective rows not joined (the three reasons below): they keep what MSPTI gave")                                 \
  X("collectives", collectivesNoMarker, "no_marker", kStop, kSum,                                                      \
    "collective rows inside no \"communication\" mstx range (markers off, or a backend that writes none)")             \
  X("collectives", collectivesBadMessage, "bad_message", kStop, kSum,                                                  \
    "collective rows whose range's message is not torch_npu's JSON, names another communicator or lacks the peer")     \
  X("collectives", collectivesNoGroup, "no_group", kStop, kSum,                                                        \
    "collective rows whose communicator no torch.distributed process group of this process has")                       \
  X("collectives", collectivesNoSeq, "no_seq", kStop, kSum,                                                            \
    "joined rows without Seq: their group's rows in the window were not exactly the calls it issued meanwhile")        \
  X("rows", deviceRows, "device_rows", kTrace, kSum, "device rows in the trace (all kinds)")                           \
  X("rows", kernels, "kernels", kTrace, kSum, "kernel rows")                                                           \
  X("rows", communications, "communications", kTrace, kSum, "collective rows (COMMUNICATION records)")                 \
  X("rows", memcpys, "memcpys", kTrace, kSum, "memory copy rows")                                                      \
  X("rows", memsets, "memsets", kTrace, kSum, "memset rows")                                                           \
  X("rows", annotations, "annotations", kTrace, kSum, "user-range spans on device lanes")                              \
  X("rows", annotationsMoved, "annotations_on_extra_lanes", kTrace, kSum,                                              \
    "user-range spans that cross an earlier span of their stream (their kernels interleave), drawn on a further lane") \
  X("rows", memoryEvents, "memory_events", kTrace, kSum,                                                               \
    "runtime allocation and release instants (MEMORY records) on the NPU memory lanes")                                \
  X("rows", markerRows, "markers", kTrace, kSum, "mstx marker spans and instants (host and device lanes)")             \
  X("rows", markerRangesMoved, "marker_ranges_on_extra_lanes", kTrace, kSum,                                           \
    "mstx ranges that cross an earlier range of their lane, drawn one mstx lane further so that every lane nests")     \
  X("rows", launchEvents, "launch_events", kTrace, kSum, "launch events with an arrow to their device rows")           \
  X("rows", launchThreadEvents, "launch_thread_events", kTrace, kSum,                                                  \
    "launch events on a thread that ran no op at the time (its own lane, no op credited)")                             \
  TORCH_MSPTI_LINK_STATES(TORCH_MSPTI_LINK_COUNTER, X)                                                                 \
  X("links", linkTargetMissing, "target_missing", kTrace, kSum,                                                        \
    "hinted or logged op ids that torch did not record in this trace")                                                 \
  X("memory", memoryAllocations, "allocations", kTrace, kSum, "MEMORY allocation records in the trace")                \
  X("memory", memoryReleases, "releases", kTrace, kSum, "MEMORY release records in the trace")                         \
  X("memory", memoryReleasesUnsized, "releases_without_bytes", kTrace, kSum,                                           \
    "releases reported with 0 bytes (allocated before MEMORY was collected): the counter track cannot fall by them")   \
  X("memory", memoryLinked, "linked_to_op", kTrace, kSum,                                                              \
    "memory events whose allocation call the link rule places inside an op")                                           \
  X("memory", memoryCounterSamples, "counter_samples", kTrace, kSum,                                                   \
    "samples of the per-NPU allocated-bytes counter track (0 when torch's kineto writes no counter events)")

// Why a record was dropped, per kind (SessionCounters::droppedByKind; the health report's
// dropped_by_kind): the same reasons as the "dropped" group's totals of the same names.
enum DropReason : int { kDropOverCap, kDropOutOfWindow, kDropEarlierSession, kDropReasonCount };
// "over_cap", "out_of_window", "earlier_session".
const char* dropReasonName(int reason);

struct SessionCounters {
#define TORCH_MSPTI_COUNTER_FIELD(group, field, key, phase, merge, doc) uint64_t field = 0;
  TORCH_MSPTI_SESSION_COUNTERS(TORCH_MSPTI_COUNTER_FIELD)
#undef TORCH_MSPTI_COUNTER_FIELD
  uint64_t recordsByKind[MSPTI_ACTIVITY_KIND_COUNT] = {};
  // Records dropped per reason and msptiActivityKind: each reason's kinds add up to its total
  // in the "dropped" group (over_cap, out_of_window, earlier_session).
  uint64_t droppedByKind[kDropReasonCount][MSPTI_ACTIVITY_KIND_COUNT] = {};
  // mstx markers built, by domain (MarkerTable.h).
  std::map<std::string, uint64_t> markersByDomain;

  // Every record of every kind.
  uint64_t records() const;
  // Device rows linked to an op (the linked states: verified, recovered, unverified).
  uint64_t linkedRows() const;
  // The "links" counter of state `s`.
  uint64_t& linkCount(LinkState s);

  // Adds `o` (sums; maxima take the larger).
  void add(const SessionCounters& o);
  // Counter-wise this - earlier (for process-wide sources read at start and at stop); maxima keep
  // this reading.
  SessionCounters since(const SessionCounters& earlier) const;
};

// The list as data, for code that walks every counter (JSON, bindings).
struct CounterInfo {
  const char* group;
  const char* key;
  uint64_t SessionCounters::* field;
  CounterPhase phase;
  CounterMerge merge;
  const char* description;
};
extern const CounterInfo kCounterInfo[];
extern const int kCounterCount;

}  // namespace torch_mspti
