#include "DrainPolicy.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "ActivityKinds.h"
#include "KindHandlers.h"

namespace torch_mspti {
namespace {

using Clock = std::chrono::steady_clock;

int64_t realtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint32_t bit(LaunchClass c) { return 1u << static_cast<int>(c); }

// The order of the last Disables, once nothing they answer is pending. Each Disable of a device
// kind flushes its driver channels (mspti.md 2.3): COMMUNICATION both the TS_FW channel and the
// SOC log, so it goes first; KERNEL's, HCCL's and MARKER's flushes then find their channels empty,
// which costs nothing. Host-record kinds last, in the order enabled.
int disableRank(msptiActivityKind kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return 0;
    case MSPTI_ACTIVITY_KIND_KERNEL: return 1;
    case MSPTI_ACTIVITY_KIND_HCCL: return 2;
    case MSPTI_ACTIVITY_KIND_MARKER: return 3;
    default: return 4;
  }
}

void flush(const DrainInput& in, DrainStats& d, std::vector<std::string>& errors) {
  const msptiResult r = in.api->flushAll();
  ++d.flushes;
  if (r != MSPTI_SUCCESS && errors.size() < 16) errors.push_back(describeCall("msptiActivityFlushAll", "1", r));
}

}  // namespace

DrainOrder resolveDrainOrder(DrainOrder configured, bool libraryHasIsEnabled) {
  if (configured != DrainOrder::kAuto) return configured;
  return libraryHasIsEnabled ? DrainOrder::kDisableFirst : DrainOrder::kPollFirst;
}

DrainStats drain(const DrainInput& in, std::vector<std::string>& errors, int64_t& disabledAt) {
  DrainStats d;
  const auto t0 = Clock::now();
  const DrainOrder order = resolveDrainOrder(in.config.drainOrder, in.api->hasIsEnabled());
  d.order = order == DrainOrder::kDisableFirst ? "disable_first" : "poll_first";
  const uint64_t before = in.store->records();
  const auto deadline = t0 + std::chrono::milliseconds(in.config.drainTimeoutMs);
  const auto interval = std::chrono::milliseconds(in.config.drainPollIntervalMs);
  const uint32_t unclassified = bit(LaunchClass::kNone);
  const uint32_t pulledClasses = bit(LaunchClass::kKernel) | bit(LaunchClass::kCommunication) | unclassified;

  disabledAt = 0;
  std::vector<msptiActivityKind> stillOn = in.enabledKinds;
  std::stable_sort(stillOn.begin(), stillOn.end(),
                   [](msptiActivityKind a, msptiActivityKind b) { return disableRank(a) < disableRank(b); });
  auto disableNow = [&](msptiActivityKind kind) {
    if (disabledAt == 0) disabledAt = realtimeNs();
    const msptiResult r = in.api->disable(kind);
    if (r != MSPTI_SUCCESS) errors.push_back(describeCall("msptiActivityDisable", kindName(kind), r));
    stillOn.erase(std::find(stillOn.begin(), stillOn.end(), kind));
  };
  const int64_t drainStart = realtimeNs();
  int64_t delayBound = 0;  // upper bound of MSPTI's delivery delay seen in this drain, ns
  in.store->takeEarliestNewEnd();
  // Every kernel had ended when the drain began (the devices were synchronised), so every row is
  // due by then plus MSPTI's delivery delay, which the rows that came during the drain bound.
  // A row that came with the flush just made waited at most (now - its end) in MSPTI.
  auto noteDelay = [&] {
    const int64_t earliest = in.store->takeEarliestNewEnd();
    if (earliest != INT64_MAX) delayBound = std::max(delayBound, realtimeNs() - earliest);
  };
  auto allDue = [&] { return in.devicesSynchronized && delayBound > 0 && realtimeNs() >= drainStart + delayBound; };
  // The launch classes that still hold the drain, given what the records so far prove.
  auto holding = [&](int quietFlushes) {
    uint32_t hold = in.waitFor;
    if (in.kernelsNeedPreload && in.store->recordsOfKind(MSPTI_ACTIVITY_KIND_KERNEL) == 0 &&
        in.store->recordsOfKind(MSPTI_ACTIVITY_KIND_COMMUNICATION) == 0 &&
        in.store->pendingLaunches(hold & pulledClasses) > 0) {
      hold &= ~pulledClasses;
      d.evidence = "kernels_need_preload";
    }
    if (in.unclassifiedMayBeRowless && (hold & unclassified) && quietFlushes >= in.config.drainQuietFlushes &&
        allDue() && in.store->pendingLaunches(unclassified) > 0) {
      hold &= ~unclassified;
      if (d.evidence.empty()) d.evidence = "unclassified_quiet";
    }
    return hold;
  };
  // disable_first: MSPTI's Disable flushes the driver channels of its kind, but its reader parses
  // what the flush brought after the Disable has returned, and drops whatever belongs to a kind
  // switched off by then (mspti.md 2.3). So a kind is never disabled while a launch it answers is
  // pending: the pull is made with a kind that shares the channel and has no launch in this
  // session at all (COMMUNICATION, whose Disable flushes both channels, when no collective ran;
  // else KERNEL when no kernel ran), and the kinds still awaited stay on while their rows are
  // parsed. "No launch at all" rather than "none pending": a launch whose first row came may have
  // more rows on their way. Without API records a launch can be unseen, so no kind is safe.
  auto pullSafely = [&](uint32_t hold) {
    if (order != DrainOrder::kDisableFirst || in.launchesMayBeUnseen) return false;
    for (msptiActivityKind kind : std::vector<msptiActivityKind>(stillOn)) {
      const KindHandler& k = kindHandler(kind);
      if (!k.pulledByDisable || k.answers == LaunchClass::kNone) continue;
      if (in.store->recordsOfKind(kind) > 0 || in.store->pendingLaunches((bit(k.answers) | unclassified) & hold) > 0)
        continue;
      disableNow(kind);
      d.pulledBy = kindName(kind);
      return true;
    }
    return false;
  };
  int quiet = 0;
  int polls = 0;
  bool pulledAfterSync = false;  // every task had ended when a pull took the driver's data
  uint64_t seen = in.store->records();
  for (;;) {
    flush(in, d, errors);
    ++polls;
    // Rows of the first flush may have waited in MSPTI's buffer since long before the drain.
    if (polls > 1) noteDelay();
    else in.store->takeEarliestNewEnd();
    // The first flush holds every launch made before stop() (host records are written as the
    // launch is made): launches after it are not the session's and hold nothing, though the kinds
    // stay on (a thread of the program may go on launching while stop() drains).
    if (polls == 1) in.store->closeLaunchAdmissions();
    const uint64_t now = in.store->records();
    quiet = now == seen ? quiet + 1 : 0;
    seen = now;
    // Without API records some launches are invisible (outside any op there is no external
    // record; before 8.1 there is none at all): their rows are waited for until every row is due.
    const bool unseenDue = !in.launchesMayBeUnseen || (quiet >= in.config.drainQuietFlushes && allDue());
    bool pulledNow = false;
    if (in.store->knowsLaunches()) {
      const uint32_t hold = holding(quiet);
      if (in.store->pendingLaunches(hold) == 0 && (unseenDue || !d.evidence.empty())) {
        d.exitReason = d.evidence.empty() ? "balanced" : "no_row_can_come";
        // Siblings of multi-kernel launches: the launch's first row satisfied the ledger.
        if (!d.evidence.empty()) {
          // no kernel row can come, nor its siblings
        } else if (pulledAfterSync) {
          flush(in, d, errors);  // the pull brought every ended task's rows at once
        } else {
          // rows came over time: flush on until one brings nothing and every row is due (when
          // that is known: the devices were synchronised and a row bounded the delay)
          uint64_t last = in.store->records();
          for (;;) {
            if (Clock::now() >= deadline) break;
            std::this_thread::sleep_for(std::min<Clock::duration>(interval, deadline - Clock::now()));
            flush(in, d, errors);
            noteDelay();
            const uint64_t after = in.store->records();
            const bool dueKnown = in.devicesSynchronized && delayBound > 0;
            if (after == last && (!dueKnown || allDue())) break;
            last = after;
          }
        }
        break;
      }
      if (d.pulledBy.empty() && pullSafely(hold)) {
        pulledNow = true;
        pulledAfterSync = in.devicesSynchronized;
      }
    } else if (quiet >= in.config.drainQuietFlushes && unseenDue) {
      d.exitReason = "quiet";
      break;
    }
    if (Clock::now() >= deadline) {
      d.exitReason = "timeout";
      break;
    }
    // After a pull the reader parses at once: look again soon.
    const Clock::duration pause =
        pulledNow ? std::min<Clock::duration>(interval, std::chrono::milliseconds(1)) : interval;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
  }
  // Every launch has its rows (or the drain gave up on them): the rest of the kinds go off, the
  // pulling ones first (their flushes find the channels empty), then a last FlushAll.
  for (msptiActivityKind kind : std::vector<msptiActivityKind>(stillOn)) disableNow(kind);
  const uint64_t beforeLate = in.store->records();
  flush(in, d, errors);
  d.lateRecords = in.store->records() - beforeLate;
  d.recordsDuringDrain = in.store->records() - before;
  d.pendingLaunches = in.store->pendingLaunches(in.waitFor);
  d.unansweredAfterStop = in.store->launchesAfterCloseWaiting(in.waitFor);
  d.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return d;
}

}  // namespace torch_mspti
