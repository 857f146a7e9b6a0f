// Whether a record belongs to this session, and its times on the session's clock: the one rule
// every kept kind goes through, built once at stop from the session's window, its host clock and
// the earlier-session watermark.
//
// Each kind's row in the kind table (KindHandlers.h) carries the three columns that decide it, so
// that a kind added later cannot skip one (the table's static_assert refuses a kept kind without
// them):
//  * `time`: which clock the kind's times are on. Device times (kernel, collective rows, device
//    markers) are the device counter that MSPTI converts to CLOCK_REALTIME itself; host times (API
//    calls, copy and memset rows — the host call's span, mspti.md 5.7 —, MEMORY records, host
//    markers) are MSPTI's host clock, which some builds report as raw CLOCK_MONOTONIC_RAW
//    (mspti.md 4): those go through HostClock's conversion, as API records do;
//  * `window`: by the launch call (a device row belongs to the session when its launch call
//    started inside [start, stop]; without a trusted call, by the row's own start up to the end
//    of collection), or by the record's own time (memory events and markers: inside [start, end
//    of collection]);
//  * `stale`: by correlation id (ids at or below the highest id an earlier session launched, or
//    below this session's first own launch and never seen launched, are an earlier session's
//    records delivered late: LaunchTable.h rule 2), by the watermark alone (MEMORY: an allocation
//    outside any op may come before the session's first launch with no record naming its call,
//    and MEMORY records are written as the call returns, never late), or never (markers carry no
//    correlation id:
//    a late marker of an earlier session has a time before this session's start, so the window
//    drops it).
// Every record refused is counted in the session's totals (dropped.out_of_window,
// dropped.earlier_session) and per kind (dropped_by_kind) in the health report.
// Units: ns since the epoch. Thread-safety: none; built and used by the session's stop.
#pragma once

#include <cstdint>

#include "CorrelationLedger.h"
#include "HostClock.h"
#include "SessionCounters.h"

namespace torch_mspti {

struct Window {
  int64_t start = 0;          // ns since the epoch: the session's start()
  int64_t end = 0;            // its stop()
  int64_t collectionEnd = 0;  // when launches stopped being recorded (Disable), >= end
};

// The kind table's admission columns (KindHandlers.h); kUnset only for kinds never kept.
enum class TimeBase : uint8_t {
  kUnset,
  kDevice,    // the device counter, which MSPTI converts to CLOCK_REALTIME itself
  kHost,      // MSPTI's host clock (HostClock converts it)
  kBySource,  // MARKER: a host record on the host clock, a device record on the device's
  kUntimed,   // no time of its own (EXTERNAL_CORRELATION)
};
enum class WindowBy : uint8_t {
  kUnset,
  kLaunchCall,    // device rows: by their launch call (else their own start)
  kOwnTime,       // memory events and markers: by their own time
  kLaunchedRows,  // API and external records: through the launches they describe
};
enum class StaleBy : uint8_t {
  kUnset,
  kCorrelationId,  // at or below the watermark, or below the session's first own launch and never seen launched
  kWatermark,      // at or below the watermark only (MEMORY: an allocation's call may be one no record names)
  kNever,          // no correlation id (markers): the window decides
};
struct AdmissionRule {
  TimeBase time = TimeBase::kUnset;
  WindowBy window = WindowBy::kUnset;
  StaleBy stale = StaleBy::kUnset;
};

class Admission {
 public:
  Admission(const HostClock& clock, const Window& window, const CorrelationLedger& ledger, SessionCounters& counters)
      : clock_(clock), window_(window), ledger_(ledger), counters_(counters) {}

  const Window& window() const { return window_; }
  const HostClock& clock() const { return clock_; }

  // Time `t` of a `kind` record (`onDevice`: a DEVICE-source marker) on CLOCK_REALTIME ns.
  int64_t realtime(uint32_t kind, int64_t t, bool onDevice = false) const;
  // A record of `kind` with correlation id `id` is an earlier session's (counted when so).
  bool stale(uint32_t kind, uint64_t id);
  // A launch of `rows` rows of `kind`: its call started in the window (`callTrusted`: the call's
  // start `callStart`, already realtime), else its first row's realtime start up to the end of
  // collection. Counted when not.
  bool inWindow(uint32_t kind, bool callTrusted, int64_t callStart, int64_t firstStart, uint64_t rows);
  // A record windowed by its own realtime time `t`. Counted when not.
  bool inWindow(uint32_t kind, int64_t t);

 private:
  void outside(uint32_t kind, uint64_t n);
  const HostClock clock_;
  const Window window_;
  const CorrelationLedger& ledger_;
  SessionCounters& counters_;
};

}  // namespace torch_mspti
