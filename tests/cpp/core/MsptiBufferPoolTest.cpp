// MsptiBufferPool: the buffers it hands MSPTI are its own and come back to it; a buffer another
// tool requested and MSPTI completed into our callback is walked but never freed, recycled or
// counted against the cap; requests beyond the cap are declined and counted; completions with
// no collecting session are counted as orphans.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "MsptiBufferPool.h"
#include "RecordBuilder.h"

namespace torch_mspti::test {
namespace {

constexpr size_t kBytes = 64 << 10;

struct Pool {
  Pool(size_t cap = 8) {
    pool.configure(kBytes, cap);
    pool.setSink(store);
  }
  uint8_t* request() {
    uint8_t* b = nullptr;
    size_t size = 0;
    pool.request(&b, &size);
    EXPECT_EQ(size, b ? kBytes : 0u);
    return b;
  }
  // Completes `b` with `records` copied in.
  void complete(uint8_t* b, const RecordBuilder& records, size_t size = kBytes) {
    if (records.size() > 0) std::memcpy(b, records.data(), records.size());
    pool.complete(b, size, records.size());
  }
  std::shared_ptr<RecordStore> store = std::make_shared<RecordStore>(0);
  MsptiBufferPool pool;
};

RecordBuilder kernels(int n, uint64_t firstId = 1) {
  RecordBuilder b;
  for (int i = 0; i < n; ++i) b.kernel(100 + i, 200 + i, 0, 1, firstId + i, "k");
  return b;
}

TEST(MsptiBufferPool, OwnBuffersAreWalkedIntoTheSinkAndRecycled) {
  Pool p;
  uint8_t* a = p.request();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(p.pool.outstanding(), 1u);
  p.complete(a, kernels(3));
  EXPECT_EQ(p.pool.outstanding(), 0u);
  EXPECT_EQ(p.pool.pooled(), 1u);
  EXPECT_EQ(p.store->records(), 3u);
  uint8_t* again = p.request();
  EXPECT_EQ(again, a);  // reused, not allocated anew
  p.complete(again, RecordBuilder());
  const PoolCounters c = p.pool.counters();
  EXPECT_EQ(c.requested, 2u);
  EXPECT_EQ(c.completed, 2u);
  EXPECT_EQ(c.foreign, 0u);
  EXPECT_EQ(c.declined, 0u);
}

TEST(MsptiBufferPool, ForeignBufferIsWalkedNeverFreedNorRecycled) {
  Pool p(2);
  // A foreign buffer inside a larger block: freeing it (a pointer into the block) or writing past
  // its size would be caught (glibc/ASan on free, the canary below on writes).
  const RecordBuilder records = kernels(2, 50);
  const size_t size = records.size() + 64;
  std::vector<uint64_t> block((size + 128) / 8, 0);
  auto* foreign = reinterpret_cast<uint8_t*>(block.data()) + 64;
  std::memcpy(foreign, records.data(), records.size());
  std::memset(foreign + size, 0xC5, 64);
  for (int i = 0; i < 3; ++i) p.pool.complete(foreign, size, records.size());
  EXPECT_EQ(p.store->records(), 6u);  // its records are real: walked each time
  const PoolCounters c = p.pool.counters();
  EXPECT_EQ(c.foreign, 3u);
  EXPECT_EQ(c.completed, 3u);
  EXPECT_EQ(p.pool.outstanding(), 0u);  // no counter wrapped
  EXPECT_EQ(p.pool.pooled(), 0u);       // not kept for reuse
  for (int i = 0; i < 64; ++i) ASSERT_EQ(foreign[size + i], 0xC5) << "written past the foreign buffer";
  EXPECT_EQ(std::memcmp(foreign, records.data(), records.size()), 0);
  // The cap still counts only our buffers, and no request ever returns the foreign pointer.
  uint8_t* a = p.request();
  uint8_t* b = p.request();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, foreign);
  EXPECT_NE(b, foreign);
  EXPECT_EQ(p.pool.counters().declined, 0u);
  p.complete(a, RecordBuilder());
  p.complete(b, RecordBuilder());
}

TEST(MsptiBufferPool, ForeignBufferIsReadOnlyUpToItsOwnSize) {
  Pool p;
  const RecordBuilder records = kernels(2);
  auto copy = records.exactCopy(records.size());
  // MSPTI claims more valid bytes than the buffer holds: only `size` bytes may be read.
  p.pool.complete(copy.get(), records.size(), records.size() + 4096);
  EXPECT_EQ(p.store->records(), 2u);
  EXPECT_EQ(p.pool.counters().foreign, 1u);
}

TEST(MsptiBufferPool, OwnBufferIsReadOnlyUpToWhatWasAllocated) {
  Pool p;
  uint8_t* a = p.request();
  ASSERT_NE(a, nullptr);
  std::memset(a, 0, kBytes);
  const RecordBuilder records = kernels(1);
  std::memcpy(a, records.data(), records.size());
  p.pool.complete(a, 1u << 30, 1u << 30);  // sizes larger than the buffer: capped at kBytes
  EXPECT_EQ(p.store->records(), 1u);
  p.store->seal();
  EXPECT_EQ(p.store->abandonedBytes(), kBytes - records.size());  // the zeros after it: kind 0 stops
}

TEST(MsptiBufferPool, RequestsBeyondTheCapAreDeclinedAndCounted) {
  Pool p(2);
  uint8_t* a = p.request();
  uint8_t* b = p.request();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(p.request(), nullptr);
  EXPECT_EQ(p.request(), nullptr);
  EXPECT_EQ(p.pool.counters().declined, 2u);
  p.pool.complete(nullptr, 0, 0);  // MSPTI's empty slot after a decline
  EXPECT_EQ(p.pool.counters().nullCompletions, 1u);
  p.complete(a, RecordBuilder());
  uint8_t* c = p.request();  // room again
  EXPECT_NE(c, nullptr);
  p.complete(b, RecordBuilder());
  p.complete(c, RecordBuilder());
  EXPECT_EQ(p.pool.outstanding(), 0u);
  EXPECT_EQ(p.pool.counters().declined, 2u);
}

TEST(MsptiBufferPool, FreeListIsBoundedAndKeepsOnlyTheConfiguredSize) {
  Pool p(16);
  std::vector<uint8_t*> held;
  for (int i = 0; i < 8; ++i) held.push_back(p.request());
  for (uint8_t* b : held) p.complete(b, RecordBuilder());
  EXPECT_EQ(p.pool.pooled(), MsptiBufferPool::kMaxFree);
  p.pool.configure(2 * kBytes, 16);  // a new size: buffers of the old size are not handed out
  uint8_t* big = nullptr;
  size_t size = 0;
  p.pool.request(&big, &size);
  EXPECT_EQ(size, 2 * kBytes);
  EXPECT_EQ(p.pool.pooled(), MsptiBufferPool::kMaxFree);  // none of the smaller ones was handed out
  p.pool.complete(big, size, 0);
}

TEST(MsptiBufferPool, RecordsWithoutASinkAreOrphans) {
  Pool p;
  p.pool.setSink(nullptr);
  uint8_t* a = p.request();
  p.complete(a, kernels(4));
  EXPECT_EQ(p.pool.counters().orphanRecords, 4u);
  EXPECT_EQ(p.store->records(), 0u);
}

// An exception while recycling (out of memory growing the free list) must not unwind into
// MSPTI's C thread: complete() contains it, counts it, and the records already appended stay.
TEST(MsptiBufferPool, ExceptionWhileRecyclingIsContainedAndCounted) {
  Pool p;
  p.pool.setRecycleFaultForTest(true);
  uint8_t* a = p.request();
  ASSERT_NE(a, nullptr);
  RecordBuilder records = kernels(2);
  std::memcpy(a, records.data(), records.size());
  EXPECT_NO_THROW(p.pool.complete(a, kBytes, records.size()));
  EXPECT_EQ(p.pool.counters().failedCompletions, 1u);
  EXPECT_EQ(p.pool.outstanding(), 0u);
  EXPECT_EQ(p.pool.pooled(), 0u);  // freed, not kept
  EXPECT_EQ(p.store->records(), 2u);
  p.pool.setRecycleFaultForTest(false);
  p.complete(p.request(), kernels(1));
  EXPECT_EQ(p.pool.counters().failedCompletions, 1u);
  EXPECT_EQ(p.pool.pooled(), 1u);
}

TEST(MsptiBufferPool, TrampolinesReachTheBoundPoolOnly) {
  auto p = std::make_unique<Pool>();
  p->pool.bindCallbacks();
  uint8_t* b = reinterpret_cast<uint8_t*>(1);
  size_t size = 7, max = 9;
  MsptiBufferPool::onRequest(&b, &size, &max);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(size, kBytes);
  EXPECT_EQ(max, 0u);
  MsptiBufferPool::onComplete(b, size, 0);
  EXPECT_EQ(p->pool.counters().completed, 1u);
  p.reset();  // a destroyed pool is unbound: the trampolines decline and ignore
  MsptiBufferPool::onRequest(&b, &size, &max);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(size, 0u);
  MsptiBufferPool::onComplete(nullptr, 0, 0);
}

}  // namespace
}  // namespace torch_mspti::test
