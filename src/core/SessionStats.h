// Counters of one profiling session, the process-wide totals, and their JSON form.
//
// Nothing the plugin drops is dropped silently: each reason has a counter here, reported through
// diagnostics() and the trace's "torch_mspti" metadata.
// Thread-safety: SessionCounters is plain data owned by one session; StatsRegistry (last session
// and totals) is guarded by a mutex.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <mspti/mspti_activity.h>

namespace torch_mspti {

struct DrainStats {
  std::string order;       // "disable_first" or "poll_first"
  std::string exitReason;  // "balanced", "quiet", "timeout", "no_library", "not_started"
  int flushes = 0;
  double ms = 0;
  uint64_t recordsDuringDrain = 0;
  uint64_t pendingLaunches = 0;  // launches known (external/API records) with no kernel yet
  uint64_t lateRecords = 0;      // records delivered by the FlushAll after unsubscribe
};

struct SessionCounters {
  uint64_t recordsByKind[MSPTI_ACTIVITY_KIND_COUNT] = {};
  uint64_t kernels = 0;        // kernel activities emitted
  uint64_t linkedKernels = 0;  // ... of which linked to an op
  uint64_t unlinkedKernels = 0;
  uint64_t outOfWindow = 0;        // kernels outside the capture window (dropped)
  uint64_t invalidTiming = 0;      // kernels with zero/inverted timing (dropped)
  uint64_t duplicates = 0;         // duplicate kernel records (dropped)
  uint64_t mislinksRejected = 0;   // external-correlation links whose API record shows another thread
  uint64_t apiTimeUntrusted = 0;   // API host times outside their op (fell back to the op's start)
  uint64_t linkTargetMissing = 0;  // external ids torch did not record as ops in this trace
  uint64_t buffersRequested = 0;
  uint64_t buffersCompleted = 0;
  uint64_t buffersDeclined = 0;   // requests refused at the pool cap (MSPTI drops records then)
  uint64_t nullCompletions = 0;   // completions with a NULL buffer
  uint64_t abandonedBuffers = 0;  // buffers whose tail held an unknown kind or a truncated record
  uint64_t abandonedBytes = 0;
  uint64_t orphanRecords = 0;           // records delivered while no session was collecting
  uint64_t correlationErrors = 0;       // failed external-correlation push/pop calls
  uint64_t correlationOverflow = 0;     // ops nested deeper than the per-thread stack (not forwarded)
  uint64_t unbalancedAtStop = 0;        // ids still pushed when the session stopped (popped by stop)
  uint64_t correlationInterleaved = 0;  // pops that got another thread's id (global stack, 5.4)
  uint64_t opIntervals = 0;             // op intervals recorded (libraries without external correlation)
  uint64_t linkedByOpInterval = 0;      // ... kernels linked through API record + op interval

  void add(const SessionCounters& o);
  uint64_t records() const;
};

struct SessionReport {
  std::string state;  // "configured", "started", "stopped", "processed", "failed"
  std::vector<std::string> errors;
  SessionCounters counters;
  std::optional<DrainStats> drain;
};

// Last session and cumulative totals, for diagnostics.
class StatsRegistry {
 public:
  static StatsRegistry& instance();
  void publish(const SessionReport& report, bool final);  // final: add to totals
  std::optional<SessionReport> last() const;
  SessionCounters totals() const;
  uint64_t sessions() const;
  void addOrphans(uint64_t records);
  // Outcome of the latest msptiActivityEnable per kind (capability table); -100 = never tried.
  void noteEnable(int kind, int result);
  std::vector<int> enableResults() const;
  // ForkGuard: hold the registry's lock across fork() (prepare), release it in parent and child.
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  mutable std::mutex mutex_;
  std::optional<SessionReport> last_;
  SessionCounters totals_;
  uint64_t sessions_ = 0;
  std::vector<int> enableResults_ = std::vector<int>(MSPTI_ACTIVITY_KIND_COUNT, -100);
};

class JsonWriter;
// withLinks=false omits what processTrace computes (kernels, links, drops by timing/window).
void writeCounters(JsonWriter& w, const SessionCounters& c, bool withLinks = true);
void writeDrain(JsonWriter& w, const DrainStats& d);
// {"last_session": {state, errors, <counters>, drain} | null, "totals": {<counters>}} as JSON:
// the one serialisation behind torch_mspti.diagnostics().
std::string sessionReportJson();

}  // namespace torch_mspti
