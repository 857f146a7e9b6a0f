// Activity buffers for MSPTI and the two callbacks MSPTI calls with them.
//
// MSPTI keeps one callback pair per process, for the life of the process (registered callbacks
// are never cleared, mspti.md 2.3, 5.6), and another tool may register its own pair in between:
// a buffer that tool requested can then be completed into ours. So the pool owns the buffers it
// hands out (ActivityBuffer) and, at completion, tells its own from foreign ones: its own are
// walked and recycled; a foreign one is walked (its records are real) but never recycled or
// freed, and counted.
//  * request: runs on a recording thread while MSPTI holds its buffer lock (mspti.md 5.1): hands
//    out an 8-aligned buffer (reused when possible) unless `cap` buffers are outstanding, in which
//    case it declines (NULL, 0) and counts it;
//  * complete: may run on several threads at once and inside FlushAll (mspti.md 5.2); tolerates
//    (NULL, 0, 0); walks the buffer to its end on the calling thread and hands the copies to the
//    sink (the collecting session's RecordStore), or counts them as orphans when none collects;
//    never throws into MSPTI (an exception while copying or recycling is caught and counted).
// The static trampolines MSPTI calls route to the pool made current by bindCallbacks().
// Thread-safety: everything here is thread-safe; request/complete take one leaf lock per buffer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "RecordStore.h"

namespace torch_mspti {

// One buffer the pool allocated (8-aligned, `size` bytes), freed when the object dies.
class ActivityBuffer {
 public:
  ActivityBuffer() = default;
  static ActivityBuffer allocate(size_t size);  // empty on allocation failure
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

struct PoolCounters {
  uint64_t requested = 0;
  uint64_t completed = 0;
  uint64_t declined = 0;
  uint64_t nullCompletions = 0;
  uint64_t foreign = 0;
  uint64_t orphanRecords = 0;      // records delivered while no sink collected
  uint64_t failedCompletions = 0;  // completions that threw (out of memory copying or recycling)
};

class MsptiBufferPool {
 public:
  MsptiBufferPool() = default;
  // Unbinds the trampolines from this pool if it is the bound one. Destroy a pool only once MSPTI
  // can no longer call back into it (the process's pool is never destroyed; tests' pools are).
  ~MsptiBufferPool();
  MsptiBufferPool(const MsptiBufferPool&) = delete;
  MsptiBufferPool& operator=(const MsptiBufferPool&) = delete;

  // Applies from the next request. bytes: multiple of 8; cap: buffers outstanding at once.
  void configure(size_t bytes, size_t cap);
  void setSink(std::shared_ptr<RecordStore> sink);
  PoolCounters counters() const;
  // Buffers handed to MSPTI and not yet completed (0 once every session has drained).
  size_t outstanding() const;
  // Buffers kept for reuse (at most kMaxFree).
  size_t pooled() const;

  // Makes this pool the one the trampolines below reach.
  void bindCallbacks();
  static void onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
  static void onComplete(uint8_t* buffer, size_t size, size_t validSize);

  void request(uint8_t** buffer, size_t* size);
  // Never throws: an exception while walking, appending or recycling is caught and counted in
  // failedCompletions (it would otherwise unwind into MSPTI's C thread and end in std::terminate).
  void complete(uint8_t* buffer, size_t size, size_t validSize) noexcept;

  // Test seam: makes recycling a completed buffer throw std::bad_alloc (as a full free list's
  // allocation could), to show that complete() contains it.
  void setRecycleFaultForTest(bool on) { recycleFault_.store(on, std::memory_order_relaxed); }

  // The fork guard holds the pool's lock, and those of the collecting session's store, across
  // fork() so the child finds them consistent.
  void lockForFork();
  void unlockAfterFork();

  static constexpr size_t kMaxFree = 4;  // buffers kept for reuse between sessions

 private:
  void recycle(ActivityBuffer buffer);

  std::atomic<size_t> bytes_{8u << 20};
  std::atomic<size_t> cap_{64};
  std::atomic<uint64_t> requested_{0}, completed_{0}, declined_{0}, nullCompletions_{0}, foreign_{0}, orphans_{0},
      failed_{0};
  std::atomic<bool> recycleFault_{false};
  std::atomic<std::shared_ptr<RecordStore>> sink_;
  mutable std::mutex mutex_;  // outstanding_ and free_
  std::unordered_map<const uint8_t*, ActivityBuffer> outstanding_;
  std::vector<ActivityBuffer> free_;
  std::shared_ptr<RecordStore> forkSink_;  // the sink locked by lockForFork()
};

}  // namespace torch_mspti
