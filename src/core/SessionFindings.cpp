#include "SessionFindings.h"

#include <fmt/format.h>

namespace torch_mspti {
namespace {

using F = const SessionFacts&;

bool timedOutPending(F f) { return f.drainExitReason == "timeout" && f.pendingLaunches > 0 && f.buffersDeclined == 0; }
// Rows that lack an API record because none was collected (not because its buffer was declined).
bool hintOnly(F f) { return !f.apiRecordsCollected && f.rowsWithoutApiRecord > 0; }
// torch passed the session no op at all while most rows were launched from the profiling thread
// (whose ops torch records): its external correlation is off. Rows from other threads without
// any op logged are the task-queue row's (a thread of the user's without profile_all_threads).
bool noOpIds(F f) {
  return f.cpuOpsRequested && f.deviceRows > 0 && f.opsLogged == 0 && f.rowsFromSessionThread * 2 > f.deviceRows;
}

// Priority order: a lost-record cause the user can fix before the symptoms it explains.
const std::vector<FindingInfo> kTable = {
    {"failed", "", "see the session's errors (torch_mspti.diagnostics())", [](F f) { return !f.failureCause.empty(); },
     [](F f) {
       // Next to torch_npu's backend the lane is not empty: that backend collects; say who serves it.
       if (f.peerPresent)
         return fmt::format(
             "torch-mspti: collected nothing for this trace: {}; the NPU lane holds only what {} collects",
             f.failureCause, f.peerDescription);
       return fmt::format("torch-mspti: the NPU lane of this trace will be empty: {}", f.failureCause);
     }},
    {"kernels", "", "see the capability table (torch_mspti.diagnostics()) for why KERNEL cannot be enabled",
     [](F f) { return f.kernelsNotEnabled; },
     [](F) { return std::string("torch-mspti: no kernels in this trace: msptiActivityEnable(KERNEL) failed"); }},
    {"declined", "", "raise buffer_pool_cap or buffer_size", [](F f) { return f.buffersDeclined > 0; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} MSPTI buffer requests were declined at buffer_pool_cap={}; records were "
           "lost (raise buffer_pool_cap or buffer_size)",
           f.buffersDeclined, f.bufferPoolCap);
     }},
    // The drain group: why launches of this session have no device record. One cause each.
    {"declined-pending", "drain", "raise buffer_pool_cap or buffer_size",
     [](F f) { return f.pendingLaunches > 0 && f.buffersDeclined > 0; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} launches of this session have no device record, and {} MSPTI buffers were "
           "declined at buffer_pool_cap={}: their records were most likely in those buffers and are "
           "lost (raise buffer_pool_cap or buffer_size; a longer drain_timeout_ms does not bring them "
           "back)",
           f.pendingLaunches, f.buffersDeclined, f.bufferPoolCap);
     }},
    {"kernels-need-preload", "drain", "run with LD_PRELOAD naming libmspti.so",
     [](F f) { return f.drainEvidence == "kernels_need_preload" && f.pendingLaunches > 0; },
     [](F f) {
       // Before 26.0 a device is known only through the preloaded library's aclrtSetDevice (mspti.md 5.5).
       return fmt::format(
           "torch-mspti: MSPTI reported {} launches but no KERNEL or COMMUNICATION record, and stop() "
           "did not wait for them: this MSPTI does not know RUNTIME_API, so it predates 26.0, and such a "
           "library knows a device only when libmspti.so is preloaded at process start: run with "
           "LD_PRELOAD={}",
           f.pendingLaunches, f.preloadHint);
     }},
    {"peer-dropped", "drain", "use MSPTI 26.1 or newer, or TORCH_MSPTI_PROFILER=off",
     [](F f) { return timedOutPending(f) && f.peerPresent && f.drainOrder == "poll_first"; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} launches of this session never delivered device records: {} stopped before "
           "torch-mspti and disabled MSPTI's kinds, and this MSPTI (before 26.1) drops what is still on "
           "its way then; use MSPTI 26.1 or newer, or TORCH_MSPTI_PROFILER=off to let it serve",
           f.pendingLaunches, f.peerDescription);
     }},
    {"no-kernels", "drain", "raise drain_timeout_ms, synchronize the device, or preload libmspti.so",
     [](F f) { return timedOutPending(f) && f.kernelRecords == 0 && !f.libraryPreloaded; },
     [](F f) {
       // Two documented causes look alike here (mspti.md 5.5): records later than the bound (or
       // kernels still running), and a CANN that delivers kernels only with a process-start preload.
       return fmt::format(
           "torch-mspti: MSPTI reported {} launches but no KERNEL record within drain_timeout_ms={} ms. "
           "Either their records come later than that or the kernels were still running (raise "
           "drain_timeout_ms, or synchronize the device before the profile stops), or this CANN "
           "delivers kernels only when libmspti.so is preloaded at process start (releases before "
           "9.1): run with LD_PRELOAD={}",
           f.pendingLaunches, f.drainTimeoutMs, f.preloadHint);
     }},
    {"timeout", "drain", "raise drain_timeout_ms, or synchronize the device before the profile stops", timedOutPending,
     [](F f) {
       return fmt::format(
           "torch-mspti: {} launches still had no device record when the drain gave up at "
           "drain_timeout_ms={} ms: their records come later than that, or their work was still running "
           "on a device that was not synchronised (raise drain_timeout_ms, or synchronize the device "
           "before the profile stops)",
           f.pendingLaunches, f.drainTimeoutMs);
     }},
    {"unclassified", "drain", "set enable_api_records=True",
     [](F f) { return f.drainEvidence == "unclassified_quiet" && f.pendingLaunches > 0; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} launches known only from MSPTI's external-correlation hint had no device "
           "record once every row was due, and stop() did not wait longer: without API records their "
           "class is unknown, and they are likely copies, which this session does not collect (set "
           "enable_api_records=True, so stop() knows which launches to wait for)",
           f.pendingLaunches);
     }},
    {"pending", "drain", "see the drain statistics (torch_mspti.diagnostics())",
     [](F f) { return f.pendingLaunches > 0; },
     [](F f) {
       return fmt::format("torch-mspti: {} launches of this session have no device record (drain: {})",
                          f.pendingLaunches, f.drainExitReason);
     }},
    {"window", "", "widen the profiling window (its schedule) to take in their launches",
     [](F f) { return f.outOfWindow > 0; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} records were dropped as outside the profiling window (device rows by their launch, "
           "memory events and markers by their own time; per kind in dropped_by_kind)",
           f.outOfWindow);
     }},
    {"over-cap", "", "raise max_session_records, or profile a shorter window", [](F f) { return f.overCap > 0; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} records were dropped ({}): this session reached max_session_records={} (raise "
           "it, or profile a shorter window)",
           f.overCap, f.overCapKinds, f.maxSessionRecords);
     }},
    {"stale", "", "nothing to do: they belong to an earlier session", [](F f) { return f.staleRecords > 0; },
     [](F f) {
       return fmt::format("torch-mspti: {} records of an earlier session arrived in this one and were dropped",
                          f.staleRecords);
     }},
    {"copies", "", "see the copies note in torch_mspti.diagnostics()", [](F f) { return f.copyCallsWithoutRows > 0; },
     [](F f) {
       return fmt::format(
           "torch-mspti: the program made {} memory copy/memset calls but the trace has no copy rows: {}",
           f.copyCallsWithoutRows, f.copiesNote);
     }},
    // The links group's rows are independent of each other; each says why rows are unlinked or unverified.
    {"clock", "", "none: MSPTI's API records are on an unknown host clock", [](F f) { return f.clockUntrusted; },
     [](F) {
       return std::string("torch-mspti: MSPTI's API records are on an unknown host clock: no link could be verified");
     }},
    // torch passed no op at all: no thread ran an op the session was told of, so the task queue
    // (or a thread of the user's) is not the cause; torch's external correlation is off.
    {"no-op-ids", "", "profile without _ExperimentalConfig(disable_external_correlation=True)", noOpIds,
     [](F f) {
       return fmt::format(
           "torch-mspti: torch passed no op to the profiler in this session, though most of its {} device rows were "
           "launched from the profiling thread, which torch records: none can be credited to an op (their launch "
           "events and arrows are on the thread's lane, no op's arrow and no per-op device time). torch does so with "
           "experimental_config=torch._C._profiler._ExperimentalConfig(disable_external_correlation=True); "
           "profile without that setting (kernels launched outside any torch op are not affected by it)",
           f.deviceRows);
     }},
    {"task-queue", "",
     "set TASK_QUEUE_ENABLE=0 (torch_npu's task queue); for threads of your own, profile_all_threads=True",
     [](F f) { return f.deviceRows > 0 && !noOpIds(f) && f.rowsFromOpLessThreads * 2 > f.deviceRows; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} of {} device rows were launched from threads that ran no op torch recorded: "
           "they are shown on their launch thread's lane and credited to no op. With torch_npu's task "
           "queue set TASK_QUEUE_ENABLE=0; for threads of your own, profile with "
           "experimental_config=torch._C._profiler._ExperimentalConfig(profile_all_threads=True)",
           f.rowsFromOpLessThreads, f.deviceRows);
     }},
    // Without API records only MSPTI's hint is left. One thread running ops rules out another
    // thread on top of MSPTI's stack for every row; more threads leave it open.
    {"unverified", "hint", "set enable_api_records=True", [](F f) { return hintOnly(f) && f.opThreads <= 1; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} device rows are linked by MSPTI's hint alone (no API records): right for "
           "launches from the op's own thread, wrong for launches from a thread that runs no op "
           "(torch_npu's task queue, a housekeeping thread); set enable_api_records=True to verify each "
           "link",
           f.rowsWithoutApiRecord);
     }},
    {"ambiguous", "hint", "set enable_api_records=True", hintOnly,
     [](F f) {
       return fmt::format(
           "torch-mspti: {} device rows have no API record while {} threads ran ops: MSPTI's hint "
           "cannot be verified, and rows whose op ran while another thread ran ops are left unlinked "
           "(each row's link argument says which); set enable_api_records=True",
           f.rowsWithoutApiRecord, f.opThreads);
     }},
    // Without API records and without MSPTI's hint (external correlation, MSPTI 8.1 and newer:
    // mspti.md 8) nothing ties a row to an op.
    {"no-link-evidence", "hint", "set enable_api_records=True (and use MSPTI 8.1 or newer for the hint)",
     [](F f) { return !f.apiRecordsCollected && f.rowsWithoutLinkEvidence > 0; },
     [](F f) {
       return fmt::format(
           "torch-mspti: {} device rows carry neither an API record nor MSPTI's external-correlation "
           "hint, so none of them is linked to an op: set enable_api_records=True (MSPTI before 8.1 "
           "has no external correlation, so there API records are the only link)",
           f.rowsWithoutLinkEvidence);
     }},
};

}  // namespace

const std::vector<FindingInfo>& findingTable() { return kTable; }

const FindingInfo* findFinding(const std::string& name) {
  for (const FindingInfo& row : kTable)
    if (name == row.name) return &row;
  return nullptr;
}

std::vector<FindingHit> findingsFor(const SessionFacts& facts) {
  std::vector<FindingHit> hits;
  std::vector<std::string> groupsTaken;
  for (const FindingInfo& row : kTable) {
    if (!row.holds(facts)) continue;
    const std::string group = row.group;
    if (!group.empty()) {
      bool taken = false;
      for (const auto& g : groupsTaken) taken |= g == group;
      if (taken) continue;
      groupsTaken.push_back(group);
    }
    hits.push_back({&row, row.message(facts)});
  }
  return hits;
}

std::string findingMessage(const std::string& name, const SessionFacts& facts) {
  const FindingInfo* row = findFinding(name);
  return row ? row->message(facts) : std::string();
}

}  // namespace torch_mspti
