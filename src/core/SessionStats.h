// Reports of profiling sessions: the last one and the totals over the process, for
// torch_mspti.diagnostics(), and their one JSON serialisation (also used for the trace's health
// report).
// Thread-safety: StatsRegistry is guarded by a mutex; the rest is plain data.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mspti/mspti_activity.h>

#include "SessionCounters.h"

namespace torch_mspti {

class ReportWriter;
struct LibraryReport;

struct DrainStats {
  std::string order;       // "disable_first" or "poll_first"
  std::string exitReason;  // "balanced", "quiet" (the ledger knew no launch), "no_row_can_come", "timeout"
  // Why launches still pending were let go before the timeout ("" = none were): "kernels_need_preload"
  // (a library before 26.0, not preloaded, delivered no KERNEL/COMMUNICATION record: it knows no
  // device), "unclassified_quiet" (launches known only from MSPTI's hint, which may be copies this
  // session does not collect, once every row was due and the flushes went quiet).
  std::string evidence;
  // disable_first: the kind whose Disable pulled the driver's data while every kind that answers
  // a pending launch stayed on ("COMMUNICATION" or "KERNEL"), "" when none could (each pulling
  // kind had launches pending, or launches may be unseen) or with poll_first.
  std::string pulledBy;
  int flushes = 0;
  double ms = 0;             // wall time of the whole drain
  double synchronizeMs = 0;  // of which waiting for the devices (synchronize_devices)
  uint64_t recordsDuringDrain = 0;
  uint64_t pendingLaunches = 0;  // launches whose device records never came
  // Launches made after stop() began (ids above every launch the drain's first flush had) whose
  // device records had not come when the kinds were disabled: outside the window, never waited
  // for, counted here (their rows, when they come, are dropped as out of window).
  uint64_t unansweredAfterStop = 0;
  uint64_t lateRecords = 0;  // records delivered by the last FlushAll, after every kind was disabled
};

enum class SessionState { kConfigured, kStarted, kStopped, kProcessed, kFailed };
const char* sessionStateName(SessionState s);

// What became of the marker_domains setting in one session (mspti.md 5.9).
struct MarkerDomainsOutcome {
  std::string setting;   // the setting's text ("" = every domain)
  bool applied = false;  // the library switched the domains as asked
  std::string note;      // why not, or what the plugin did itself ("" when nothing to say)
};

struct SessionReport {
  SessionState state = SessionState::kConfigured;
  std::vector<std::string> errors;
  std::vector<std::string> warnings;  // names of the findings the session warned about (each once)
  // The same findings with their messages, in the order given (SessionFindings.h).
  std::vector<std::pair<std::string, std::string>> findings;
  std::vector<std::string> enabledKinds;
  // Device kinds the session asked for but could not enable, each "<KIND>: why, and what is
  // missing from the trace" (e.g. COMMUNICATION on an MSPTI before 8.2: no collective rows).
  std::vector<std::string> notCollected;
  MarkerDomainsOutcome markerDomains;
  std::string hostClock;  // HostClock::name()
  SessionCounters counters;
  std::optional<DrainStats> drain;
  // Wall times of the session's own work, ms (steady clock); -1 until it ran: the whole stop()
  // (drain, counters, launch table, findings) and processTrace (activities handed to kineto).
  double stopMs = -1;
  double processTraceMs = -1;
  // At configure, before msptiSubscribe: the wait for an earlier session's Unsubscribe still in
  // flight (SubscriptionRelease.h), ms.
  double releaseWaitMs = 0;
};

// Outcome of the latest msptiActivityEnable of one kind, for the capability table.
struct EnableOutcome {
  int result = kNeverTried;  // msptiResult, or kNeverTried
  std::string note;          // why it cannot deliver, and the fix ("" when fine)
  static constexpr int kNeverTried = -100;
};

class StatsRegistry {
 public:
  void publish(const SessionReport& report, bool final);  // final: add to the totals
  std::optional<SessionReport> last() const;
  SessionCounters totals() const;
  uint64_t sessions() const;
  void noteEnable(int kind, int result, std::string note);
  std::vector<EnableOutcome> enableOutcomes() const;  // indexed by kind
  // True the first time `key` is asked for in the process (warnings said once per process).
  bool firstTime(const std::string& key);
  // The fork guard holds the lock across fork().
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  mutable std::mutex mutex_;
  std::optional<SessionReport> last_;
  SessionCounters totals_;
  uint64_t sessions_ = 0;
  std::vector<EnableOutcome> enables_ = std::vector<EnableOutcome>(MSPTI_ACTIVITY_KIND_COUNT);
  std::vector<std::string> said_;
};

// The counters as JSON members: records_by_kind, records, one object per group; `tracePhase`
// adds the groups computed in processTrace (rows, links) and the link ratio.
void writeCounters(ReportWriter& w, const SessionCounters& c, bool tracePhase);
void writeDrain(ReportWriter& w, const DrainStats& d);
// The library's identity as members (available, path, found_by, version, reason, fix, attempted;
// empty text as null): the trace's health report writes them as its "library" object, and
// diagnostics().library starts from them (bindings: libraryDict).
void writeLibrary(ReportWriter& w, const LibraryReport& r);
// The members of a report: state, errors, warnings, enabled kinds, host clock, counters, drain.
void writeReport(ReportWriter& w, const SessionReport& r, bool tracePhase);
// {"last_session": {...} | null, "totals": {...}, "sessions": n}: the serialisation behind
// diagnostics().
void writeSessions(ReportWriter& w, const StatsRegistry& stats);
std::string sessionReportJson(const StatsRegistry& stats);

}  // namespace torch_mspti
