#include "RecordStore.h"

#include "KindHandlers.h"

#include <algorithm>
#include <iterator>
#include <type_traits>
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
  // Every record of the batch fits even if each opened a wait that needs room for its answer, and
  // no launch was refused whose records the batch could hold: keep them all without looking at each.
  if (room_.noneRefused() && fits(2 * recordsIn(batch))) keepAll(batch);
  else keepWithinCap(batch);
  for (int i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; ++i) recordsByKind_[i] += batch.recordsByKind[i];
  if (batch.abandoned) {
    ++abandonedBuffers_;
    abandonedBytes_ += batch.abandonedBytes;
  }
  records_.fetch_add(batch.records, std::memory_order_release);
  batch.clear();
}

bool RecordStore::fits(uint64_t need) const { return room_.fits(need, ledger_.pending(room_.waitMask())); }

void RecordStore::waitFor(uint32_t classes, bool calls) {
  std::lock_guard<std::mutex> lock(mutex_);
  room_.waitFor(classes);
  if (calls) room_.expectCalls();
}

void RecordStore::noteKeptDevice(const DeviceRecord& d) {
  ledger_.noteDevice(d);
  earliestNewEnd_ = std::min(earliestNewEnd_, d.end);
  if (std::find(devicesSeen_.begin(), devicesSeen_.end(), d.deviceId) == devicesSeen_.end())
    devicesSeen_.push_back(d.deviceId);
}

void RecordStore::keepAll(WalkResult& batch) {
  room_.keep(recordsIn(batch));
  // External-correlation records live on in the ledger only (their op and user-range hints).
  for (const auto& e : batch.externals) ledger_.noteExternal(e);
  const size_t firstApi = apis_.size();
  moveAll(apis_, batch.apis);  // before noting: the ledger compares the starts of its indexed calls
  for (size_t i = firstApi; i < apis_.size(); ++i) {
    if (ledger_.classOf(apis_[i]) != LaunchClass::kNone) room_.takeHeldCall(apis_[i].correlationId);
    ledger_.noteApi(apis_, i);
  }
  for (const auto& m : batch.memory) {
    ledger_.noteMemory(m);
    if (callToCome(m.correlationId, LaunchClass::kMemory)) room_.holdCall(m.correlationId);
  }
  for (const auto& d : batch.devices) {
    noteKeptDevice(d);
    if (callToCome(d.correlationId, kindHandler(d.kind).answers)) room_.holdCall(d.correlationId);
  }
  moveAll(devices_, batch.devices);
  moveAll(memory_, batch.memory);
  moveAll(markers_, batch.markers);
}

// An answer with id `id` whose launch call (of class `c`) is collected but has not come
// (CapRoom.h). Only for a class whose calls this library has been seen to report in the session
// (or before any API record came): a library (or a call name) that reports none would otherwise
// make every such answer hold room for a call that never comes. A row whose call still never comes holds its record to
// the end.
bool RecordStore::callToCome(uint64_t id, LaunchClass c) const {
  if (!room_.callsExpected() || id == 0 || id <= ledger_.staleBelow()) return false;
  if (c == LaunchClass::kNone) return false;
  // The usual case first (its call already kept): one lookup per row on the completion path.
  const LaunchEntry* e = ledger_.find(id);
  if (e && e->launchApi >= 0) return false;
  // Until the first API record nothing says which calls this library reports.
  if (ledger_.apiCalls(c) > 0) return true;
  for (int k = 0; k < static_cast<int>(LaunchClass::kCount); ++k)
    if (ledger_.apiCalls(static_cast<LaunchClass>(k)) > 0) return false;
  return true;
}

// An answer (device row or MEMORY record, of class `c`) with id `id` that does not end a wait:
// kept when it fits, with room for its call when the call is still to come.
bool RecordStore::keepAnswer(uint64_t id, LaunchClass c) {
  // A launch refused at its call is refused whole, even when an external record kept before
  // the call opened a wait for it (that wait ends as the row is counted, noteDeviceIfKnown).
  if (room_.refused(id)) return false;
  // Its room was held since its call (or hint) was kept, when the session waits for its class.
  if (room_.waitsFor(ledger_.pendingClassOf(id))) return true;
  const bool ahead = callToCome(id, c);
  if (!fits(ahead ? 2 : 1)) {
    if (ahead) room_.refuseLaunch(id);  // its call, when it comes, would describe no row
    return false;
  }
  if (ahead) room_.holdCall(id);
  return true;
}

void RecordStore::countOverCap(uint32_t kind) {
  ++overCap_;
  if (kind < MSPTI_ACTIVITY_KIND_COUNT) ++overCapByKind_[kind];
}

// The cap keeps room for the answer (device or MEMORY record) of every launch call and external
// record it keeps, for the classes the session waits for (CapRoom.h): a kept launch's kernel is
// always kept, and a kernel whose launch was kept is never crowded out by the host records of
// later launches (which MSPTI delivers first, the device records of a launch coming ~200 ms after
// its call, docs/mspti.md 5.3). So past the cap the session holds whole launches; records that do
// not fit are counted per kind (overCap), and a launch whose call was refused has its answers and
// hints refused in every later batch. Each record is noted as it is kept (its wait changes the
// room of the next), calls first, so that a batch holding both a call and its kernel keeps them
// together.
void RecordStore::keepWithinCap(WalkResult& batch) {
  for (auto& a : batch.apis) {
    const LaunchClass c = ledger_.classOf(a);
    const uint64_t id = a.correlationId;
    const bool launches = c != LaunchClass::kNone;
    // Noting the call starts a wait the session waits for where none was: a new id, or one known
    // from an external record whose unclassified wait the session does not wait for.
    const LaunchEntry* e = launches ? ledger_.find(id) : nullptr;
    const bool answered = e && e->deviceRecords > 0;
    const bool opens = launches && room_.waitsFor(c) && !answered && id > ledger_.staleBelow() &&
                       !room_.waitsFor(ledger_.pendingClassOf(id));
    if ((launches && room_.takeHeldCall(id)) || (!(launches && room_.refused(id)) && fits(opens ? 2 : 1))) {
      apis_.push_back(std::move(a));
      ledger_.noteApi(apis_, apis_.size() - 1);
      room_.keep();
    } else {
      if (launches) room_.refuseLaunch(id);
      countOverCap(a.kind);
    }
  }
  for (const auto& e : batch.externals) {
    const bool opens = room_.waitsFor(LaunchClass::kNone) && ledger_.wouldOpenWait(e.correlationId);
    if (!room_.refused(e.correlationId) && fits(opens ? 2 : 1)) {
      ledger_.noteExternal(e);
      room_.keep();
    } else {
      countOverCap(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    }
  }
  for (const auto& m : batch.memory) {
    if (keepAnswer(m.correlationId, LaunchClass::kMemory)) {
      ledger_.noteMemory(m);
      memory_.push_back(m);
      room_.keep();
    } else {
      ledger_.noteAnswerIfKnown(m.correlationId);
      countOverCap(MSPTI_ACTIVITY_KIND_MEMORY);
    }
  }
  for (const auto& d : batch.devices) {
    if (keepAnswer(d.correlationId, kindHandler(d.kind).answers)) {
      noteKeptDevice(d);
      devices_.push_back(d);
      room_.keep();
    } else {
      ledger_.noteDeviceIfKnown(d);  // a further answer of a known launch; adds no entry
      countOverCap(d.kind);
    }
  }
  for (auto& m : batch.markers) {
    if (fits(1)) {
      markers_.push_back(std::move(m));
      room_.keep();
    } else {
      countOverCap(MSPTI_ACTIVITY_KIND_MARKER);
    }
  }
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

std::vector<uint64_t> RecordStore::overCapByKind() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::vector<uint64_t>(std::begin(overCapByKind_), std::end(overCapByKind_));
}

uint64_t RecordStore::afterCollection() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return afterCollection_;
}

}  // namespace torch_mspti
