// The session's launches, prepared when the session stops (before kineto reads the health
// report): each MSPTI correlation id with its launch call, its op hints and its device rows, the
// rows checked, deduplicated, kept or dropped by the profiling window, and repaired so that no
// two rows of one stream overlap.
//
// Rules, in order (each drop or repair is counted in SessionCounters):
//  1. timing: a record with start = end = 0 has no timing (MSPTI's mark, mspti.md 3.4) and one
//     with end < start or start <= 0 is invalid: dropped; start = end != 0 is a real, very short
//     task: kept as a zero-length row;
//  2. earlier sessions (Admission::stale): ids at or below the highest id an earlier session saw launched (junk ids
//     excepted, CorrelationLedger::junkIds), and (when this session saw its own launches) ids
//     below its first own launch that it never saw launched, are earlier sessions' records
//     delivered late: dropped;
//  3. duplicates (same id, times, device, stream, kind, name): dropped;
//  4. window (Admission::inWindow): a launch belongs to the session when its launch call started inside
//     [window start, window end] — where the device ran it does not matter, so a kernel launched
//     before stop() and still running then is kept; without a trusted launch time, by the
//     row's device start, up to `collectionEnd` (when MSPTI stopped recording launches); rows
//     without a correlation id (0) are not one launch: each is windowed on its own;
//  5. lanes: logical device from ASCEND_RT_VISIBLE_DEVICES; per (device, stream), rows in
//     order of their end (a stream runs its tasks one after another, so their ends are in
//     execution order, while a reported start can be early: mspti.md 4, timestamp bugs and clock
//     conversion), a row that starts before the previous row's end starts at that end (a row
//     ending with the previous one becomes zero-length there) — viewers such as Perfetto drop
//     overlapping slices on one track (google/perfetto#4280). Ordering by start instead would
//     put an early row before the row it follows and move device time between ops. Copies and
//     memsets (MEMCPY, MEMSET) are the exception: their times are the host call's span
//     (mspti.md 5.7), which for an async call lies while the stream still runs earlier work, so
//     they never move a device-timed row: each keeps its length and moves, in order of its start,
//     to the end of the row it overlaps (the task it queued behind), until it fits.
// Thread-safety: none; built once on the profiler thread.
#pragma once

#include <cstdint>
#include <vector>

#include "Admission.h"
#include "HostClock.h"
#include "RecordStore.h"
#include "SessionCounters.h"

namespace torch_mspti {

struct DeviceRow {
  DeviceRecord record;  // start/end possibly repaired
  int32_t device = 0;   // logical device index (trace pid)
};

// 56 bytes, one per launch the session keeps.
struct Launch {
  uint64_t correlationId = 0;
  const ApiRecord* call = nullptr;  // the launch call (or the id's earliest API record); may be null
  int64_t callStart = 0;            // CLOCK_REALTIME ns, when callTrusted
  int64_t callEnd = 0;
  uint64_t opHint = 0;    // CUSTOM0 external id: torch's op id MSPTI saw on top of its stack
  uint64_t userHint = 0;  // CUSTOM1 external id: the user range on top
  // Rows [firstRow, firstRow + rowCount) of LaunchTable::rows; 31 bits suffice: a session keeps
  // at most max_session_records (<= 2^31) records.
  uint32_t firstRow = 0;
  uint32_t rowCount : 31 = 0;
  uint32_t callTrusted : 1 = 0;  // call times are on a known clock (HostClock)
};
static_assert(sizeof(Launch) == 56, "Launch is sized for 1M launches per session");

struct LaunchTable {
  // Ascending correlation id; rows without one (id 0) last, each a launch of its own (one row,
  // windowed by its own device start), in order of start.
  std::vector<Launch> launches;
  std::vector<DeviceRow> rows;
  std::vector<int32_t> devices;  // logical devices with rows, ascending

  // Rules 2 and 4 are the session's admission (Admission.h), which also puts each row's times on
  // CLOCK_REALTIME (copies and memsets carry MSPTI's host clock).
  static LaunchTable build(const RecordStore& store, Admission& admission, const std::vector<uint32_t>& visibleDevices,
                           SessionCounters& counters);
};

// The launch call of correlation id `id` as the ledger knows it (its launch API record, else the
// id's earliest one; its op and user-range hints), with the call's times on CLOCK_REALTIME when
// `clock` is trusted. No rows. `apis` are the store's API records the ledger indexes.
Launch launchCall(uint64_t id, const CorrelationLedger& ledger, const ApiRecords& apis, const HostClock& clock);

// Logical index of `physical` given ASCEND_RT_VISIBLE_DEVICES (empty list: identity). A device
// not in the list keeps its physical id.
int32_t logicalDevice(uint32_t physical, const std::vector<uint32_t>& visible);

}  // namespace torch_mspti
