#include "SessionStats.h"

#include "JsonWriter.h"
#include "MsptiActivityApi.h"

namespace torch_mspti {

void SessionCounters::add(const SessionCounters& o) {
  for (int i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; ++i) recordsByKind[i] += o.recordsByKind[i];
  kernels += o.kernels;
  linkedKernels += o.linkedKernels;
  unlinkedKernels += o.unlinkedKernels;
  outOfWindow += o.outOfWindow;
  invalidTiming += o.invalidTiming;
  duplicates += o.duplicates;
  mislinksRejected += o.mislinksRejected;
  apiTimeUntrusted += o.apiTimeUntrusted;
  linkTargetMissing += o.linkTargetMissing;
  buffersRequested += o.buffersRequested;
  buffersCompleted += o.buffersCompleted;
  buffersDeclined += o.buffersDeclined;
  nullCompletions += o.nullCompletions;
  abandonedBuffers += o.abandonedBuffers;
  abandonedBytes += o.abandonedBytes;
  orphanRecords += o.orphanRecords;
  correlationErrors += o.correlationErrors;
  correlationOverflow += o.correlationOverflow;
  unbalancedAtStop += o.unbalancedAtStop;
  correlationInterleaved += o.correlationInterleaved;
  opIntervals += o.opIntervals;
  linkedByOpInterval += o.linkedByOpInterval;
}

uint64_t SessionCounters::records() const {
  uint64_t n = 0;
  for (uint64_t v : recordsByKind) n += v;
  return n;
}

StatsRegistry& StatsRegistry::instance() {
  static StatsRegistry* r = new StatsRegistry();
  return *r;
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

void StatsRegistry::addOrphans(uint64_t records) {
  std::lock_guard<std::mutex> lock(mutex_);
  totals_.orphanRecords += records;
}

void StatsRegistry::noteEnable(int kind, int result) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (kind > 0 && kind < MSPTI_ACTIVITY_KIND_COUNT) enableResults_[kind] = result;
}

std::vector<int> StatsRegistry::enableResults() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enableResults_;
}

void writeCounters(JsonWriter& w, const SessionCounters& c, bool withLinks) {
  w.beginObject("records_by_kind");
  for (int i = 1; i < MSPTI_ACTIVITY_KIND_COUNT; ++i)
    if (c.recordsByKind[i]) w.value(kindName(static_cast<msptiActivityKind>(i)), c.recordsByKind[i]);
  w.endObject();
  w.value("records", c.records());
  if (withLinks) {
    w.value("kernels", c.kernels).value("linked_kernels", c.linkedKernels);
    if (c.kernels) w.value("link_ratio", static_cast<double>(c.linkedKernels) / static_cast<double>(c.kernels));
    else w.null("link_ratio");
    w.value("unlinked_kernels", c.unlinkedKernels)
        .value("out_of_window", c.outOfWindow)
        .value("invalid_timing", c.invalidTiming)
        .value("duplicates", c.duplicates)
        .value("mislinks_rejected", c.mislinksRejected)
        .value("api_time_untrusted", c.apiTimeUntrusted)
        .value("link_target_missing", c.linkTargetMissing)
        .value("linked_by_op_interval", c.linkedByOpInterval)
        .value("records_dropped", c.outOfWindow + c.invalidTiming + c.duplicates);
  }
  w.beginObject("buffers")
      .value("requested", c.buffersRequested)
      .value("completed", c.buffersCompleted)
      .value("declined", c.buffersDeclined)
      .value("null_completions", c.nullCompletions)
      .value("abandoned", c.abandonedBuffers)
      .value("abandoned_bytes", c.abandonedBytes)
      .endObject();
  w.value("orphan_records", c.orphanRecords)
      .value("correlation_errors", c.correlationErrors)
      .value("correlation_overflow", c.correlationOverflow)
      .value("unbalanced_at_stop", c.unbalancedAtStop)
      .value("correlation_interleaved", c.correlationInterleaved)
      .value("op_intervals", c.opIntervals);
}

void writeDrain(JsonWriter& w, const DrainStats& d) {
  w.beginObject("drain")
      .value("order", d.order)
      .value("exit_reason", d.exitReason)
      .value("flushes", d.flushes)
      .value("ms", d.ms)
      .value("records_during_drain", d.recordsDuringDrain)
      .value("pending_launches", d.pendingLaunches)
      .value("late_records", d.lateRecords)
      .endObject();
}

std::string sessionReportJson() {
  StatsRegistry& reg = StatsRegistry::instance();
  const auto last = reg.last();
  JsonWriter w;
  w.beginObject();
  if (!last) {
    w.null("last_session");
  } else {
    w.beginObject("last_session").value("state", last->state);
    w.beginArray("errors");
    for (const auto& e : last->errors) w.value(nullptr, e);
    w.endArray();
    writeCounters(w, last->counters);
    if (last->drain) writeDrain(w, *last->drain);
    else w.null("drain");
    w.endObject();
  }
  w.beginObject("totals");
  writeCounters(w, reg.totals());
  w.endObject();
  w.endObject();
  return w.str();
}

}  // namespace torch_mspti
