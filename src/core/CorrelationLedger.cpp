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

void CorrelationLedger::recount(const LaunchEntry& before, const LaunchEntry& after) {
  const int b = bucket(before), a = bucket(after);
  if (b == a) return;
  if (b >= 0) --pending_[b];
  if (a >= 0) ++pending_[a];
}

bool CorrelationLedger::junk(uint64_t id) {
  const uint64_t floor = std::max(staleBelow_, maxId_);
  if (id <= floor || id - floor <= kMaxIdGap) return false;
  ++junkIds_;
  return true;
}

void CorrelationLedger::noteExternal(const ExternalCorrelationRecord& e) {
  if (e.correlationId == 0 || e.correlationId <= staleBelow_ || junk(e.correlationId)) return;
  maxId_ = std::max(maxId_, e.correlationId);
  knows_ = true;
  firstOwnId_ = std::min(firstOwnId_, e.correlationId);
  LaunchEntry& entry = entries_[e.correlationId];
  const LaunchEntry before = entry;
  entry.external = true;
  if (e.externalKind == MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 && entry.opHint == 0) entry.opHint = e.externalId;
  if (e.externalKind == MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 && entry.userHint == 0) entry.userHint = e.externalId;
  recount(before, entry);
}

void CorrelationLedger::noteApi(const ApiRecord& api, int64_t index) {
  const LaunchClass c = api.name ? classifyApiName(*api.name) : LaunchClass::kNone;
  ++apiCalls_[static_cast<int>(c)];
  if (api.correlationId == 0 || api.correlationId <= staleBelow_) return;
  // Only a launch call vouches for its id (a call that launches nothing carries its thread's
  // current id, possibly an earlier session's).
  if (c != LaunchClass::kNone) {
    if (junk(api.correlationId)) return;
    maxId_ = std::max(maxId_, api.correlationId);
  }
  LaunchEntry& entry = entries_[api.correlationId];
  const LaunchEntry before = entry;
  if (entry.firstApi < 0 || api.start < entry.firstApiStart) {
    entry.firstApi = index;
    entry.firstApiStart = api.start;
  }
  if (c != LaunchClass::kNone) {
    knows_ = true;
    firstOwnId_ = std::min(firstOwnId_, api.correlationId);
    if (entry.launchApi < 0 || api.start < entry.launchApiStart) {
      entry.launchApi = index;
      entry.launchApiStart = api.start;
      entry.launchClass = c;
    }
  }
  recount(before, entry);
}

void CorrelationLedger::noteDevice(const DeviceRecord& d) { noteAnswer(d.correlationId); }

void CorrelationLedger::noteMemory(const MemoryRecord& m) { noteAnswer(m.correlationId); }

void CorrelationLedger::noteAnswer(uint64_t id) {
  if (id == 0 || id <= staleBelow_) return;
  LaunchEntry& entry = entries_[id];
  const LaunchEntry before = entry;
  ++entry.deviceRecords;
  recount(before, entry);
}

void CorrelationLedger::noteDeviceIfKnown(const DeviceRecord& d) { noteAnswerIfKnown(d.correlationId); }

void CorrelationLedger::noteAnswerIfKnown(uint64_t id) {
  if (id == 0 || id <= staleBelow_) return;
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  const LaunchEntry before = it->second;
  ++it->second.deviceRecords;
  recount(before, it->second);
}

uint64_t CorrelationLedger::pending(uint32_t waitFor) const {
  uint64_t n = 0;
  for (int c = 0; c < static_cast<int>(LaunchClass::kCount); ++c)
    if (waitFor & (1u << c)) n += pending_[c];
  return n;
}

CorrelationLedger::Watermark CorrelationLedger::watermark() const {
  std::vector<uint64_t> ids;
  ids.reserve(entries_.size());
  for (const auto& [id, e] : entries_)
    if (e.external || e.launchApi >= 0) ids.push_back(id);
  Watermark w;
  if (ids.empty()) return w;
  std::sort(ids.begin(), ids.end());
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

const LaunchEntry* CorrelationLedger::find(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace torch_mspti
