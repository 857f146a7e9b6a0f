#include "CorrelationLedger.h"

#include <algorithm>
#include <cctype>

namespace torch_mspti {
namespace {

bool containsNoCase(std::string_view text, std::string_view part) {
  auto it = std::search(text.begin(), text.end(), part.begin(), part.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

}  // namespace

LaunchClass classifyApiName(std::string_view name) {
  if (containsNoCase(name, "memcpy")) return LaunchClass::kMemcpy;
  if (containsNoCase(name, "memset")) return LaunchClass::kMemset;
  if (containsNoCase(name, "hccl") || containsNoCase(name, "hcom") || containsNoCase(name, "lccl"))
    return LaunchClass::kCommunication;
  if (containsNoCase(name, "launch")) return LaunchClass::kKernel;
  return LaunchClass::kNone;
}

LaunchClass classOfDeviceKind(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL: return LaunchClass::kKernel;
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return LaunchClass::kCommunication;
    case MSPTI_ACTIVITY_KIND_MEMCPY: return LaunchClass::kMemcpy;
    case MSPTI_ACTIVITY_KIND_MEMSET: return LaunchClass::kMemset;
    default: return LaunchClass::kNone;
  }
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

void CorrelationLedger::noteExternal(const ExternalCorrelationRecord& e) {
  if (e.correlationId == 0 || e.correlationId <= staleBelow_) return;
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

void CorrelationLedger::noteApi(const ApiRecord& api, int32_t index) {
  const LaunchClass c = api.name ? classifyApiName(*api.name) : LaunchClass::kNone;
  ++apiCalls_[static_cast<int>(c)];
  if (api.correlationId == 0 || api.correlationId <= staleBelow_) return;
  maxId_ = std::max(maxId_, api.correlationId);
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

void CorrelationLedger::noteDevice(const DeviceRecord& d) {
  maxId_ = std::max(maxId_, d.correlationId);
  if (d.correlationId == 0 || d.correlationId <= staleBelow_) return;
  LaunchEntry& entry = entries_[d.correlationId];
  const LaunchEntry before = entry;
  ++entry.deviceRecords;
  recount(before, entry);
}

uint64_t CorrelationLedger::pending(uint32_t waitFor) const {
  uint64_t n = 0;
  for (int c = 0; c < static_cast<int>(LaunchClass::kCount); ++c)
    if (waitFor & (1u << c)) n += pending_[c];
  return n;
}

const LaunchEntry* CorrelationLedger::find(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace torch_mspti
