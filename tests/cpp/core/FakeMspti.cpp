#include "FakeMspti.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "ActivityKinds.h"
#include "FakeOps.h"

namespace torch_mspti::test {
namespace {

std::atomic<FakeMspti*> gCurrent{nullptr};
int gSubscriberToken = 0;  // what the handle points at

bool validKind(int kind) { return kind > MSPTI_ACTIVITY_KIND_INVALID && kind < MSPTI_ACTIVITY_KIND_COUNT; }

}  // namespace

FakeMspti::FakeMspti() {
  FakeMspti* none = nullptr;
  if (!gCurrent.compare_exchange_strong(none, this)) std::abort();  // one fake at a time
}

FakeMspti::~FakeMspti() { gCurrent.store(nullptr); }

FakeMspti& FakeMspti::self() {
  FakeMspti* f = gCurrent.load();
  if (!f) std::abort();  // a table outlived its fake
  return *f;
}

MsptiFunctions FakeMspti::functions() const {
  MsptiFunctions f;
  f.subscribe = &FakeMspti::subscribe;
  f.unsubscribe = &FakeMspti::unsubscribe;
  f.registerCallbacks = &FakeMspti::registerCallbacks;
  f.enable = &FakeMspti::enable;
  f.disable = &FakeMspti::disable;
  f.flushAll = &FakeMspti::flushAll;
  if (withExternalCorrelation) {
    f.pushExternalCorrelationId = &FakeMspti::push;
    f.popExternalCorrelationId = &FakeMspti::pop;
  }
  if (withIsEnabled) f.isEnabled = &FakeMspti::isEnabled;
  return f;
}

void FakeMspti::note(const std::string& call, Entry entry) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(call);
  }
  if (throwIn & entry) throw std::runtime_error("fake MSPTI: " + call + " throws");
}

msptiResult FakeMspti::subscribe(msptiSubscriberHandle* handle, msptiCallbackFunc, void*) {
  FakeMspti& f = self();
  f.note("subscribe", kSubscribe);
  std::lock_guard<std::mutex> lock(f.mutex_);
  if (f.subscribeResult != MSPTI_SUCCESS) return f.subscribeResult;
  if (f.subscribed_) return MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (!handle) return MSPTI_ERROR_INVALID_PARAMETER;
  f.subscribed_ = true;
  *handle = reinterpret_cast<msptiSubscriberHandle>(&gSubscriberToken);
  return MSPTI_SUCCESS;
}

msptiResult FakeMspti::unsubscribe(msptiSubscriberHandle handle) {
  FakeMspti& f = self();
  f.note("unsubscribe", kUnsubscribe);
  std::lock_guard<std::mutex> lock(f.mutex_);
  if (f.unsubscribeResult != MSPTI_SUCCESS) return f.unsubscribeResult;
  if (!f.subscribed_ || handle != reinterpret_cast<msptiSubscriberHandle>(&gSubscriberToken))
    return MSPTI_ERROR_INVALID_PARAMETER;
  f.subscribed_ = false;
  if (!f.keepInFlightAfterUnsubscribe) f.inFlight_.clear();  // the device tasks stop
  return MSPTI_SUCCESS;
}

msptiResult FakeMspti::registerCallbacks(msptiBuffersCallbackRequestFunc req, msptiBuffersCallbackCompleteFunc done) {
  FakeMspti& f = self();
  f.note("registerCallbacks", kRegisterCallbacks);
  std::lock_guard<std::mutex> lock(f.mutex_);
  if (f.registerResult != MSPTI_SUCCESS) return f.registerResult;
  if (!req || !done) return MSPTI_ERROR_INVALID_PARAMETER;
  f.request_ = req;
  f.complete_ = done;
  return MSPTI_SUCCESS;
}

msptiResult FakeMspti::enable(msptiActivityKind kind) {
  FakeMspti& f = self();
  f.note(std::string("enable(") + kindName(kind) + ")", kEnable);
  std::lock_guard<std::mutex> lock(f.mutex_);
  if (!validKind(kind)) return MSPTI_ERROR_INVALID_PARAMETER;
  auto it = f.enableResults.find(kind);
  if (it != f.enableResults.end() && it->second != MSPTI_SUCCESS) return it->second;
  f.enabled_[kind] = true;
  return MSPTI_SUCCESS;
}

msptiResult FakeMspti::disable(msptiActivityKind kind) {
  FakeMspti& f = self();
  f.note(std::string("disable(") + kindName(kind) + ")", kDisable);
  std::lock_guard<std::mutex> lock(f.mutex_);
  if (!validKind(kind)) return MSPTI_ERROR_INVALID_PARAMETER;
  f.enabled_[kind] = false;
  return MSPTI_SUCCESS;
}

msptiResult FakeMspti::flushAll(uint32_t) {
  FakeMspti& f = self();
  f.note("flushAll", kFlushAll);
  RecordBuilder out;
  {
    std::lock_guard<std::mutex> lock(f.mutex_);
    if (f.flushResult != MSPTI_SUCCESS) return f.flushResult;
    if (!f.flushDelivers) return MSPTI_SUCCESS;
    for (auto it = f.later_.begin(); it != f.later_.end();) {
      if (--it->first <= 0) {
        f.inFlight_.append(it->second);
        it = f.later_.erase(it);
      } else {
        ++it;
      }
    }
    out.append(f.current_);
    f.current_.clear();
    if (!f.inFlightOnlyAfterUnsubscribe || !f.subscribed_) {
      out.append(f.inFlight_);
      f.inFlight_.clear();
    }
  }
  f.deliver(std::move(out));  // on the caller's thread, as MSPTI's FlushAll (mspti.md 5.2)
  return MSPTI_SUCCESS;
}

msptiResult FakeMspti::push(msptiExternalCorrelationKind kind, uint64_t id) {
  FakeMspti& f = self();
  if (f.throwIn & kPush) throw std::runtime_error("fake MSPTI: push throws");
  if (kind < MSPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= MSPTI_EXTERNAL_CORRELATION_KIND_SIZE)
    return MSPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(f.mutex_);
  f.stacks_[kind].push_back(id);
  return MSPTI_SUCCESS;
}

msptiResult FakeMspti::pop(msptiExternalCorrelationKind kind, uint64_t* lastId) {
  FakeMspti& f = self();
  if (f.throwIn & kPop) throw std::runtime_error("fake MSPTI: pop throws");
  if (!lastId || kind < MSPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= MSPTI_EXTERNAL_CORRELATION_KIND_SIZE)
    return MSPTI_ERROR_INVALID_PARAMETER;  // a NULL lastId fails and pops nothing (mspti.md 6, item 1)
  std::lock_guard<std::mutex> lock(f.mutex_);
  auto& s = f.stacks_[kind];
  if (s.empty()) return MSPTI_ERROR_QUEUE_EMPTY;
  *lastId = s.back();
  s.pop_back();
  return MSPTI_SUCCESS;
}

bool FakeMspti::isEnabled(msptiActivityKind kind) {
  FakeMspti& f = self();
  std::lock_guard<std::mutex> lock(f.mutex_);
  return validKind(kind) && f.enabled_[kind];
}

uint64_t FakeMspti::launchKernel(const char* name, uint32_t device, uint32_t stream, uint64_t start, uint64_t end) {
  const int64_t now = realtimeNs();
  const uint32_t tid = currentTid();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!subscribed_ || !enabled_[MSPTI_ACTIVITY_KIND_KERNEL]) return 0;
  const uint64_t id = nextId_++;
  if (enabled_[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]) {
    for (uint32_t kind = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0; kind <= MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
         ++kind)
      if (!stacks_[kind].empty()) current_.external(kind, stacks_[kind].back(), id);
  }
  const uint32_t apiKind = enabled_[MSPTI_ACTIVITY_KIND_RUNTIME_API] ? MSPTI_ACTIVITY_KIND_RUNTIME_API
                           : enabled_[MSPTI_ACTIVITY_KIND_API]       ? MSPTI_ACTIVITY_KIND_API
                                                                     : 0;
  if (apiKind)
    current_.api(static_cast<uint64_t>(now), static_cast<uint64_t>(now) + 500, static_cast<uint32_t>(getpid()), tid, id,
                 "LaunchKernelV2", apiKind);
  const char* kept = names_.emplace_back(name ? name : "").c_str();
  if (start == 0) start = static_cast<uint64_t>(now) + 1000;
  if (end == 0) end = start + 1000;
  inFlight_.kernel(start, end, device, stream, id, kept);
  return id;
}

void FakeMspti::writeNow(const RecordBuilder& records) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_.append(records);
}

void FakeMspti::putInFlight(const RecordBuilder& records) {
  std::lock_guard<std::mutex> lock(mutex_);
  inFlight_.append(records);
}

void FakeMspti::putInFlightLater(const RecordBuilder& records, int flushes) {
  std::lock_guard<std::mutex> lock(mutex_);
  later_.emplace_back(flushes, records);
}

void FakeMspti::deliverNow() {
  RecordBuilder out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.append(current_);
    current_.clear();
  }
  deliver(std::move(out));
}

void FakeMspti::deliver(RecordBuilder records) {
  msptiBuffersCallbackRequestFunc request;
  msptiBuffersCallbackCompleteFunc complete;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request = request_;
    complete = complete_;
  }
  if (records.empty() || !request || !complete) return;
  uint8_t* buffer = nullptr;
  size_t size = 0, maxRecords = 0;
  request(&buffer, &size, &maxRecords);
  if (!buffer || size == 0) {
    // A declined request: the records are dropped and an empty slot is completed (mspti.md 5.1).
    {
      std::lock_guard<std::mutex> lock(mutex_);
      declinedBytes_ += records.size();
    }
    complete(nullptr, 0, 0);
    return;
  }
  const size_t valid = records.size() <= size ? records.size() : 0;  // a record that does not fit is dropped
  std::memcpy(buffer, records.data(), valid);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++delivered_;
  }
  complete(buffer, size, valid);
}

bool FakeMspti::completeForeignBuffer(const RecordBuilder& records) {
  msptiBuffersCallbackCompleteFunc complete;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    complete = complete_;
  }
  if (!complete) return false;
  constexpr size_t kCanary = 64;
  const size_t size = records.size() + 256;
  auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(8, size + kCanary));
  std::memset(buffer, 0, size);
  std::memcpy(buffer, records.data(), records.size());
  std::memset(buffer + size, 0xC5, kCanary);
  complete(buffer, size, records.size());
  bool intact = std::memcmp(buffer, records.data(), records.size()) == 0;
  for (size_t i = 0; i < kCanary; ++i) intact &= buffer[size + i] == 0xC5;
  std::free(buffer);  // ours: a pool that freed it too makes this a double free
  return intact;
}

void FakeMspti::releaseSubscriber() {
  std::lock_guard<std::mutex> lock(mutex_);
  subscribed_ = false;
}

std::vector<std::string> FakeMspti::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

size_t FakeMspti::count(const std::string& call) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& c : calls_) n += c == call;
  return n;
}

bool FakeMspti::subscribed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return subscribed_;
}

bool FakeMspti::enabled(int kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return validKind(kind) && enabled_[kind];
}

size_t FakeMspti::stackDepth(uint32_t externalKind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return externalKind < 5 ? stacks_[externalKind].size() : 0;
}

uint64_t FakeMspti::lastId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return nextId_ - 1;
}

uint64_t FakeMspti::buffersDelivered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return delivered_;
}

uint64_t FakeMspti::recordsDeclined() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return declinedBytes_;
}

}  // namespace torch_mspti::test
