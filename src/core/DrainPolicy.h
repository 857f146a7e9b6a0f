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
//   1. FlushAll: MSPTI's host buffers tell the ledger which launches the session made.
//   2. (disable_first) One pull of the driver's data, made safely. MSPTI's Disable of a device kind
//      flushes its channels (halProfDataFlush, <= 20 ms per channel holding data) and returns once
//      its reader has *read* the data; the reader parses it afterwards, and a record whose kind was
//      switched off by then is dropped uncounted (mspti.md 2.3; seen on the real library: 281 of
//      300 kernels lost when KERNEL was disabled right after COMMUNICATION). So no kind is disabled
//      while a launch it answers is pending: the pull is made by Disable of a kind that shares the
//      channel and had no launch in this session (COMMUNICATION, which flushes both channels, when
//      no collective ran; else KERNEL when no kernel ran), and the kinds still awaited stay on
//      while their rows are parsed. When every pulling kind had launches (kernels and collectives
//      in one session), or launches may be unseen (no API records), nothing is pulled and the rows
//      come by MSPTI's own delivery (about 200 ms on hardware).
//   3. Poll FlushAll every drain_poll_interval_ms (1 ms right after the pull) until nothing the
//      rule waits for is pending, or drain_timeout_ms; when the ledger knows no launch at all (no
//      external-correlation or launch API records), end after drain_quiet_flushes consecutive
//      flushes that brought nothing;
//   4. once balanced, flush again while flushes still bring records (siblings of a multi-kernel
//      launch come after the launch's first row: one more flush when a pull after the devices'
//      synchronisation brought every ended task's rows at once, else one poll interval at a time
//      until a flush brings nothing and, when the devices were synchronised, every row is due);
//   Without API records (launchesMayBeUnseen) a launch outside any op leaves no record before
//   its row: balanced or quiet then also needs every row due, and without a bound on MSPTI's
//   delay (no row came during the drain, or the devices were not synchronised) that is the
//   timeout;
//   5. Disable the kinds still on (COMMUNICATION, KERNEL, HCCL, MARKER, then the host-record kinds),
//      then a last FlushAll: what it brings is counted as late.
// Unsubscribe is not part of the drain: the session hands it to SubscriptionRelease, off stop().
// Order: disable_first (libraries with msptiActivityIsEnabled, which came with the pulling Disable
// in the 26.1 branch, mspti.md 8) pulls as above; poll_first (older libraries, whose Disable pulls
// nothing and may discard records arriving after it) never disables before step 5. Both orders are
// settable (drain_order).
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
// CLOCK_REALTIME ns of the drain's first Disable (no launch made after it belongs to the session).
DrainStats drain(const DrainInput& in, std::vector<std::string>& errors, int64_t& disabledAt);

// The order `auto` resolves to for this library.
DrainOrder resolveDrainOrder(DrainOrder configured, bool libraryHasIsEnabled);

}  // namespace torch_mspti
