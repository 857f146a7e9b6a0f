// The session's mstx markers paired into marks and ranges, decided at stop (the health report's
// marker counts are final before kineto reads it, kineto.md 1.3 step 4b).
//
// MSPTI writes one MARKER record per mark and one per end of a range, the two ends sharing the
// range's id; a call that names a stream writes a host record and a device record (mspti.md 5.9).
// Records are paired by (sourceKind, id) over the whole session, whatever buffer each came in,
// start before end in time. What cannot be paired is counted and kept as an instant:
//  * an end without its start (the range began before the window, or the start was lost);
//  * a start without its end (the range ends after the window);
//  * a second start with the same id (the first is kept unpaired).
// A record with a flag that is not one MARKER_* bit is counted (markers.unknown_flag) and kept as
// an instant. Host markers keep the process/thread ids MSPTI gives; device markers map the
// physical device to torch's logical index (ASCEND_RT_VISIBLE_DEVICES, mspti.md 4).
// Units: ns since the epoch. Thread-safety: none; built and read by the session's stop and
// processTrace, one at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "Admission.h"
#include "Config.h"
#include "NpuRecords.h"
#include "SessionCounters.h"

namespace torch_mspti {

// Device records carry no message or domain: a device marker takes them from the host record
// with the same id (MSPTI writes both for a call that names a stream, mspti.md 5.9).
// markersByDomain counts the markers built (a mark, a range, an unpaired end each once; the host
// and device sides of one call separately) by domain, "unknown" when no record named one.
// Why a marker is an instant.
enum class MarkerKind : uint8_t { kMark, kRange, kUnpairedStart, kUnpairedEnd, kUnknownFlag };

struct Marker {
  int64_t start = 0;  // ns since the epoch
  int64_t end = 0;    // == start for instants
  MarkerKind kind = MarkerKind::kMark;
  bool onDevice = false;  // sourceKind DEVICE: on (device, stream); else on (pid, tid)
  int32_t lane = 0;       // pid, or logical device
  int32_t row = 0;        // tid, or stream
  uint64_t id = 0;        // MSPTI's marker id
  uint32_t flag = 0;      // the start record's flag (the only record's, for instants)
  // The message and domain of the start (of the host record with the same id for a device
  // marker, whose records carry neither); nullptr when no record gave one.
  const std::string* name = nullptr;
  const std::string* domain = nullptr;
  const std::string* message = nullptr;  // the raw message of a "communication" range (NpuRecords.h)
};

struct MarkerTable {
  std::vector<Marker> markers;  // by start time, then id

  // Pairs `records` (any order) and counts them into `counters` (markers.*, markersByDomain).
  // With `keep`, a marker whose domain it does not admit is dropped and counted
  // (markers.not_included); a marker of no known domain is kept.
  // Each record goes through `admission` first (its clock and the window; Admission.h), the
  // drops counted in dropped.out_of_window and dropped_by_kind.MARKER.
  static MarkerTable build(const std::vector<MarkerRecord>& records, Admission& admission,
                           const std::vector<uint32_t>& visibleDevices, const MarkerDomainFilter* keep,
                           SessionCounters& counters);
};

}  // namespace torch_mspti
