// The records a launching thread writes itself, at the time of the call (mspti.md 4, 5.4):
//  * EXTERNAL_CORRELATION: one per non-empty external stack (its top) for a newly minted id;
//  * API / RUNTIME_API: one per runtime call, with the calling thread's pid/tid, the host span of
//    the call and the thread's current correlation id (the most recent mint on that thread, maybe
//    from an earlier session; 0 if none). They come from the profapi callbacks Subscribe
//    registers, so callers write them only while subscribed.
#pragma once

#include "SimClock.h"

#include <cstdint>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "ExternalCorrelation.h"
#include "NameTable.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "Subscriber.h"

namespace torch_mspti::sim {

struct HostRecordContext {
  const SimOptions& options;
  SimCounters& counters;
  const ActivitySwitches& switches;
  const Subscriber& subscriber;
  const ExternalCorrelation& externalCorrelation;
  ActivityBuffers& buffers;
  NameTable& names;
};

class HostRecords {
 public:
  explicit HostRecords(const HostRecordContext& context)
      : ctx_(context), rawOffsetNs_(realtimeNs() - monotonicRawNs()) {}
  HostRecords(const HostRecords&) = delete;
  HostRecords& operator=(const HostRecords&) = delete;

  // Host time as API records report it: ns since the epoch (CLOCK_REALTIME), or raw
  // CLOCK_MONOTONIC_RAW ns with option api_clock=1 (mspti.md 4).
  uint64_t apiNow() const;
  // A CLOCK_REALTIME instant on MSPTI's host clock, the clock of every host-side record (API
  // calls, copy and memset spans, MEMORY records, host markers: mspti.md 4, 5.7, 5.8): itself,
  // or with api_clock=1 the same instant on CLOCK_MONOTONIC_RAW, as those builds report them all
  // (the clocks' distance measured once, so that a record's start and end keep their order).
  uint64_t onHostClock(uint64_t realtime) const;
  // The kind an API record is written as: RUNTIME_API when on, else API when on, else
  // MSPTI_ACTIVITY_KIND_INVALID (no API record). RUNTIME level maps to RUNTIME_API in 26.x; the
  // older API kind is still accepted (mspti.md 3.2).
  int apiKind() const;
  // One API record named `name` (interned here) over [startNs, endNs] carrying the calling
  // thread's current correlation id; nothing when no API kind is on.
  void writeApi(const char* name, uint64_t startNs, uint64_t endNs);
  // A runtime call that launches nothing: while subscribed, an API record over [now, now + hostNs]
  // (the call sleeps hostNs). Mints nothing.
  void runtimeCall(const char* name, uint64_t hostNs);
  // EXTERNAL_CORRELATION records for a newly minted `correlationId`, if that kind is on.
  void writeExternalCorrelations(uint64_t correlationId);
  void writeExternalRecord(uint32_t kind, uint64_t externalId, uint64_t correlationId);

 private:
  HostRecordContext ctx_;
  const uint64_t rawOffsetNs_;  // CLOCK_REALTIME - CLOCK_MONOTONIC_RAW when the simulator started
};

}  // namespace torch_mspti::sim
