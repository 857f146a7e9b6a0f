#include "RecordStore.h"

#include <algorithm>
#include <iterator>

namespace torch_mspti {

namespace {
constexpr uint8_t kKnown = 1;
constexpr uint8_t kSeen = 2;
}  // namespace

void RecordStore::noteLaunch(uint64_t id) {
  if (id == 0 || id <= staleBelow_) return;
  knowsLaunches_ = true;
  uint8_t& s = ledger_[id];
  if (!(s & kKnown)) {
    s |= kKnown;
    if (!(s & kSeen)) ++pending_;
  }
}

void RecordStore::append(WalkResult& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& e : batch.externals) {
    noteLaunch(e.correlationId);
    maxCorrelationId_ = std::max(maxCorrelationId_, e.correlationId);
  }
  for (const auto& a : batch.apis) noteLaunch(a.correlationId);
  for (const auto& k : batch.kernels) {
    maxCorrelationId_ = std::max(maxCorrelationId_, k.correlationId);
    if (k.correlationId == 0) continue;
    uint8_t& s = ledger_[k.correlationId];
    if (!(s & kSeen)) {
      s |= kSeen;
      if (s & kKnown) --pending_;
    }
  }
  auto moveAll = [](auto& dst, auto& src) {
    if (dst.empty()) dst.swap(src);  // first batch: take the storage whole
    else dst.insert(dst.end(), std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
  };
  moveAll(kernels_, batch.kernels);
  moveAll(apis_, batch.apis);
  moveAll(externals_, batch.externals);
  for (int i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; ++i) recordsByKind_[i] += batch.recordsByKind[i];
  if (batch.abandoned) {
    ++abandonedBuffers_;
    abandonedBytes_ += batch.abandonedBytes;
  }
  records_.fetch_add(batch.records, std::memory_order_release);
  batch.clear();
}

uint64_t RecordStore::pendingLaunches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_;
}

bool RecordStore::knowsLaunches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return knowsLaunches_;
}

uint64_t RecordStore::maxCorrelationId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return maxCorrelationId_;
}

}  // namespace torch_mspti
