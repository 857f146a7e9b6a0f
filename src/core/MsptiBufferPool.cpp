#include "MsptiBufferPool.h"

#include <cstdlib>

#include "SessionStats.h"

namespace torch_mspti {
namespace {
// Buffers kept for reuse between sessions; the rest go back to the allocator.
constexpr size_t kMaxFree = 4;
}  // namespace

MsptiBufferPool& MsptiBufferPool::instance() {
  static MsptiBufferPool* pool = new MsptiBufferPool();  // outlives every MSPTI thread
  return *pool;
}

void MsptiBufferPool::configure(size_t bytes, size_t cap) {
  bytes_.store(bytes, std::memory_order_relaxed);
  cap_.store(cap, std::memory_order_relaxed);
}

void MsptiBufferPool::setSink(std::shared_ptr<RecordStore> sink) { sink_.store(std::move(sink)); }

PoolCounters MsptiBufferPool::counters() const {
  return {requested_.load(), completed_.load(), declined_.load(), nullCompletions_.load()};
}

size_t MsptiBufferPool::pooled() {
  std::lock_guard<std::mutex> lock(freeMutex_);
  return free_.size();
}

void MsptiBufferPool::onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  if (maxNumRecords) *maxNumRecords = 0;  // ignored by MSPTI (mspti.md 5.1)
  if (!buffer || !size) return;
  instance().request(buffer, size);
}

void MsptiBufferPool::onComplete(uint8_t* buffer, size_t size, size_t validSize) {
  instance().complete(buffer, size, validSize);
}

void MsptiBufferPool::request(uint8_t** buffer, size_t* size) {
  requested_.fetch_add(1, std::memory_order_relaxed);
  *buffer = nullptr;
  *size = 0;
  const size_t want = bytes_.load(std::memory_order_relaxed);
  if (outstanding_.fetch_add(1, std::memory_order_acq_rel) >= cap_.load(std::memory_order_relaxed)) {
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    declined_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint8_t* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(freeMutex_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].second == want) {
        p = free_[i].first;
        free_[i] = free_.back();
        free_.pop_back();
        break;
      }
    }
  }
  if (!p) p = static_cast<uint8_t*>(std::aligned_alloc(8, want));
  if (!p) {
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    declined_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  *buffer = p;
  *size = want;
}

void MsptiBufferPool::recycle(uint8_t* buffer, size_t size) {
  {
    std::lock_guard<std::mutex> lock(freeMutex_);
    if (free_.size() < kMaxFree && size == bytes_.load(std::memory_order_relaxed)) {
      free_.emplace_back(buffer, size);
      buffer = nullptr;
    }
  }
  std::free(buffer);
}

void MsptiBufferPool::complete(uint8_t* buffer, size_t size, size_t validSize) {
  completed_.fetch_add(1, std::memory_order_relaxed);
  if (!buffer) {
    // After a declined request MSPTI hands back an empty slot (mspti.md 5.1).
    nullCompletions_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  try {
    thread_local MsptiRecordWalker walker;
    thread_local WalkResult batch;
    batch.clear();
    walker.walk(buffer, validSize <= size ? validSize : size, batch);
    if (auto sink = sink_.load()) {
      sink->append(batch);
    } else {
      StatsRegistry::instance().addOrphans(batch.records);
      batch.clear();
    }
  } catch (...) {
    // Out of memory while copying: the buffer's records are lost; nothing may escape into MSPTI.
  }
  outstanding_.fetch_sub(1, std::memory_order_acq_rel);
  recycle(buffer, size);
}

}  // namespace torch_mspti
