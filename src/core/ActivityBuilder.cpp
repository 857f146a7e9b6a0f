#include "ActivityBuilder.h"

#include <algorithm>
#include <unordered_map>

#include "CorrelationIds.h"

namespace torch_mspti {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;
using libkineto::ITraceActivity;

struct Link {
  const ITraceActivity* op = nullptr;
  int64_t launchStart = 0;
  int64_t launchEnd = 0;
  const std::string* apiName = nullptr;
};

const std::string& launchName(const std::string* apiName) {
  static const std::string kFallback = "LaunchKernel";
  return apiName ? *apiName : kFallback;
}

// Decides whether the launch `corr` links to an op, and where its host launch event goes.
bool resolveLink(uint64_t opId, const ApiRecord* api, int64_t firstKernelStart, const BuildInput& in,
                 SessionCounters& c, Link& out) {
  if (opId == 0 || !in.linked || !*in.linked) return false;
  const ITraceActivity* op = (*in.linked)(static_cast<int32_t>(opId));
  if (!op) {
    ++c.linkTargetMissing;
    return false;
  }
  const int64_t opStart = op->timestamp();
  const int64_t opEnd = std::max(opStart, opStart + op->duration());
  if (api && api->threadId != static_cast<uint32_t>(op->resourceId())) {
    ++c.mislinksRejected;  // launched on another thread than the op that was on MSPTI's stack
    return false;
  }
  if (firstKernelStart < opStart) {
    ++c.mislinksRejected;  // a kernel cannot start before the op that launched it
    return false;
  }
  int64_t start = opStart;
  int64_t end = opStart;
  if (api) {
    if (api->start >= opStart && api->start <= opEnd) {
      start = api->start;
      end = std::min(std::max(api->end, api->start), opEnd);
    } else {
      ++c.apiTimeUntrusted;
    }
  }
  start = std::min(start, firstKernelStart);  // the arrow must not point backwards
  end = std::max(end, start + 1);
  if (end > opEnd && start + 1 <= opEnd) end = opEnd;
  out = {op, start, end, api ? api->name : nullptr};
  return true;
}

}  // namespace

void buildActivities(const BuildInput& in, libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes,
                     SessionCounters& c) {
  const RecordStore& store = *in.store;
  std::unordered_map<uint64_t, uint64_t> opOf;  // MSPTI correlation id -> torch op id (CUSTOM0)
  opOf.reserve(store.externals().size());
  for (const auto& e : store.externals())
    if (e.externalKind == MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 && e.correlationId != 0)
      opOf.emplace(e.correlationId, e.externalId);
  std::unordered_map<uint64_t, const ApiRecord*> apiOf;  // earliest API record per launch
  apiOf.reserve(store.apis().size());
  for (const auto& a : store.apis()) {
    if (a.correlationId == 0) continue;
    auto [it, inserted] = apiOf.emplace(a.correlationId, &a);
    if (!inserted && a.start < it->second->start) it->second = &a;
  }

  // Valid, in-window kernels, grouped by launch and deduplicated.
  std::vector<const KernelRecord*> ks;
  ks.reserve(store.kernels().size());
  for (const auto& k : store.kernels()) {
    if (k.start <= 0 || k.end <= k.start) {
      ++c.invalidTiming;
      continue;
    }
    if (in.windowEnd > 0 && (k.start < in.windowStart || k.end > in.windowEnd)) {
      ++c.outOfWindow;
      continue;
    }
    ks.push_back(&k);
  }
  auto key = [](const KernelRecord* k) {
    return std::tie(k->correlationId, k->start, k->end, k->deviceId, k->streamId, k->name);
  };
  std::sort(ks.begin(), ks.end(), [&](const KernelRecord* a, const KernelRecord* b) { return key(a) < key(b); });
  auto last = std::unique(ks.begin(), ks.end(),
                          [&](const KernelRecord* a, const KernelRecord* b) { return key(a) == key(b); });
  c.duplicates += static_cast<uint64_t>(ks.end() - last);
  ks.erase(last, ks.end());

  CorrelationIds& ids = CorrelationIds::instance();
  size_t i = 0;
  while (i < ks.size()) {
    const uint64_t corr = ks[i]->correlationId;
    size_t j = i;
    int64_t firstStart = ks[i]->start;
    while (j < ks.size() && ks[j]->correlationId == corr) firstStart = std::min(firstStart, ks[j++]->start);

    Link link;
    bool linked = false;
    if (corr != 0) {
      auto op = opOf.find(corr);
      auto api = apiOf.find(corr);
      linked = resolveLink(op == opOf.end() ? 0 : op->second, api == apiOf.end() ? nullptr : api->second,
                           firstStart, in, c, link);
    }
    const int32_t launchId = ids.next();
    if (linked) {
      auto& rt = *buffer.activities.emplace_back(
          std::make_unique<GenericTraceActivity>(buffer.span, ActivityType::PRIVATEUSE1_RUNTIME,
                                                 launchName(link.apiName)));
      rt.startTime = link.launchStart;
      rt.endTime = link.launchEnd;
      rt.id = launchId;
      rt.device = static_cast<int32_t>(link.op->deviceId());
      rt.resource = static_cast<int32_t>(link.op->resourceId());
      rt.threadId = link.op->getThreadId();
      rt.flow.id = static_cast<uint32_t>(launchId);
      rt.flow.type = libkineto::kLinkAsyncCpuGpu;
      rt.flow.start = 1;
      rt.linked = link.op;
      rt.addMetadata("correlation", launchId);
    }
    for (; i < j; ++i) {
      const KernelRecord& k = *ks[i];
      const int32_t device = logicalDevice(k.deviceId, in.visibleDevices);
      const int32_t stream = static_cast<int32_t>(k.streamId);
      auto& act = *buffer.activities.emplace_back(
          std::make_unique<GenericTraceActivity>(buffer.span, ActivityType::CONCURRENT_KERNEL, *k.name));
      act.startTime = k.start;
      act.endTime = k.end;
      act.id = launchId;
      act.device = device;
      act.resource = stream;
      act.threadId = stream;
      if (linked) {
        act.flow.id = static_cast<uint32_t>(launchId);
        act.flow.type = libkineto::kLinkAsyncCpuGpu;
        act.flow.start = 0;
        act.linked = link.op;
        ++c.linkedKernels;
      } else {
        ++c.unlinkedKernels;
      }
      act.addMetadata("device", device);
      act.addMetadata("stream", stream);
      act.addMetadata("correlation", launchId);
      act.addMetadataQuoted("type", *k.type);
      lanes.add(device, stream);
      ++c.kernels;
    }
  }
  buffer.gpuOpCount = static_cast<int>(std::min<uint64_t>(c.kernels, INT32_MAX));
}

}  // namespace torch_mspti
