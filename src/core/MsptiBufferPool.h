// Activity buffers for MSPTI and the two callbacks MSPTI calls with them.
//
// MSPTI keeps the registered callbacks for the life of the process (they are never cleared,
// mspti.md 2.3, 5.6), so the pool and its callbacks are process-wide and never destroyed; each
// session plugs its RecordStore in as the sink while it collects.
//  * request: runs on a recording thread while MSPTI holds its buffer lock (mspti.md 5.1): hands
//    out an 8-aligned buffer (reused when possible) unless the cap of outstanding buffers is
//    reached, in which case it declines (NULL, 0) and counts it.
//  * complete: may run on several threads at once and inside FlushAll (mspti.md 5.2); tolerates
//    (NULL, 0, 0); walks the buffer to its end on the calling thread, hands the copies to the
//    sink (or counts them as orphans when no session collects), then recycles the buffer.
// Thread-safety: everything here is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "RecordStore.h"

namespace torch_mspti {

struct PoolCounters {
  uint64_t requested = 0;
  uint64_t completed = 0;
  uint64_t declined = 0;
  uint64_t nullCompletions = 0;
};

class MsptiBufferPool {
 public:
  static MsptiBufferPool& instance();

  // Applies from the next request. bytes: multiple of 8; cap: outstanding buffers.
  void configure(size_t bytes, size_t cap);
  void setSink(std::shared_ptr<RecordStore> sink);
  PoolCounters counters() const;
  // Buffers handed to MSPTI and not yet completed (0 once every session has drained).
  size_t outstanding() const { return outstanding_.load(std::memory_order_relaxed); }
  // Buffers kept for reuse (at most a handful, see MsptiBufferPool.cpp).
  size_t pooled();

  static void onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
  static void onComplete(uint8_t* buffer, size_t size, size_t validSize);

 private:
  MsptiBufferPool() = default;
  void request(uint8_t** buffer, size_t* size);
  void complete(uint8_t* buffer, size_t size, size_t validSize);
  void recycle(uint8_t* buffer, size_t size);

  std::atomic<size_t> bytes_{8u << 20};
  std::atomic<size_t> cap_{64};
  std::atomic<size_t> outstanding_{0};
  std::atomic<uint64_t> requested_{0}, completed_{0}, declined_{0}, nullCompletions_{0};
  std::atomic<std::shared_ptr<RecordStore>> sink_;
  std::mutex freeMutex_;
  std::vector<std::pair<uint8_t*, size_t>> free_;
};

}  // namespace torch_mspti
