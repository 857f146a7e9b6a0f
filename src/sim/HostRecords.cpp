#include "HostRecords.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "CorrelationIds.h"
#include "SimClock.h"

namespace torch_mspti::sim {

namespace {

uint32_t currentTid() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

}  // namespace

uint64_t HostRecords::apiNow() const { return ctx_.options.flag(Option::kApiClock) ? monotonicRawNs() : realtimeNs(); }

uint64_t HostRecords::onHostClock(uint64_t realtime) const {
  if (!ctx_.options.flag(Option::kApiClock) || realtime <= rawOffsetNs_) return realtime;
  return realtime - rawOffsetNs_;
}

int HostRecords::apiKind() const {
  if (ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_RUNTIME_API)) {
    return MSPTI_ACTIVITY_KIND_RUNTIME_API;
  }
  if (ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_API)) {
    return MSPTI_ACTIVITY_KIND_API;
  }
  return MSPTI_ACTIVITY_KIND_INVALID;
}

void HostRecords::writeApi(const char* name, uint64_t startNs, uint64_t endNs) {
  const int kind = apiKind();
  if (kind == MSPTI_ACTIVITY_KIND_INVALID) {
    return;
  }
  msptiActivityApi record{};
  record.kind = static_cast<msptiActivityKind>(kind);
  record.start = startNs;
  record.end = endNs;
  record.pt.processId = static_cast<uint32_t>(::getpid());
  record.pt.threadId = currentTid();
  record.correlationId = CorrelationIds::currentOfThisThread();
  record.name = ctx_.names.intern(name);
  if (ctx_.buffers.record(&record, sizeof(record))) {
    SimCounters::add(ctx_.counters.apiRecords);
  }
}

void HostRecords::runtimeCall(const char* name, uint64_t hostNs) {
  const uint64_t start = apiNow();
  sleepForNs(hostNs);
  if (ctx_.subscriber.active()) {
    writeApi(name, start, apiNow());
  }
}

void HostRecords::writeExternalCorrelations(uint64_t correlationId) {
  if (!ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
    return;
  }
  // One record per kind whose stack is non-empty, externalId = its top (mspti.md 5.4).
  for (const auto& [kind, top] : ctx_.externalCorrelation.tops(ctx_.options.flag(Option::kPerThreadStacks))) {
    writeExternalRecord(kind, top, correlationId);
  }
}

void HostRecords::writeExternalRecord(uint32_t kind, uint64_t externalId, uint64_t correlationId) {
  msptiActivityExternalCorrelation record{};
  record.kind = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  record.externalKind = static_cast<msptiExternalCorrelationKind>(kind);
  record.externalId = externalId;
  record.correlationId = correlationId;
  if (ctx_.buffers.record(&record, sizeof(record))) {
    SimCounters::add(ctx_.counters.externalRecords);
  }
}

}  // namespace torch_mspti::sim
