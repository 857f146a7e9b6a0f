#include "SessionStats.h"

#include <cstring>

#include "ActivityKinds.h"
#include "JsonWriter.h"
#include "MsptiLibrary.h"

namespace torch_mspti {

const char* sessionStateName(SessionState s) {
  switch (s) {
    case SessionState::kConfigured: return "configured";
    case SessionState::kStarted: return "started";
    case SessionState::kStopped: return "stopped";
    case SessionState::kProcessed: return "processed";
    case SessionState::kFailed: return "failed";
  }
  return "failed";
}

void StatsRegistry::publish(const SessionReport& report, bool final) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_ = report;
  if (final) {
    totals_.add(report.counters);
    ++sessions_;
  }
}

std::optional<SessionReport> StatsRegistry::last() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_;
}

SessionCounters StatsRegistry::totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return totals_;
}

uint64_t StatsRegistry::sessions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sessions_;
}

void StatsRegistry::noteEnable(int kind, int result, std::string note) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (kind > 0 && kind < MSPTI_ACTIVITY_KIND_COUNT) enables_[static_cast<size_t>(kind)] = {result, std::move(note)};
}

bool StatsRegistry::firstTime(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& k : said_)
    if (k == key) return false;
  said_.push_back(key);
  return true;
}

std::vector<EnableOutcome> StatsRegistry::enableOutcomes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enables_;
}

void writeCounters(ReportWriter& w, const SessionCounters& c, bool tracePhase) {
  w.beginObject("records_by_kind");
  for (int i = 1; i < MSPTI_ACTIVITY_KIND_COUNT; ++i)
    if (c.recordsByKind[i]) w.value(kindName(static_cast<uint32_t>(i)), c.recordsByKind[i]);
  w.endObject();
  // Only the kinds that lost records, and for each only the reasons it lost them to.
  w.beginObject("dropped_by_kind");
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k) {
    bool any = false;
    for (int r = 0; r < kDropReasonCount; ++r) any |= c.droppedByKind[r][k] != 0;
    if (!any) continue;
    w.beginObject(kindName(static_cast<uint32_t>(k)));
    for (int r = 0; r < kDropReasonCount; ++r)
      if (c.droppedByKind[r][k]) w.value(dropReasonName(r), c.droppedByKind[r][k]);
    w.endObject();
  }
  w.endObject();
  w.beginObject("markers_by_domain");
  for (const auto& [domain, n] : c.markersByDomain) w.value(domain.c_str(), n);
  w.endObject();
  w.value("records", c.records());
  const char* open = nullptr;
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& info = kCounterInfo[i];
    if (info.phase == CounterPhase::kTrace && !tracePhase) continue;
    if (!open || std::strcmp(open, info.group) != 0) {
      if (open) w.endObject();
      w.beginObject(info.group);
      open = info.group;
    }
    w.value(info.key, c.*(info.field));
  }
  if (open) w.endObject();
  if (tracePhase) {
    w.value("linked_rows", c.linkedRows());
    if (c.deviceRows) w.value("link_ratio", static_cast<double>(c.linkedRows()) / static_cast<double>(c.deviceRows));
    else w.null("link_ratio");
  }
}

void writeDrain(ReportWriter& w, const DrainStats& d) {
  w.beginObject("drain")
      .value("order", d.order)
      .value("exit_reason", d.exitReason)
      .value("evidence", d.evidence)
      .value("pulled_by", d.pulledBy)
      .value("flushes", d.flushes)
      .value("ms", d.ms)
      .value("synchronize_ms", d.synchronizeMs)
      .value("records_during_drain", d.recordsDuringDrain)
      .value("pending_launches", d.pendingLaunches)
      .value("unanswered_after_stop", d.unansweredAfterStop)
      .value("late_records", d.lateRecords)
      .endObject();
}

namespace {
void textOrNull(ReportWriter& w, const char* key, const std::string& text) {
  if (text.empty()) w.null(key);
  else w.value(key, text);
}
}  // namespace

void writeLibrary(ReportWriter& w, const LibraryReport& r) {
  w.value("available", r.available);
  textOrNull(w, "path", r.path);
  textOrNull(w, "found_by", r.foundBy);
  textOrNull(w, "version", r.version);
  textOrNull(w, "reason", r.reason);
  textOrNull(w, "fix", r.fix);
  w.value("attempted", r.attempted);
}

void writeReport(ReportWriter& w, const SessionReport& r, bool tracePhase) {
  w.value("state", sessionStateName(r.state));
  w.beginArray("errors");
  for (const auto& e : r.errors) w.value(nullptr, e);
  w.endArray();
  w.beginArray("warnings");
  for (const auto& e : r.warnings) w.value(nullptr, e);
  w.endArray();
  w.beginArray("findings");
  for (const auto& [name, message] : r.findings)
    w.beginObject().value("name", name).value("message", message).endObject();
  w.endArray();
  w.beginArray("enabled_kinds");
  for (const auto& k : r.enabledKinds) w.value(nullptr, k);
  w.endArray();
  w.beginArray("not_collected");
  for (const auto& k : r.notCollected) w.value(nullptr, k);
  w.endArray();
  w.beginObject("marker_domains")
      .value("setting", r.markerDomains.setting)
      .value("applied", r.markerDomains.applied)
      .value("note", r.markerDomains.note)
      .endObject();
  if (r.hostClock.empty()) w.null("host_clock");
  else w.value("host_clock", r.hostClock);
  writeCounters(w, r.counters, tracePhase);
  if (r.drain) writeDrain(w, *r.drain);
  else w.null("drain");
  // Timings are known only after processTrace: diagnostics() give them, the trace's report
  // (written before processTrace) does not.
  if (!tracePhase) return;
  w.beginObject("timings");
  if (r.stopMs >= 0) w.value("stop_ms", r.stopMs);
  else w.null("stop_ms");
  if (r.processTraceMs >= 0) w.value("process_trace_ms", r.processTraceMs);
  else w.null("process_trace_ms");
  w.value("release_wait_ms", r.releaseWaitMs);
  w.endObject();
}

void writeSessions(ReportWriter& w, const StatsRegistry& stats) {
  const auto last = stats.last();
  w.beginObject();
  if (!last) {
    w.null("last_session");
  } else {
    w.beginObject("last_session");
    writeReport(w, *last, /*tracePhase=*/true);
    w.endObject();
  }
  w.beginObject("totals");
  writeCounters(w, stats.totals(), /*tracePhase=*/true);
  w.endObject();
  w.value("sessions", stats.sessions());
  w.endObject();
}

std::string sessionReportJson(const StatsRegistry& stats) {
  JsonWriter w;
  writeSessions(w, stats);
  return w.str();
}

}  // namespace torch_mspti
