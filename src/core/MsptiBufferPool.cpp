#include "MsptiBufferPool.h"

#include <new>

#include "MsptiRecordWalker.h"

namespace torch_mspti {
namespace {
// The pool MSPTI's callbacks reach (process-wide: PluginContext.h says why).
std::atomic<MsptiBufferPool*> gBound{nullptr};
}  // namespace

ActivityBuffer ActivityBuffer::allocate(size_t size) {
  ActivityBuffer b;
  // aligned_alloc needs a size that is a multiple of the alignment (8; buffer_size is one).
  b.data_.reset(static_cast<uint8_t*>(std::aligned_alloc(8, size)));
  b.size_ = b.data_ ? size : 0;
  return b;
}

MsptiBufferPool::~MsptiBufferPool() {
  MsptiBufferPool* self = this;
  gBound.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
}

void MsptiBufferPool::configure(size_t bytes, size_t cap) {
  bytes_.store(bytes, std::memory_order_relaxed);
  cap_.store(cap, std::memory_order_relaxed);
}

void MsptiBufferPool::setSink(std::shared_ptr<RecordStore> sink) { sink_.store(std::move(sink)); }

PoolCounters MsptiBufferPool::counters() const {
  return {requested_.load(), completed_.load(), declined_.load(), nullCompletions_.load(),
          foreign_.load(),   orphans_.load(),   failed_.load()};
}

size_t MsptiBufferPool::outstanding() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return outstanding_.size();
}

size_t MsptiBufferPool::pooled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

void MsptiBufferPool::lockForFork() {
  mutex_.lock();
  forkSink_ = sink_.load();
  if (forkSink_) forkSink_->lockForFork();
}

void MsptiBufferPool::unlockAfterFork() {
  if (forkSink_) forkSink_->unlockAfterFork();
  forkSink_.reset();
  mutex_.unlock();
}

void MsptiBufferPool::bindCallbacks() { gBound.store(this, std::memory_order_release); }

void MsptiBufferPool::onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  if (maxNumRecords) *maxNumRecords = 0;  // ignored by MSPTI (mspti.md 5.1)
  if (!buffer || !size) return;
  *buffer = nullptr;
  *size = 0;
  if (MsptiBufferPool* pool = gBound.load(std::memory_order_acquire)) pool->request(buffer, size);
}

void MsptiBufferPool::onComplete(uint8_t* buffer, size_t size, size_t validSize) {
  if (MsptiBufferPool* pool = gBound.load(std::memory_order_acquire)) pool->complete(buffer, size, validSize);
}

void MsptiBufferPool::request(uint8_t** buffer, size_t* size) {
  requested_.fetch_add(1, std::memory_order_relaxed);
  *buffer = nullptr;
  *size = 0;
  const size_t want = bytes_.load(std::memory_order_relaxed);
  try {
    ActivityBuffer b;
    std::lock_guard<std::mutex> lock(mutex_);
    if (outstanding_.size() >= cap_.load(std::memory_order_relaxed)) {
      declined_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size() == want) {
        b = std::move(free_[i]);
        free_[i] = std::move(free_.back());
        free_.pop_back();
        break;
      }
    }
    if (!b) b = ActivityBuffer::allocate(want);
    if (!b) {
      declined_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    uint8_t* p = b.data();
    outstanding_.emplace(p, std::move(b));
    *buffer = p;
    *size = want;
  } catch (...) {
    // Out of memory for the bookkeeping: decline (MSPTI drops records until its next request).
    declined_.fetch_add(1, std::memory_order_relaxed);
    *buffer = nullptr;
    *size = 0;
  }
}

void MsptiBufferPool::recycle(ActivityBuffer buffer) {
  if (recycleFault_.load(std::memory_order_relaxed)) throw std::bad_alloc();
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() < kMaxFree && buffer.size() == bytes_.load(std::memory_order_relaxed))
    free_.push_back(std::move(buffer));
  // else: freed here, when `buffer` goes out of scope
}

void MsptiBufferPool::complete(uint8_t* buffer, size_t size, size_t validSize) noexcept {
  completed_.fetch_add(1, std::memory_order_relaxed);
  if (!buffer) {
    // After a declined request MSPTI hands back an empty slot (mspti.md 5.1).
    nullCompletions_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ActivityBuffer own;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = outstanding_.find(buffer);
    if (it != outstanding_.end()) {
      own = std::move(it->second);
      outstanding_.erase(it);
    }
  }
  if (!own) foreign_.fetch_add(1, std::memory_order_relaxed);
  // Never read past the buffer: ours by the size we allocated, a foreign one by what MSPTI says.
  const size_t capacity = own ? own.size() : size;
  const size_t walkable = validSize <= capacity ? validSize : capacity;
  try {
    thread_local MsptiRecordWalker walker;
    thread_local WalkResult batch;
    batch.clear();
    std::shared_ptr<RecordStore> sink = sink_.load();
    walker.walk(buffer, walkable, sink ? &sink->names() : nullptr, batch);
    if (sink) sink->append(batch);
    else orphans_.fetch_add(batch.records, std::memory_order_relaxed);
    batch.clear();
    if (own) recycle(std::move(own));
  } catch (...) {
    // Out of memory while copying or recycling: nothing may escape into MSPTI's C thread (it
    // would end in std::terminate). The buffer is freed (`own` goes out of scope); whatever its
    // records were not yet appended is lost, and counted.
    failed_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace torch_mspti
