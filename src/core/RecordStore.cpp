#include "RecordStore.h"

#include <algorithm>
#include <iterator>
#include <type_traits>
#include <utility>

namespace torch_mspti {

void RecordStore::append(WalkResult& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sealed_) {
    afterCollection_ += batch.records;
    batch.clear();
    return;
  }
  // The cap: keep what fits (device rows first, then launch calls, then hints), count the rest.
  // A device record over the cap still ends its launch's wait (noteDeviceIfKnown: no new entry).
  uint64_t room = maxRecords_ > kept_ ? maxRecords_ - kept_ : 0;
  auto fit = [&room](size_t n) {
    const uint64_t k = std::min<uint64_t>(n, room);
    room -= k;
    return static_cast<size_t>(k);
  };
  const size_t devices = fit(batch.devices.size()), apis = fit(batch.apis.size()),
               externals = fit(batch.externals.size()), memory = fit(batch.memory.size()),
               markers = fit(batch.markers.size());
  const uint64_t over = (batch.devices.size() - devices) + (batch.apis.size() - apis) +
                        (batch.externals.size() - externals) + (batch.memory.size() - memory) +
                        (batch.markers.size() - markers);
  if (over > 0) {
    overCap_ += over;
    for (size_t i = devices; i < batch.devices.size(); ++i) ledger_.noteDeviceIfKnown(batch.devices[i]);
    for (size_t i = memory; i < batch.memory.size(); ++i) ledger_.noteAnswerIfKnown(batch.memory[i].correlationId);
    batch.devices.resize(devices);
    batch.apis.resize(apis);
    batch.externals.resize(externals);
    batch.memory.resize(memory);
    batch.markers.resize(markers);
  }
  kept_ += devices + apis + externals + memory + markers;
  // External-correlation records live on in the ledger only (their op and user-range hints).
  for (const auto& e : batch.externals) ledger_.noteExternal(e);
  auto moveAll = [](auto& dst, auto& src) {
    if constexpr (std::is_same_v<std::decay_t<decltype(dst)>, std::decay_t<decltype(src)>>) {
      if (dst.empty()) {
        dst.swap(src);  // first batch: take the storage whole
        return;
      }
    }
    dst.insert(dst.end(), std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
  };
  const size_t firstApi = apis_.size();
  moveAll(apis_, batch.apis);  // before noting: the ledger compares the starts of its indexed calls
  for (size_t i = firstApi; i < apis_.size(); ++i) ledger_.noteApi(apis_, i);
  for (const auto& m : batch.memory) ledger_.noteMemory(m);
  for (const auto& d : batch.devices) {
    ledger_.noteDevice(d);
    earliestNewEnd_ = std::min(earliestNewEnd_, d.end);
    if (std::find(devicesSeen_.begin(), devicesSeen_.end(), d.deviceId) == devicesSeen_.end())
      devicesSeen_.push_back(d.deviceId);
  }
  moveAll(devices_, batch.devices);
  moveAll(memory_, batch.memory);
  moveAll(markers_, batch.markers);
  for (int i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; ++i) recordsByKind_[i] += batch.recordsByKind[i];
  if (batch.abandoned) {
    ++abandonedBuffers_;
    abandonedBytes_ += batch.abandonedBytes;
  }
  records_.fetch_add(batch.records, std::memory_order_release);
  batch.clear();
}

void RecordStore::seal() {
  std::lock_guard<std::mutex> lock(mutex_);
  sealed_ = true;
}

uint64_t RecordStore::pendingLaunches(uint32_t waitFor) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.pending(waitFor);
}

bool RecordStore::knowsLaunches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.knowsLaunches();
}

uint64_t RecordStore::recordsOfKind(uint32_t kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kind < MSPTI_ACTIVITY_KIND_COUNT ? recordsByKind_[kind] : 0;
}

int64_t RecordStore::takeEarliestNewEnd() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(earliestNewEnd_, INT64_MAX);
}

uint64_t RecordStore::maxCorrelationId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.maxCorrelationId();
}

std::vector<uint32_t> RecordStore::devicesSeen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return devicesSeen_;
}

uint64_t RecordStore::overCap() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return overCap_;
}

uint64_t RecordStore::afterCollection() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return afterCollection_;
}

}  // namespace torch_mspti
