#include "MemoryEvents.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "LinkResolver.h"
#include "NpuActivity.h"
#include "TorchCompat.h"

namespace torch_mspti {
namespace {

const std::string kBytes = "bytes";
const std::string kAddress = "address";
const std::string kCorrelation = "correlation";
const std::string kLink = "link";
const std::string kOp = "op";
const std::string kCounterName = "NPU runtime memory";
const std::string kCounterKey = "allocated";

bool isRelease(const MemoryRecord& r) { return r.operation == MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE; }

}  // namespace

MemoryTimeline MemoryTimeline::build(const RecordStore& store, Admission& admission,
                                     const std::vector<uint32_t>& visibleDevices, SessionCounters& c) {
  MemoryTimeline t;
  const CorrelationLedger& ledger = store.ledger();
  const auto& apis = store.apis();
  const HostClock& clock = admission.clock();
  for (const MemoryRecord& r : store.memory()) {
    if (admission.stale(MSPTI_ACTIVITY_KIND_MEMORY, r.correlationId)) continue;
    const int64_t start = admission.realtime(MSPTI_ACTIVITY_KIND_MEMORY, r.start);
    if (!admission.inWindow(MSPTI_ACTIVITY_KIND_MEMORY, start)) continue;
    MemoryEvent& e = t.events.emplace_back();
    e.record = r;
    e.record.start = start;
    e.record.end = admission.realtime(MSPTI_ACTIVITY_KIND_MEMORY, r.end);
    e.device = logicalDevice(r.deviceId, visibleDevices);
    e.call = launchCall(r.correlationId, ledger, apis, clock);
  }
  std::sort(t.events.begin(), t.events.end(), [](const MemoryEvent& a, const MemoryEvent& b) {
    return std::tie(a.record.end, a.record.address) < std::tie(b.record.end, b.record.address);
  });
  std::map<int32_t, int64_t> allocated;
  for (MemoryEvent& e : t.events) {
    int64_t& total = allocated[e.device];
    const auto bytes = static_cast<int64_t>(e.record.bytes);
    if (isRelease(e.record)) {
      total -= bytes;
      ++c.memoryReleases;
      if (bytes == 0) ++c.memoryReleasesUnsized;
    } else {
      total += bytes;
      ++c.memoryAllocations;
    }
    e.allocated = total;
  }
  return t;
}

void buildMemoryActivities(const MemoryTimeline& timeline, const OpTimeline& ops, libkineto::CpuTraceBuffer& buffer,
                           DeviceLanes& lanes, SessionCounters& c) {
  using libkineto::ActivityType;
  using libkineto::GenericTraceActivity;
  for (const MemoryEvent& e : timeline.events) {
    const MemoryRecord& r = e.record;
    const LinkDecision d = resolveLink(e.call, ops);
    // A PRIVATEUSE1_DRIVER span of the call's host time: torch drops CPU_INSTANT_EVENT activities it
    // did not record itself, with a warning (kineto.md 1.6).
    auto owned = std::make_unique<NpuActivity>(buffer.span, ActivityType::PRIVATEUSE1_DRIVER,
                                               isRelease(r) ? "Memory Release" : "Memory Allocation");
    NpuActivity& instant = *owned;
    buffer.activities.push_back(std::move(owned));
    instant.startTime = r.start;
    instant.endTime = std::max(r.end, r.start);
    instant.device = e.device;
    instant.resource = kMemoryLane;
    instant.threadId = kMemoryLane;
    instant.arg(kBytes, r.bytes);
    instant.quotedArg(kAddress, fmt::format("0x{:x}", r.address));
    instant.arg(kCorrelation, r.correlationId);
    instant.quotedArg(kLink, linkStateName(d.state));
    if (d.op) {
      instant.arg(kOp, static_cast<uint64_t>(d.op->id));
      ++c.memoryLinked;
    }
    lanes.addMemoryLane(e.device);
    ++c.memoryEvents;

    if constexpr (!compat::kCounterEvents) continue;
    auto counter = std::make_unique<GenericTraceActivity>(buffer.span, ActivityType::CPU_INSTANT_EVENT, kCounterName);
    counter->startTime = r.end;
    counter->endTime = r.end;
    counter->device = e.device;
    counter->resource = kMemoryLane;
    counter->threadId = kMemoryLane;
    if (compat::setCounter(*counter, kCounterKey, static_cast<double>(e.allocated))) {
      buffer.activities.push_back(std::move(counter));
      ++c.memoryCounterSamples;
    }
  }
}

}  // namespace torch_mspti
