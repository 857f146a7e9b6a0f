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

// Whether MSPTI's Disable pulls the kind's records in: the kind table's fact (KindHandlers.h).
bool pulledByDisable(msptiActivityKind kind) { return kindHandler(kind).pulledByDisable; }
bool notPulledByDisable(msptiActivityKind kind) { return !pulledByDisable(kind); }

uint32_t bit(LaunchClass c) { return 1u << static_cast<int>(c); }

// The order of the Disables. Each Disable of a device kind flushes its driver channels
// (mspti.md 2.3): COMMUNICATION both the TS_FW channel and the SOC log, so it goes first and pulls
// every channel's data while all the kinds that read them are still on; KERNEL's, HCCL's and
// MARKER's flushes then find their channels empty, which costs nothing, and no kind's switch is
// cleared before the data it reads was pulled. Host-record kinds last, in the order enabled.
int disableRank(msptiActivityKind kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return 0;
    case MSPTI_ACTIVITY_KIND_KERNEL: return 1;
    case MSPTI_ACTIVITY_KIND_HCCL: return 2;
    case MSPTI_ACTIVITY_KIND_MARKER: return 3;
    default: return 4;
  }
}

// Disables the enabled kinds for which `which` is true; `disabledAt` is set by the first call.
template <typename Pred>
void disableKinds(const DrainInput& in, Pred which, std::vector<std::string>& errors, int64_t& disabledAt) {
  if (disabledAt == 0) disabledAt = realtimeNs();
  std::vector<msptiActivityKind> kinds = in.enabledKinds;
  std::stable_sort(kinds.begin(), kinds.end(),
                   [](msptiActivityKind a, msptiActivityKind b) { return disableRank(a) < disableRank(b); });
  for (auto kind : kinds) {
    if (!which(kind)) continue;
    const msptiResult r = in.api->disable(kind);
    if (r != MSPTI_SUCCESS) errors.push_back(describeCall("msptiActivityDisable", kindName(kind), r));
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
  if (order == DrainOrder::kDisableFirst) disableKinds(in, pulledByDisable, errors, disabledAt);
  // The launch classes that still hold the drain, given what the records so far prove.
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
  int quiet = 0;
  int polls = 0;
  uint64_t seen = in.store->records();
  for (;;) {
    flush(in, d, errors);
    ++polls;
    // Rows of the first flush may have waited in MSPTI's buffer since long before the drain.
    if (polls > 1) noteDelay();
    else in.store->takeEarliestNewEnd();
    const uint64_t now = in.store->records();
    quiet = now == seen ? quiet + 1 : 0;
    seen = now;
    // Without API records some launches are invisible (outside any op there is no external
    // record; before 8.1 there is none at all): their rows are waited for until every row is due.
    const bool unseenDue = !in.launchesMayBeUnseen || (quiet >= in.config.drainQuietFlushes && allDue());
    if (in.store->knowsLaunches()) {
      const uint32_t hold = holding(quiet);
      if (in.store->pendingLaunches(hold) == 0 && (unseenDue || !d.evidence.empty())) {
        d.exitReason = d.evidence.empty() ? "balanced" : "no_row_can_come";
        // Siblings of multi-kernel launches: the launch's first row satisfied the ledger.
        if (!d.evidence.empty()) {
          // no kernel row can come, nor its siblings
        } else if (polls == 1) {
          flush(in, d, errors);  // after a pulling Disable everything that ended came at once
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
      if (order == DrainOrder::kDisableFirst && !d.reenabled && in.store->pendingLaunches(hold & pulledClasses) > 0) {
        // Disable did not bring them: a library whose Disable pulls nothing, or work still
        // running. Parse what is still on its way (a disabled kind's records may be discarded).
        d.reenabled = true;
        for (auto kind : in.enabledKinds)
          if (pulledByDisable(kind)) in.api->enable(kind);
      }
    } else if (quiet >= in.config.drainQuietFlushes && unseenDue) {
      d.exitReason = "quiet";
      break;
    }
    if (Clock::now() >= deadline) {
      d.exitReason = "timeout";
      break;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(interval, deadline - Clock::now()));
  }
  if (order == DrainOrder::kPollFirst) {
    disableKinds(in, [](msptiActivityKind) { return true; }, errors, disabledAt);
    flush(in, d, errors);
  } else {
    // Pulled kinds enabled again are disabled once more (this pulls what ended meanwhile); then
    // the kinds Disable does not pull.
    if (d.reenabled) disableKinds(in, pulledByDisable, errors, disabledAt);
    if (std::any_of(in.enabledKinds.begin(), in.enabledKinds.end(), notPulledByDisable))
      disableKinds(in, notPulledByDisable, errors, disabledAt);
    if (d.reenabled || std::any_of(in.enabledKinds.begin(), in.enabledKinds.end(), notPulledByDisable))
      flush(in, d, errors);
  }
  d.recordsDuringDrain = in.store->records() - before;

  const msptiResult r = in.api->unsubscribe(in.subscriber);
  if (r != MSPTI_SUCCESS) errors.push_back(describeCall("msptiUnsubscribe", "subscriber", r));
  const uint64_t beforeLate = in.store->records();
  flush(in, d, errors);
  d.lateRecords = in.store->records() - beforeLate;
  d.pendingLaunches = in.store->pendingLaunches(in.waitFor);
  d.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return d;
}

}  // namespace torch_mspti
