// The tail of a session: getting every record out of MSPTI before the trace is built.
//
// Device records arrive about 200 ms after the work ran (mspti.md 5.3) and wait in MSPTI's
// current buffer until FlushAll. stop() therefore drains, never with a fixed sleep. The rule:
// **a launch the session saw holds the drain until its device row arrives or drain_timeout_ms
// passes**; the drain ends earlier only on evidence that no row can come:
//   * the launch's class is not collected (a non-launch API call's id, a copy while MEMCPY is not
//     collected, a collective while COMMUNICATION is not): such launches are never waited for;
//   * a library before 26.0 that is not in LD_PRELOAD and has delivered no KERNEL or
//     COMMUNICATION record: it knows no device (device discovery through libprofapi came with
//     26.0, mspti.md 5.5, 8), so no kernel row can come ("kernels_need_preload");
//   * launches known only from MSPTI's hint (no API record tells their class) while copies mint
//     ids that make no row (preloaded library, MEMCPY/MEMSET not collected): once every row is
//     due and drain_quiet_flushes flushes in a row brought nothing, they are let go
//     ("unclassified_quiet"). "Due": the devices were synchronised before the drain, so every
//     kernel had ended, and its row comes within MSPTI's delivery delay, which the rows arriving
//     during the drain bound from above (a row that came with the flush at t waited at most
//     t - end). Without such a row there is no bound, and they hold the drain to the timeout.
// Steps:
//   1. (disable_first) Disable the kinds: MSPTI 26.1 pulls device data still in the driver
//      (halProfDataFlush, <= 20 ms per channel holding data, nothing for an empty one) and parses
//      it before stopping its parser (mspti.md 2.3); COMMUNICATION first (it flushes both of the
//      channels), then KERNEL, HCCL and MARKER, whose channels are then empty, so stop() pays for
//      each channel once. Disable pulls only MARKER/KERNEL/HCCL/COMMUNICATION, so MEMCPY/MEMSET/
//      MEMORY stay enabled until their launches have their rows. If launches of a pulled kind are
//      still pending after the first flush (a library whose Disable pulls nothing, a kernel still
//      running on a device nobody synchronised), those kinds are enabled again, so that the
//      records still on their way are parsed, and disabled once more at the end (which pulls);
//   2. poll FlushAll every drain_poll_interval_ms until nothing the rule waits for is pending,
//      or drain_timeout_ms; when the ledger knows no launch at all (no external-correlation or
//      launch API records), end after drain_quiet_flushes consecutive flushes that brought nothing;
//   3. once balanced, flush again while flushes still bring records (siblings of a multi-kernel
//      launch come after the launch's first row: one more flush when the rows came at once, as
//      after a pulling Disable, else one poll interval at a time until a flush brings nothing
//      and, when the devices were synchronised, every row is due);
//   Without API records (launchesMayBeUnseen) a launch outside any op leaves no record before
//   its row: balanced or quiet then also needs every row due, and without a bound on MSPTI's
//   delay (no row came during the drain, or the devices were not synchronised) that is the
//   timeout;
//   4. (poll_first) Disable now, then FlushAll;
//   5. Unsubscribe (stops device tasks), then a last FlushAll: what arrives now is "late".
// Order: a library that pulls device data on Disable loses nothing with disable_first and stops
// in tens of ms; one that does not pull may discard records arriving after Disable, so it must
// be polled first. The two changes shipped together in the 26.1 branch with
// msptiActivityIsEnabled (mspti.md 8), so `auto` picks disable_first exactly when that symbol
// exists and poll_first otherwise. Both orders are settable (drain_order).
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
  // Unclassified launches (bit kNone) may be copies that make no row here: they then hold the
  // drain only until every row is due and the flushes go quiet (evidence "unclassified_quiet").
  bool unclassifiedMayBeRowless = false;
  // The library predates 26.0 and is not preloaded: with no KERNEL/COMMUNICATION record at all,
  // it knows no device and no kernel or collective row can come (evidence "kernels_need_preload").
  bool kernelsNeedPreload = false;
  // No API records are collected: launches outside any op (or every launch, before 8.1) leave no
  // record before their row, so the drain also waits until every row is due (see the rule).
  bool launchesMayBeUnseen = false;
  // Every device that may hold the session's work was synchronised before the drain: every
  // kernel had ended, so a row is due within MSPTI's delivery delay.
  bool devicesSynchronized = false;
};

// Runs the drain; failures of individual calls are appended to `errors`. `disabledAt` receives the
// CLOCK_REALTIME ns at which the kinds were disabled (launch recording stopped).
DrainStats drain(const DrainInput& in, std::vector<std::string>& errors, int64_t& disabledAt);

// The order `auto` resolves to for this library.
DrainOrder resolveDrainOrder(DrainOrder configured, bool libraryHasIsEnabled);

}  // namespace torch_mspti
