// The tail of a session: getting every record out of MSPTI before the trace is built.
//
// Device records arrive about 200 ms after the work ran (mspti.md 5.3) and wait in MSPTI's
// current buffer until FlushAll. stop() therefore drains, never with a fixed sleep:
//   1. (disable_first) Disable the kinds: MSPTI 26.1 pulls device data still in the driver
//      (halProfDataFlush, <= 20 ms per channel) and parses it before stopping its parser
//      (mspti.md 2.3), so after Disable everything is in MSPTI's buffers: polling ends as soon
//      as a FlushAll brings nothing. Disable pulls only MARKER/KERNEL/HCCL/COMMUNICATION, so
//      MEMCPY/MEMSET/MEMORY stay enabled, and polling goes on, while a copy or memset launch
//      still lacks its record; they are disabled after the poll;
//   2. poll FlushAll every drain_poll_interval_ms while the ledger (CorrelationLedger.h) shows
//      launches of a collected class without a device record; when the ledger knows no launch
//      (no external-correlation or launch API records), end after drain_quiet_flushes
//      consecutive flushes that brought nothing; give up at drain_timeout_ms and report the
//      launches still pending;
//   3. one more FlushAll once balanced (siblings of a multi-kernel launch);
//   4. (poll_first) Disable now, then FlushAll;
//   5. Unsubscribe (stops device tasks), then a last FlushAll: what arrives now is "late".
// Order: a library that pulls device data on Disable loses nothing with disable_first and stops
// in tens of ms; one that does not pull may discard records arriving after Disable, so it must
// be polled first. The two changes shipped together in the 26.1 branch with
// msptiActivityIsEnabled (mspti.md 8), so `auto` picks disable_first exactly when that symbol
// exists and poll_first otherwise. Both orders are settable (drain_order).
// Launches whose work makes no device record (a non-launch API call's id, a copy while MEMCPY
// is not collected, a collective while COMMUNICATION is not) never hold the drain: only the
// classes being collected are waited for.
// Thread-safety: called from the session's stop() only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <mspti/mspti.h>

#include "Config.h"
#include "MsptiActivityApi.h"
#include "RecordStore.h"
#include "SessionStats.h"

namespace torch_mspti {

struct DrainInput {
  MsptiActivityApi* api = nullptr;
  RecordStore* store = nullptr;
  msptiSubscriberHandle subscriber = nullptr;
  std::vector<msptiActivityKind> enabledKinds;
  ConfigSnapshot config;
  uint32_t waitFor = 0;  // LaunchClass bits (CorrelationLedger::pending) whose launches hold the drain
};

// Runs the drain; failures of individual calls are appended to `errors`. `disabledAt` receives the
// CLOCK_REALTIME ns at which the kinds were disabled (launch recording stopped).
DrainStats drain(const DrainInput& in, std::vector<std::string>& errors, int64_t& disabledAt);

// The order `auto` resolves to for this library.
DrainOrder resolveDrainOrder(DrainOrder configured, bool libraryHasIsEnabled);

}  // namespace torch_mspti
