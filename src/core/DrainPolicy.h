// The tail of a session: getting every record out of MSPTI before the trace is built.
//
// Kernel records arrive about 200 ms after execution (mspti.md 5.3) and wait in MSPTI's current
// buffer until FlushAll. stop() therefore drains, never with a fixed sleep:
//   1. (disable_first) Disable the kinds: MSPTI 26.1 pulls device data still in the driver
//      (halProfDataFlush, <= 20 ms per channel) before stopping its parser (mspti.md 2.3);
//   2. poll FlushAll every drain_poll_interval_ms while the launch ledger (RecordStore) shows
//      launches without a kernel; when the ledger knows nothing (no external-correlation or API
//      records), end after drain_quiet_flushes consecutive flushes that brought nothing;
//      give up at drain_timeout_ms and report the launches still pending;
//   3. one more FlushAll once balanced (siblings of a multi-kernel launch);
//   4. (poll_first) Disable now, then FlushAll;
//   5. Unsubscribe (stops device tasks), then a last FlushAll: what arrives now is "late".
// Order: a library that pulls device data on Disable loses nothing with disable_first and stops
// in tens of ms; one that does not pull may discard records arriving after Disable, so it must
// be polled first. The two changes shipped together in the 26.1 branch with
// msptiActivityIsEnabled (mspti.md 8), so `auto` picks disable_first exactly when that symbol
// exists and poll_first otherwise. Both orders are settable (drain_order).
// Thread-safety: called from kineto's stop() only.
#pragma once

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
};

// Runs the drain; failures of individual calls are appended to `errors`.
DrainStats drain(const DrainInput& in, std::vector<std::string>& errors);

// The order `auto` resolves to for this library.
DrainOrder resolveDrainOrder(DrainOrder configured, bool libraryHasIsEnabled);

}  // namespace torch_mspti
