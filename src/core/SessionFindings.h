// What a session tells its user: one table of findings, in priority order. Each row gives a
// finding's name (its key in SessionReport::warnings and in the health report), the group whose
// members exclude each other (of the drain's findings only the first that holds is given: they
// explain the same pending launches), the fix in one line, when the finding holds, and its message.
//
// The session evaluates the table once at stop (findingsFor) and warns with each message once;
// the health report (trace metadata) and diagnostics() carry the same names and messages, and
// torch_mspti.findings() gives the table to Python, where diagnostics() and `torch-mspti doctor`
// read names and fixes from it. Adding a finding is one row and one SessionFacts field or two.
// Thread-safety: the table is constant data; findingsFor is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_mspti {

// The numbers a stopped (or failed) session knows, as findings read them. Filled by the session
// (MsptiActivityProfilerSession::facts); tests fill it directly.
struct SessionFacts {
  // Configuration the messages name.
  int64_t bufferPoolCap = 0;
  int64_t drainTimeoutMs = 0;
  int64_t maxSessionRecords = 0;
  // The library: whether LD_PRELOAD names it, and the path a preload fix should name.
  bool libraryPreloaded = false;
  std::string preloadHint;
  // Another MSPTI consumer beside us (torch_npu's backend): present, and how it is named.
  bool peerPresent = false;
  std::string peerDescription;
  // Why the session could not collect ("" when it did not fail).
  std::string failureCause;
  // msptiActivityEnable(KERNEL) failed when the session was armed.
  bool kernelsNotEnabled = false;
  // MSPTI buffers the pool declined at its cap.
  uint64_t buffersDeclined = 0;
  // The drain (DrainStats): why it ended, what let pending launches go, its order, and the
  // launches still without a device record.
  std::string drainExitReason;
  std::string drainEvidence;
  std::string drainOrder;
  uint64_t pendingLaunches = 0;
  uint64_t kernelRecords = 0;  // KERNEL records the session received
  // Records dropped: launch outside the window, over max_session_records, of an earlier session.
  uint64_t outOfWindow = 0;
  uint64_t overCap = 0;
  std::string overCapKinds;  // "KERNEL 12, MARKER 600": the kinds the cap dropped, with their counts
  uint64_t staleRecords = 0;
  // Copy/memset calls the program made while no copy row can come (copiesNote says why; 0 when
  // rows can come, or when the note was given earlier in this process).
  uint64_t copyCallsWithoutRows = 0;
  std::string copiesNote;
  // Links: whether API records (RUNTIME_API or API) were collected; the host clock of API records
  // is unknown; device rows, rows launched from threads that ran no op, rows known from MSPTI's
  // hint only, rows with neither an API record nor a hint, and the threads that ran ops.
  bool apiRecordsCollected = false;
  bool clockUntrusted = false;
  uint64_t deviceRows = 0;
  uint64_t rowsFromOpLessThreads = 0;
  uint64_t rowsWithoutApiRecord = 0;
  uint64_t rowsWithoutLinkEvidence = 0;
  size_t opThreads = 0;
  // Op and user-range ids torch passed to the session (pushCorrelationId): 0 with
  // _ExperimentalConfig(disable_external_correlation=True), or when no op ran (kineto.md 4.1).
  uint64_t opsLogged = 0;
  // Rows launched from the thread that started the session (torch.profiler's, which torch always
  // records): with no op logged at all, ops ran there that torch did not pass on.
  uint64_t rowsFromSessionThread = 0;
  // The profile asked for CPU activity (torch records ops, and passes them on, only then).
  bool cpuOpsRequested = true;
};

struct FindingInfo {
  const char* name;   // e.g. "timeout"; stable (tests, doctor and users match on it)
  const char* group;  // findings of one group exclude each other ("" = none)
  const char* fix;    // what to do, one line
  bool (*holds)(const SessionFacts&);
  std::string (*message)(const SessionFacts&);  // "torch-mspti: ..." naming cause and fix
};

// Every finding, highest priority first.
const std::vector<FindingInfo>& findingTable();

// The row named `name`, or nullptr.
const FindingInfo* findFinding(const std::string& name);

struct FindingHit {
  const FindingInfo* info;
  std::string message;
};

// The findings that hold for `facts`, in table order, at most one per group. ("failed" and
// "kernels" are given when they happen, at configure or start, with findingMessage; they hold
// again at stop, and a session warns each finding once.)
std::vector<FindingHit> findingsFor(const SessionFacts& facts);

// The message of the row named `name` for `facts` (whether or not it holds); "" for an unknown name.
std::string findingMessage(const std::string& name, const SessionFacts& facts);

}  // namespace torch_mspti
