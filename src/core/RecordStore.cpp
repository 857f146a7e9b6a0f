#include "RecordStore.h"

#include <algorithm>
#include <iterator>
#include <type_traits>
#include <unordered_set>
#include <utility>

namespace torch_mspti {

namespace {

size_t recordsIn(const WalkResult& b) {
  return b.devices.size() + b.apis.size() + b.externals.size() + b.memory.size() + b.markers.size();
}

// Appends src to dst; the first batch's storage is taken whole.
template <typename Dst, typename Src>
void moveAll(Dst& dst, Src& src) {
  if constexpr (std::is_same_v<Dst, Src>) {
    if (dst.empty()) {
      dst.swap(src);
      return;
    }
  }
  dst.insert(dst.end(), std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
}

}  // namespace

void RecordStore::append(WalkResult& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sealed_) {
    afterCollection_ += batch.records;
    batch.clear();
    return;
  }
  // Every record of the batch fits even if each opened a wait that needs room for its answer:
  // keep them all without looking at each.
  if (fits(2 * recordsIn(batch))) keepAll(batch);
  else keepWithinCap(batch);
  for (int i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; ++i) recordsByKind_[i] += batch.recordsByKind[i];
  if (batch.abandoned) {
    ++abandonedBuffers_;
    abandonedBytes_ += batch.abandonedBytes;
  }
  records_.fetch_add(batch.records, std::memory_order_release);
  batch.clear();
}

// `need` more records fit beside those kept and the answers the kept launches still wait for.
bool RecordStore::fits(uint64_t need) const {
  return kept_ + ledger_.pending(CorrelationLedger::kAnyClass) + need <= maxRecords_;
}

void RecordStore::noteKeptDevice(const DeviceRecord& d) {
  ledger_.noteDevice(d);
  earliestNewEnd_ = std::min(earliestNewEnd_, d.end);
  if (std::find(devicesSeen_.begin(), devicesSeen_.end(), d.deviceId) == devicesSeen_.end())
    devicesSeen_.push_back(d.deviceId);
}

void RecordStore::keepAll(WalkResult& batch) {
  kept_ += recordsIn(batch);
  // External-correlation records live on in the ledger only (their op and user-range hints).
  for (const auto& e : batch.externals) ledger_.noteExternal(e);
  const size_t firstApi = apis_.size();
  moveAll(apis_, batch.apis);  // before noting: the ledger compares the starts of its indexed calls
  for (size_t i = firstApi; i < apis_.size(); ++i) ledger_.noteApi(apis_, i);
  for (const auto& m : batch.memory) ledger_.noteMemory(m);
  for (const auto& d : batch.devices) noteKeptDevice(d);
  moveAll(devices_, batch.devices);
  moveAll(memory_, batch.memory);
  moveAll(markers_, batch.markers);
}

// The cap keeps room for the answer (device or MEMORY record) of every launch call and external
// record it keeps: a kept launch's kernel is always kept, and a kernel whose launch was kept is
// never crowded out by the host records of later launches (which MSPTI delivers first, the
// device records of a launch coming ~200 ms after its call, docs/mspti.md 5.3). So past the cap the
// session holds whole launches; records that do not fit are counted (overCap) and their answers,
// when they come, find no room either. Each record is noted as it is kept (its wait changes the
// room of the next), calls first, so that a batch holding both a call and its kernel keeps them
// together. A device record that comes in an earlier batch than its call takes room as it finds
// it; its call may then find none (counted).
void RecordStore::keepWithinCap(WalkResult& batch) {
  const uint64_t before = kept_;
  // Launch calls of this batch that found no room: their hints and answers in it are dropped
  // with them, so no kernel is kept whose call was not.
  std::unordered_set<uint64_t> droppedCalls;
  for (auto& a : batch.apis) {
    const bool opens = ledger_.classOf(a) != LaunchClass::kNone && ledger_.wouldOpenWait(a.correlationId);
    if (fits(opens ? 2 : 1)) {
      apis_.push_back(std::move(a));
      ledger_.noteApi(apis_, apis_.size() - 1);
      ++kept_;
    } else if (opens) {
      droppedCalls.insert(a.correlationId);
    }
  }
  for (const auto& e : batch.externals) {
    if (!droppedCalls.count(e.correlationId) && fits(ledger_.wouldOpenWait(e.correlationId) ? 2 : 1)) {
      ledger_.noteExternal(e);
      ++kept_;
    }
  }
  for (const auto& m : batch.memory) {
    if (ledger_.awaitsAnswer(m.correlationId) || (!droppedCalls.count(m.correlationId) && fits(1))) {
      ledger_.noteMemory(m);
      memory_.push_back(m);
      ++kept_;
    } else {
      ledger_.noteAnswerIfKnown(m.correlationId);
    }
  }
  for (const auto& d : batch.devices) {
    if (ledger_.awaitsAnswer(d.correlationId) || (!droppedCalls.count(d.correlationId) && fits(1))) {
      noteKeptDevice(d);
      devices_.push_back(d);
      ++kept_;
    } else {
      ledger_.noteDeviceIfKnown(d);  // a further answer of a known launch; adds no entry
    }
  }
  for (auto& m : batch.markers) {
    if (fits(1)) {
      markers_.push_back(std::move(m));
      ++kept_;
    }
  }
  overCap_ += recordsIn(batch) - (kept_ - before);
}

void RecordStore::seal() {
  std::lock_guard<std::mutex> lock(mutex_);
  sealed_ = true;
}

uint64_t RecordStore::pendingLaunches(uint32_t waitFor) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.pending(waitFor);
}

void RecordStore::closeLaunchAdmissions() {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_.closeAdmissions();
}

uint64_t RecordStore::launchesAfterCloseWaiting(uint32_t waitFor) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledger_.launchesAfterCloseWaiting(waitFor);
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
