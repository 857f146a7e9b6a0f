#include "CorrelationLedger.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <vector>

namespace torch_mspti {
namespace {

bool containsNoCase(std::string_view text, std::string_view part) {
  auto it = std::search(text.begin(), text.end(), part.begin(), part.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

// The kernel-launch calls of the CANN runtime (RUNTIME_API names, without and with the legacy
// "rt" prefix) and of ACL, exactly (mspti.md 4; the simulator reports "LaunchKernelV2"). Other
// calls with "Launch" in their name start no kernel: aclrtLaunchCallback and aclrtLaunchHostFunc
// run a host function.
constexpr std::string_view kKernelLaunches[] = {
    "AicpuKernelLaunchExWithArgs",
    "CpuKernelLaunch",
    "CpuKernelLaunchExWithArgs",
    "KernelLaunch",
    "KernelLaunchEx",
    "KernelLaunchWithFlag",
    "KernelLaunchWithFlagV2",
    "KernelLaunchWithHandle",
    "KernelLaunchWithHandleV2",
    "LaunchKernel",
    "LaunchKernelByFuncHandle",
    "LaunchKernelByFuncHandleV2",
    "LaunchKernelByFuncHandleV3",
    "LaunchKernelV2",
    "LaunchKernelWithConfig",
    "LaunchKernelWithHostArgs",
    "VectorCoreKernelLaunch",
    "aclrtLaunchKernel",
    "aclrtLaunchKernelV2",
    "aclrtLaunchKernelWithConfig",
    "aclrtLaunchKernelWithHostArgs",
    "rtAicpuKernelLaunchExWithArgs",
    "rtCpuKernelLaunch",
    "rtCpuKernelLaunchWithFlag",
    "rtKernelLaunch",
    "rtKernelLaunchEx",
    "rtKernelLaunchWithFlag",
    "rtKernelLaunchWithFlagV2",
    "rtKernelLaunchWithHandle",
    "rtKernelLaunchWithHandleV2",
    "rtLaunchKernelByFuncHandle",
    "rtLaunchKernelByFuncHandleV2",
    "rtLaunchKernelByFuncHandleV3",
    "rtVectorCoreKernelLaunch",
};

// The ACL calls whose interposed hook writes a MEMORY record (MSPTI a389160
// csrc/common/inject/acl_mem_inject.cpp, mspti.md 5.8). Host allocations and physical-memory
// handles mint an id but write none.
constexpr std::string_view kMemoryCalls[] = {
    "aclrtFree",
    "aclrtMalloc",
    "aclrtMallocCached",
    "aclrtMallocForTaskScheduler",
    "aclrtMallocWithCfg",
    "aclrtReleaseMemAddress",
    "aclrtReserveMemAddress",
};

bool isMemoryCall(std::string_view name) {
  return std::binary_search(std::begin(kMemoryCalls), std::end(kMemoryCalls), name);
}

bool isKernelLaunch(std::string_view name) {
  return std::binary_search(std::begin(kKernelLaunches), std::end(kKernelLaunches), name);
}

}  // namespace

LaunchClass classifyApiName(std::string_view name) {
  if (containsNoCase(name, "memcpy")) return LaunchClass::kMemcpy;
  if (containsNoCase(name, "memset")) return LaunchClass::kMemset;
  if (containsNoCase(name, "hccl") || containsNoCase(name, "hcom") || containsNoCase(name, "lccl"))
    return LaunchClass::kCommunication;
  if (isKernelLaunch(name)) return LaunchClass::kKernel;
  if (isMemoryCall(name)) return LaunchClass::kMemory;
  return LaunchClass::kNone;
}

int CorrelationLedger::bucket(const LaunchEntry& e) {
  if (e.deviceRecords > 0) return -1;
  if (e.launchClass != LaunchClass::kNone) return static_cast<int>(e.launchClass);
  return e.external ? static_cast<int>(LaunchClass::kNone) : -1;
}

void CorrelationLedger::recount(uint64_t id, const LaunchEntry& before, const LaunchEntry& after) {
  const int b = bucket(before), a = bucket(after);
  if (b == a) return;
  uint64_t* counts = id > admitThrough_ ? afterClose_ : pending_;
  if (b >= 0) --counts[b];
  if (a >= 0) ++counts[a];
}

void CorrelationLedger::closeAdmissions() {
  if (admitThrough_ == UINT64_MAX) admitThrough_ = std::max(maxId_, staleBelow_);
}

uint64_t CorrelationLedger::launchesAfterCloseWaiting(uint32_t waitFor) const {
  uint64_t n = 0;
  for (int c = 0; c < static_cast<int>(LaunchClass::kCount); ++c)
    if (waitFor & (1u << c)) n += afterClose_[c];
  return n;
}

bool CorrelationLedger::junk(uint64_t id) {
  const uint64_t floor = std::max(staleBelow_, maxId_);
  if (id <= floor || id - floor <= kMaxIdGap) return false;
  ++junkIds_;
  return true;
}

LaunchEntry* CorrelationLedger::slot(uint64_t id, bool create) {
  if (base_ == 0 && create) base_ = id;
  if (base_ != 0 && id >= base_) {
    const uint64_t k = id - base_;
    const bool inDense = k < dense_.size();
    if (inDense && dense_[k].present) return &dense_[k];
    // An id may have gone to the sparse map before the dense run reached it.
    if (!sparse_.empty()) {
      auto it = sparse_.find(id);
      if (it != sparse_.end()) return &it->second;
    }
    if (!create) return nullptr;
    if (inDense || k - dense_.size() < kDenseSlack + dense_.size() / 4) {
      if (!inDense) dense_.resize(k + 1);
      dense_[k].present = true;
      ++size_;
      return &dense_[k];
    }
  } else if (!create) {
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  auto [it, fresh] = sparse_.try_emplace(id);
  if (fresh) {
    it->second.present = true;
    ++size_;
  }
  return &it->second;
}

const LaunchEntry* CorrelationLedger::lookup(uint64_t id) const {
  return const_cast<CorrelationLedger*>(this)->slot(id, false);
}

void CorrelationLedger::noteExternal(const ExternalCorrelationRecord& e) {
  if (!ours(e.correlationId) || junk(e.correlationId)) return;
  maxId_ = std::max(maxId_, e.correlationId);
  knows_ = true;
  firstOwnId_ = std::min(firstOwnId_, e.correlationId);
  LaunchEntry& entry = *slot(e.correlationId, true);
  const LaunchEntry before = entry;
  entry.external = true;
  if (e.externalKind == MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 && entry.opHint == 0) entry.opHint = e.externalId;
  if (e.externalKind == MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 && entry.userHint == 0) entry.userHint = e.externalId;
  recount(e.correlationId, before, entry);
}

LaunchClass CorrelationLedger::classOf(const ApiRecord& api) {
  if (!api.name) return LaunchClass::kNone;
  // Names are interned (one pointer per distinct name): each is classified once.
  auto [it, fresh] = classOfName_.try_emplace(api.name, LaunchClass::kNone);
  if (fresh) it->second = classifyApiName(*api.name);
  return it->second;
}

bool CorrelationLedger::awaitsAnswer(uint64_t id) const {
  if (!ours(id)) return false;
  const LaunchEntry* e = lookup(id);
  return e && bucket(*e) >= 0;
}

int CorrelationLedger::pendingClassOf(uint64_t id) const {
  if (!ours(id)) return -1;
  const LaunchEntry* e = lookup(id);
  return e ? bucket(*e) : -1;
}

bool CorrelationLedger::wouldOpenWait(uint64_t id) const {
  if (!ours(id)) return false;
  const LaunchEntry* e = lookup(id);
  return !e || (e->deviceRecords == 0 && bucket(*e) < 0);
}

void CorrelationLedger::noteApi(const ApiRecords& apis, size_t index) {
  const ApiRecord& api = apis[index];
  const LaunchClass c = classOf(api);
  ++apiCalls_[static_cast<int>(c)];
  if (!ours(api.correlationId)) return;
  // Only a launch call vouches for its id (a call that launches nothing carries its thread's
  // current id, possibly an earlier session's).
  if (c != LaunchClass::kNone) {
    if (junk(api.correlationId)) return;
    maxId_ = std::max(maxId_, api.correlationId);
  }
  LaunchEntry& entry = *slot(api.correlationId, true);
  const LaunchEntry before = entry;
  const auto i = static_cast<int32_t>(index);  // < max_session_records <= 2^31
  auto earlier = [&](int32_t current) { return current < 0 || api.start < apis[static_cast<size_t>(current)].start; };
  if (earlier(entry.firstApi)) entry.firstApi = i;
  if (c != LaunchClass::kNone) {
    knows_ = true;
    firstOwnId_ = std::min(firstOwnId_, api.correlationId);
    if (earlier(entry.launchApi)) {
      entry.launchApi = i;
      entry.launchClass = c;
    }
  }
  recount(api.correlationId, before, entry);
}

void CorrelationLedger::noteDevice(const DeviceRecord& d) { noteAnswer(d.correlationId); }

void CorrelationLedger::noteMemory(const MemoryRecord& m) { noteAnswer(m.correlationId); }

void CorrelationLedger::noteAnswer(uint64_t id) {
  if (!ours(id)) return;
  LaunchEntry& entry = *slot(id, true);
  const LaunchEntry before = entry;
  ++entry.deviceRecords;
  recount(id, before, entry);
}

void CorrelationLedger::noteDeviceIfKnown(const DeviceRecord& d) { noteAnswerIfKnown(d.correlationId); }

void CorrelationLedger::noteAnswerIfKnown(uint64_t id) {
  if (!ours(id)) return;
  LaunchEntry* e = slot(id, false);
  if (!e) return;
  const LaunchEntry before = *e;
  ++e->deviceRecords;
  recount(id, before, *e);
}

uint64_t CorrelationLedger::pending(uint32_t waitFor) const {
  uint64_t n = 0;
  for (int c = 0; c < static_cast<int>(LaunchClass::kCount); ++c)
    if (waitFor & (1u << c)) n += pending_[c];
  return n;
}

CorrelationLedger::Watermark CorrelationLedger::watermark() const {
  std::vector<uint64_t> ids;
  ids.reserve(size_);  // the dense run's ids come in ascending order: sorted unless the map adds some
  for (size_t k = 0; k < dense_.size(); ++k)
    if (dense_[k].present && (dense_[k].external || dense_[k].launchApi >= 0)) ids.push_back(base_ + k);
  for (const auto& [id, e] : sparse_)
    if (e.external || e.launchApi >= 0) ids.push_back(id);
  Watermark w;
  if (ids.empty()) return w;
  if (!sparse_.empty()) std::sort(ids.begin(), ids.end());
  size_t bestBegin = 0, bestEnd = 0, begin = 0;
  for (size_t i = 1; i <= ids.size(); ++i) {
    if (i < ids.size() && ids[i] - ids[i - 1] <= kClusterGap) continue;
    if (i - begin > bestEnd - bestBegin) {
      bestBegin = begin;
      bestEnd = i;
    }
    begin = i;
  }
  w.id = ids[bestEnd - 1];
  w.outliers = ids.size() - (bestEnd - bestBegin);
  return w;
}

const LaunchEntry* CorrelationLedger::find(uint64_t id) const { return lookup(id); }

void CorrelationLedger::releaseEntries() {
  std::deque<LaunchEntry>().swap(dense_);
  std::unordered_map<uint64_t, LaunchEntry>().swap(sparse_);
  base_ = 0;
  size_ = 0;
}

}  // namespace torch_mspti
