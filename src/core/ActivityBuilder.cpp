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

// Metadata keys, built once rather than per activity (kineto takes them as std::string).
const std::string kDeviceKey = "device";
const std::string kStreamKey = "stream";
const std::string kCorrelationKey = "correlation";
const std::string kTypeKey = "type";

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

// The op intervals of interval mode, per thread: sorted by start (then longest first), each with
// the index of its innermost enclosing interval, so that the innermost op containing a time is
// found by one binary search and a walk up at most the nesting depth.
class OpIndex {
 public:
  explicit OpIndex(const std::vector<OpInterval>* all) {
    if (!all) return;
    for (const auto& iv : *all) byThread_[iv.threadId].push_back({iv.start, iv.end, iv.opId, -1});
    for (auto& [tid, nodes] : byThread_) {
      std::sort(nodes.begin(), nodes.end(),
                [](const Node& a, const Node& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
      std::vector<int32_t> open;
      for (size_t i = 0; i < nodes.size(); ++i) {
        while (!open.empty() && nodes[open.back()].end < nodes[i].start) open.pop_back();
        nodes[i].parent = open.empty() ? -1 : open.back();
        open.push_back(static_cast<int32_t>(i));
      }
    }
  }
  bool empty() const { return byThread_.empty(); }
  // Innermost op on thread `tid` whose [start, end] contains `t`; 0 when none does.
  uint64_t find(uint32_t tid, int64_t t) const {
    auto it = byThread_.find(tid);
    if (it == byThread_.end()) return 0;
    const auto& nodes = it->second;
    auto pos = std::upper_bound(nodes.begin(), nodes.end(), t, [](int64_t v, const Node& n) { return v < n.start; });
    for (int32_t i = static_cast<int32_t>(pos - nodes.begin()) - 1; i >= 0; i = nodes[i].parent)
      if (nodes[i].end >= t) return nodes[i].opId;
    return 0;
  }

 private:
  struct Node {
    int64_t start, end;
    uint64_t opId;
    int32_t parent;
  };
  std::unordered_map<uint32_t, std::vector<Node>> byThread_;
};

// MSPTI correlation id (never 0) -> the records naming it, for ids asked in ascending order (the
// kernels are walked sorted by id). A vector sorted by id, stable so that records of one id keep
// their arrival order; records mostly arrive in id order, so sortedness is checked first. Reads
// advance a cursor: no hashing, no per-entry allocation, sequential memory.
template <typename V>
class IdTable {
 public:
  struct Entry {
    uint64_t id;
    V value;
  };
  explicit IdTable(size_t n) { entries_.reserve(n); }
  void add(uint64_t id, V v) { entries_.push_back({id, v}); }
  void seal() {
    auto byId = [](const Entry& a, const Entry& b) { return a.id < b.id; };
    if (!std::is_sorted(entries_.begin(), entries_.end(), byId))
      std::stable_sort(entries_.begin(), entries_.end(), byId);
  }
  // The entries of `id` in arrival order ([first, last), empty when none). Ids must not decrease
  // from one call to the next.
  std::pair<const Entry*, const Entry*> next(uint64_t id) {
    while (cur_ < entries_.size() && entries_[cur_].id < id) ++cur_;
    size_t end = cur_;
    while (end < entries_.size() && entries_[end].id == id) ++end;
    return {entries_.data() + cur_, entries_.data() + end};
  }

 private:
  std::vector<Entry> entries_;
  size_t cur_ = 0;
};

}  // namespace

void buildActivities(const BuildInput& in, libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes, SessionCounters& c) {
  const RecordStore& store = *in.store;
  IdTable<uint64_t> opOf(store.externals().size());  // MSPTI correlation id -> torch op id (CUSTOM0)
  for (const auto& e : store.externals())
    if (e.externalKind == MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 && e.correlationId != 0)
      opOf.add(e.correlationId, e.externalId);
  opOf.seal();
  IdTable<const ApiRecord*> apiOf(store.apis().size());  // API records per launch
  for (const auto& a : store.apis())
    if (a.correlationId != 0) apiOf.add(a.correlationId, &a);
  apiOf.seal();

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
  // Sorted by the correlation id held inline (no pointer chase unless two ids tie); records
  // mostly arrive in id order already, so sortedness is checked first.
  {
    std::vector<std::pair<uint64_t, const KernelRecord*>> byId(ks.size());
    for (size_t n = 0; n < ks.size(); ++n) byId[n] = {ks[n]->correlationId, ks[n]};
    auto less = [&](const std::pair<uint64_t, const KernelRecord*>& a,
                    const std::pair<uint64_t, const KernelRecord*>& b) {
      return a.first != b.first ? a.first < b.first : key(a.second) < key(b.second);
    };
    if (!std::is_sorted(byId.begin(), byId.end(), less)) {
      std::sort(byId.begin(), byId.end(), less);
      for (size_t n = 0; n < ks.size(); ++n) ks[n] = byId[n].second;
    }
  }
  auto last =
      std::unique(ks.begin(), ks.end(), [&](const KernelRecord* a, const KernelRecord* b) { return key(a) == key(b); });
  c.duplicates += static_cast<uint64_t>(ks.end() - last);
  ks.erase(last, ks.end());

  const OpIndex opIntervals(in.intervals);
  CorrelationIds& ids = CorrelationIds::instance();
  size_t i = 0;
  while (i < ks.size()) {
    const uint64_t corr = ks[i]->correlationId;
    size_t j = i;
    int64_t firstStart = ks[i]->start;
    while (j < ks.size() && ks[j]->correlationId == corr) firstStart = std::min(firstStart, ks[j++]->start);

    Link link;
    bool linked = false;
    bool byInterval = false;
    if (corr != 0) {
      // The first CUSTOM0 record of the launch names its op; the earliest API record (the first
      // to arrive among equally early ones) is its launch call.
      const auto [op, opEnd] = opOf.next(corr);
      const ApiRecord* apiRecord = nullptr;
      for (auto [a, aEnd] = apiOf.next(corr); a != aEnd; ++a)
        if (!apiRecord || a->value->start < apiRecord->start) apiRecord = a->value;
      uint64_t opId = op != opEnd ? op->value : 0;
      if (opId == 0 && apiRecord && !opIntervals.empty()) {
        opId = opIntervals.find(apiRecord->threadId, apiRecord->start);
        byInterval = opId != 0;
      }
      linked = resolveLink(opId, apiRecord, firstStart, in, c, link);
    }
    if (linked && byInterval) c.linkedByOpInterval += j - i;
    const int32_t launchId = ids.next();
    if (linked) {
      auto& rt = *buffer.activities.emplace_back(std::make_unique<GenericTraceActivity>(
          buffer.span, ActivityType::PRIVATEUSE1_RUNTIME, launchName(link.apiName)));
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
      rt.addMetadata(kCorrelationKey, launchId);
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
      act.addMetadata(kDeviceKey, device);
      act.addMetadata(kStreamKey, stream);
      act.addMetadata(kCorrelationKey, launchId);
      act.addMetadataQuoted(kTypeKey, *k.type);
      lanes.add(device, stream);
      ++c.kernels;
    }
  }
  buffer.gpuOpCount = static_cast<int>(std::min<uint64_t>(c.kernels, INT32_MAX));
}

}  // namespace torch_mspti
