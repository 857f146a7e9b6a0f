#include "MstxMarkers.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "SimClock.h"
#include "mspti/mspti_activity.h"

namespace torch_mspti::sim {

const char* const kDefaultDomain = "default";

void* streamHandle(uint32_t device, uint32_t stream) {
  const uint64_t v = ((static_cast<uint64_t>(device) + 1) << 32) | stream;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(v));
}

MarkerStream streamOf(const void* handle) {
  const uint64_t v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  if ((v >> 32) == 0) return {};
  return {true, static_cast<uint32_t>((v >> 32) - 1), static_cast<uint32_t>(v & 0xFFFFFFFFu)};
}

void* MstxMarkers::createDomain(const char* name) {
  if (!name || !*name || std::strcmp(name, kDefaultDomain) == 0) return nullptr;  // "default" is refused
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = domains_[name];
  if (!slot) slot = std::make_unique<std::string>(name);
  return slot.get();
}

const char* MstxMarkers::domainName(const void* handle) const {
  return handle ? static_cast<const std::string*>(handle)->c_str() : nullptr;
}

bool MstxMarkers::setDomainEnabled(const char* name, bool on) {
  if (!name || !*name) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (on) disabled_.erase(name);
  else disabled_.insert(name);
  return true;
}

bool MstxMarkers::domainOn(const char* name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disabled_.count(name ? name : kDefaultDomain) == 0;
}

bool MstxMarkers::collecting(const char* domain) const {
  return ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_MARKER) && domainOn(domain);
}

void MstxMarkers::mark(const void* domain, const char* message, const void* stream) {
  const char* name = domainName(domain);
  if (!message || !collecting(name)) return;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = nextId_++;
  }
  const MarkerStream where = streamOf(stream);
  write(where.valid ? MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE : MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS,
        id, message, name ? name : kDefaultDomain, where);
}

uint64_t MstxMarkers::rangeStart(const void* domain, const char* message, const void* stream) {
  const char* name = domainName(domain);
  if (!message || !collecting(name)) return 0;  // MSTX_INVALID_ID
  const MarkerStream where = streamOf(stream);
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = nextId_++;
    openRanges_[id] = where;
  }
  write(where.valid ? MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE : MSPTI_ACTIVITY_FLAG_MARKER_START, id, message,
        name ? name : kDefaultDomain, where);
  return id;
}

void MstxMarkers::rangeEnd(const void* domain, uint64_t id) {
  if (!collecting(domainName(domain))) return;  // the range stays open, as in MSPTI
  MarkerStream where;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = openRanges_.find(id);
    if (it == openRanges_.end()) return;
    where = it->second;
    openRanges_.erase(it);
  }
  write(where.valid ? MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE : MSPTI_ACTIVITY_FLAG_MARKER_END, id, "", "", where);
}

void MstxMarkers::write(uint32_t flag, uint64_t id, const char* name, const char* domain, const MarkerStream& where) {
  msptiActivityMarker host{};
  host.kind = MSPTI_ACTIVITY_KIND_MARKER;
  host.flag = static_cast<msptiActivityFlag>(flag);
  host.sourceKind = MSPTI_ACTIVITY_SOURCE_KIND_HOST;
  const uint64_t now = realtimeNs();
  host.timestamp = ctx_.hostRecords.onHostClock(now);  // MSPTI's host clock (mspti.md 4)
  host.id = id;
  host.objectId.pt.processId = static_cast<uint32_t>(::getpid());
  host.objectId.pt.threadId = static_cast<uint32_t>(::syscall(SYS_gettid));
  host.name = ctx_.names.intern(name);
  host.domain = ctx_.names.intern(domain);
  if (ctx_.buffers.record(&host, sizeof(host))) SimCounters::add(ctx_.counters.markerRecords);
  if (!where.valid) return;
  // The device's own record: from the stream, with no message and no domain.
  msptiActivityMarker device = host;
  device.sourceKind = MSPTI_ACTIVITY_SOURCE_KIND_DEVICE;
  device.timestamp = std::max<uint64_t>(now, ctx_.timeline.streamTail(where.device, where.stream));
  device.objectId.ds.deviceId = ctx_.environment.physicalDevice(where.device);
  device.objectId.ds.streamId = where.stream;
  device.name = ctx_.names.intern("");
  device.domain = ctx_.names.intern("");
  if (ctx_.buffers.record(&device, sizeof(device))) SimCounters::add(ctx_.counters.markerRecords);
}

}  // namespace torch_mspti::sim
