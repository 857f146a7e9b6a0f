// CorrelationForwarder against the simulator's process-global external-correlation stack
// (mspti.md 5.4): the plugin pops exactly what it pushed, and nothing else.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

#include "CoreSimSupport.h"
#include "CorrelationForwarder.h"

namespace torch_mspti::test {
namespace {

using Stack = CorrelationForwarder::Stack;
constexpr auto kCustom0 = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr auto kCustom1 = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;

// A thread that runs posted steps in order and keeps its thread_local state between them.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    run([this] { done_ = true; });
    thread_.join();
  }
  // Runs `fn` on the worker and waits for it.
  void run(std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    tasks_.push(std::move(fn));
    cv_.notify_all();
    cv_.wait(lock, [this] { return tasks_.empty() && !busy_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      cv_.wait(lock, [this] { return !tasks_.empty(); });
      auto fn = std::move(tasks_.front());
      tasks_.pop();
      busy_ = true;
      lock.unlock();
      fn();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::queue<std::function<void()>> tasks_;
  bool busy_ = false;
  bool done_ = false;
  std::thread thread_;
};

class CorrelationForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fns_ = loadSimulator();
    ASSERT_NE(fns_, nullptr);
    ASSERT_NE(fns_->pushExternalCorrelationId, nullptr);
    drainExternalStacks();
    ASSERT_FALSE(fwd_.armed());
    errors0_ = fwd_.errors();
    overflows0_ = fwd_.overflows();
    interleaved0_ = fwd_.interleaved();
  }
  void TearDown() override {
    fwd_.disarm();
    drainExternalStacks();
  }
  uint64_t depth() const { return simControl().stats().external_stack_depth; }
  uint64_t popDirect(msptiExternalCorrelationKind kind = kCustom0) const {
    uint64_t id = 0;
    EXPECT_EQ(fns_->popExternalCorrelationId(kind, &id), MSPTI_SUCCESS);
    return id;
  }

  CorrelationForwarder& fwd_ = CorrelationForwarder::instance();
  const MsptiFunctions* fns_ = nullptr;
  uint64_t errors0_ = 0, overflows0_ = 0, interleaved0_ = 0;
};

TEST_F(CorrelationForwarderTest, PushesBeforeArmAreNeverPoppedFromMspti) {
  fwd_.push(Stack::kOps, 1);  // a range opened before configure()
  EXPECT_EQ(depth(), 0u);
  fwd_.arm(fns_);
  ASSERT_TRUE(fwd_.armed());
  ASSERT_EQ(fns_->pushExternalCorrelationId(kCustom0, 4242), MSPTI_SUCCESS);  // someone else's entry
  fwd_.pop(Stack::kOps);  // closes the pre-arm range: must not touch MSPTI
  EXPECT_EQ(depth(), 1u);
  EXPECT_EQ(popDirect(), 4242u);
  EXPECT_EQ(fwd_.errors(), errors0_);
}

TEST_F(CorrelationForwarderTest, ArmedPushPopIsBalanced) {
  fwd_.arm(fns_);
  fwd_.push(Stack::kOps, 10);
  fwd_.push(Stack::kOps, 11);
  fwd_.push(Stack::kOps, 12);
  EXPECT_EQ(depth(), 3u);
  fwd_.pop(Stack::kOps);
  EXPECT_EQ(depth(), 2u);
  fwd_.pop(Stack::kOps);
  fwd_.pop(Stack::kOps);
  EXPECT_EQ(depth(), 0u);
  EXPECT_EQ(fwd_.errors(), errors0_);
  EXPECT_EQ(fwd_.interleaved(), interleaved0_);
  EXPECT_EQ(fwd_.disarm(), 0u);
}

TEST_F(CorrelationForwarderTest, ArmedPushForwardsTheIdAndUserRangesGoToCustom1) {
  fwd_.arm(fns_);
  fwd_.push(Stack::kOps, 77);
  fwd_.push(Stack::kUser, 88);
  EXPECT_EQ(depth(), 1u);  // CUSTOM0 only
  EXPECT_EQ(fwd_.disarm(), 2u);
  EXPECT_EQ(depth(), 0u);
  uint64_t id = 0;
  EXPECT_EQ(fns_->popExternalCorrelationId(kCustom1, &id), MSPTI_ERROR_QUEUE_EMPTY);
  fwd_.pop(Stack::kUser);
  fwd_.pop(Stack::kOps);

  fwd_.arm(fns_);
  fwd_.push(Stack::kUser, 99);
  EXPECT_EQ(popDirect(kCustom1), 99u);
  ASSERT_EQ(fns_->pushExternalCorrelationId(kCustom1, 99), MSPTI_SUCCESS);  // put it back
  fwd_.pop(Stack::kUser);
  EXPECT_EQ(fns_->popExternalCorrelationId(kCustom1, &id), MSPTI_ERROR_QUEUE_EMPTY);
}

TEST_F(CorrelationForwarderTest, DisarmPopsOutstandingAndLaterPopsAreIgnored) {
  fwd_.arm(fns_);
  fwd_.push(Stack::kOps, 1);
  fwd_.push(Stack::kOps, 2);
  Worker other;
  other.run([&] { fwd_.push(Stack::kOps, 3); });  // a range still open on another thread
  EXPECT_EQ(depth(), 3u);
  EXPECT_EQ(fwd_.disarm(), 3u);
  EXPECT_FALSE(fwd_.armed());
  EXPECT_EQ(depth(), 0u);
  // The ranges close after stop(): nothing may be popped, not even another tool's entry.
  ASSERT_EQ(fns_->pushExternalCorrelationId(kCustom0, 555), MSPTI_SUCCESS);
  fwd_.pop(Stack::kOps);
  fwd_.pop(Stack::kOps);
  other.run([&] { fwd_.pop(Stack::kOps); });
  EXPECT_EQ(depth(), 1u);
  // ... also when the next session has armed in between.
  fwd_.arm(fns_);
  fwd_.pop(Stack::kOps);  // an extra pop with nothing tracked on this thread
  EXPECT_EQ(depth(), 1u);
  EXPECT_EQ(popDirect(), 555u);
  EXPECT_EQ(fwd_.errors(), errors0_);
}

TEST_F(CorrelationForwarderTest, RangeOpenedInAnEarlierSessionIsNotPoppedInTheNext) {
  fwd_.arm(fns_);
  fwd_.push(Stack::kOps, 1);
  EXPECT_EQ(fwd_.disarm(), 1u);
  fwd_.arm(fns_);
  ASSERT_EQ(fns_->pushExternalCorrelationId(kCustom0, 600), MSPTI_SUCCESS);
  fwd_.pop(Stack::kOps);  // belongs to the first session
  EXPECT_EQ(depth(), 1u);
  EXPECT_EQ(popDirect(), 600u);
}

TEST_F(CorrelationForwarderTest, DepthOverflowIsCountedAndBalanced) {
  constexpr int kExtra = 5;
  fwd_.arm(fns_);
  for (int i = 0; i < CorrelationForwarder::kMaxDepth + kExtra; ++i) fwd_.push(Stack::kOps, 1000 + i);
  EXPECT_EQ(depth(), static_cast<uint64_t>(CorrelationForwarder::kMaxDepth));
  EXPECT_EQ(fwd_.overflows(), overflows0_ + kExtra);
  for (int i = 0; i < CorrelationForwarder::kMaxDepth + kExtra; ++i) fwd_.pop(Stack::kOps);
  EXPECT_EQ(depth(), 0u);
  EXPECT_EQ(fwd_.errors(), errors0_);
  EXPECT_EQ(fwd_.interleaved(), interleaved0_);  // the innermost pushes were the ones dropped
  EXPECT_EQ(fwd_.disarm(), 0u);
}

TEST_F(CorrelationForwarderTest, InterleavedThreadsAreCounted) {
  fwd_.arm(fns_);
  Worker a, b;
  a.run([&] { fwd_.push(Stack::kOps, 1); });
  b.run([&] { fwd_.push(Stack::kOps, 2); });
  a.run([&] { fwd_.pop(Stack::kOps); });  // pops B's 2 off the global stack
  EXPECT_EQ(fwd_.interleaved(), interleaved0_ + 1);
  b.run([&] { fwd_.pop(Stack::kOps); });  // pops A's 1
  EXPECT_EQ(fwd_.interleaved(), interleaved0_ + 2);
  EXPECT_EQ(depth(), 0u);
  EXPECT_EQ(fwd_.disarm(), 0u);
}

TEST_F(CorrelationForwarderTest, NestedRangesOnSeparateThreadsDoNotInterleave) {
  fwd_.arm(fns_);
  Worker a, b;
  a.run([&] {
    fwd_.push(Stack::kOps, 1);
    fwd_.pop(Stack::kOps);
  });
  b.run([&] {
    fwd_.push(Stack::kOps, 2);
    fwd_.push(Stack::kOps, 3);
    fwd_.pop(Stack::kOps);
    fwd_.pop(Stack::kOps);
  });
  EXPECT_EQ(fwd_.interleaved(), interleaved0_);
  EXPECT_EQ(depth(), 0u);
}

TEST_F(CorrelationForwarderTest, ArmWithoutPushPopFunctionsStaysDisarmed) {
  MsptiFunctions none;
  fwd_.arm(&none);
  EXPECT_FALSE(fwd_.armed());
  fwd_.arm(nullptr);
  EXPECT_FALSE(fwd_.armed());
  fwd_.push(Stack::kOps, 1);
  fwd_.pop(Stack::kOps);
  EXPECT_EQ(depth(), 0u);
}

TEST_F(CorrelationForwarderTest, ConcurrentBalancedRangesLeaveTheStackEmpty) {
  fwd_.arm(fns_);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        fwd_.push(Stack::kOps, t * 1000 + i);
        fwd_.push(Stack::kOps, t * 1000 + i + 1);
        fwd_.pop(Stack::kOps);
        fwd_.pop(Stack::kOps);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(depth(), 0u);
  EXPECT_EQ(fwd_.errors(), errors0_);
  EXPECT_EQ(fwd_.disarm(), 0u);
}

}  // namespace
// Interval mode (libraries without push/pop): nothing reaches MSPTI; every kOps pop records
// (op id, start, end) on its thread, lock-free, and stop() takes the arming's intervals.
TEST_F(CorrelationForwarderTest, IntervalModeRecordsNestedOpsPerThreadAndCallsNoMsptiFunction) {
  const uint32_t gen = fwd_.armIntervals();
  ASSERT_NE(gen, 0u);
  EXPECT_TRUE(fwd_.armed());
  fwd_.push(Stack::kOps, 1);
  fwd_.push(Stack::kOps, 2);
  fwd_.push(Stack::kUser, 99);  // user ranges are not linked: not recorded
  fwd_.pop(Stack::kUser);
  fwd_.pop(Stack::kOps);
  fwd_.pop(Stack::kOps);
  uint32_t otherTid = 0;
  {
    Worker other;
    other.run([&] {
      otherTid = static_cast<uint32_t>(::syscall(SYS_gettid));
      fwd_.push(Stack::kOps, 3);
      fwd_.pop(Stack::kOps);
    });
  }
  EXPECT_EQ(depth(), 0u);  // nothing was pushed to MSPTI
  fwd_.disarm();
  fwd_.push(Stack::kOps, 4);  // after disarm: not recorded
  fwd_.pop(Stack::kOps);
  auto intervals = fwd_.takeIntervals(gen);
  ASSERT_EQ(intervals.size(), 3u);
  std::map<uint64_t, OpInterval> byId;
  for (const auto& iv : intervals) byId[iv.opId] = iv;
  const auto me = static_cast<uint32_t>(::syscall(SYS_gettid));
  EXPECT_EQ(byId[1].threadId, me);
  EXPECT_EQ(byId[2].threadId, me);
  EXPECT_EQ(byId[3].threadId, otherTid);
  EXPECT_LE(byId[1].start, byId[2].start);
  EXPECT_LE(byId[2].end, byId[1].end);
  EXPECT_LE(byId[2].start, byId[2].end);
  EXPECT_EQ(fwd_.errors(), errors0_);

  // The next arming starts empty and reuses the thread's chunks.
  const uint64_t chunks = fwd_.intervalChunks();
  const uint32_t gen2 = fwd_.armIntervals();
  EXPECT_NE(gen2, gen);
  fwd_.push(Stack::kOps, 5);
  fwd_.pop(Stack::kOps);
  fwd_.disarm();
  auto second = fwd_.takeIntervals(gen2);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].opId, 5u);
  EXPECT_EQ(fwd_.intervalChunks(), chunks);
  for (const auto& iv : fwd_.takeIntervals(gen)) EXPECT_NE(iv.threadId, me);  // this thread's log was reused
}

// Chunks: one allocation per kIntervalChunkSize ops on a thread, reused by later sessions.
// Also prints the cost per op of interval mode and of disarmed push/pop (measurement for README).
TEST_F(CorrelationForwarderTest, IntervalModeAllocatesOneChunkPerChunkSizeOpsAndReusesThem) {
  constexpr int kOps = 100000;
  auto timeOps = [&](int n) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      fwd_.push(Stack::kOps, static_cast<uint64_t>(i) + 1);
      fwd_.pop(Stack::kOps);
    }
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  };
  const double disarmedNs = timeOps(kOps);
  const uint64_t chunks0 = fwd_.intervalChunks();
  uint32_t gen = fwd_.armIntervals();
  const double firstNs = timeOps(kOps);
  fwd_.disarm();
  EXPECT_EQ(fwd_.takeIntervals(gen).size(), static_cast<size_t>(kOps));
  const uint64_t allocated = fwd_.intervalChunks() - chunks0;
  const uint64_t needed =
      (kOps + CorrelationForwarder::kIntervalChunkSize - 1) / CorrelationForwarder::kIntervalChunkSize;
  EXPECT_LE(allocated, needed);  // <= : this thread's log may already exist from another test
  gen = fwd_.armIntervals();
  const double reusedNs = timeOps(kOps);
  fwd_.disarm();
  EXPECT_EQ(fwd_.takeIntervals(gen).size(), static_cast<size_t>(kOps));
  EXPECT_EQ(fwd_.intervalChunks() - chunks0, allocated);  // the second session allocated nothing
  std::printf(
      "[ interval ] disarmed push+pop %.1f ns; interval mode %.1f ns (first session, %llu chunk "
      "allocations of %u intervals), %.1f ns (chunks reused)\n",
      disarmedNs, firstNs, static_cast<unsigned long long>(allocated), CorrelationForwarder::kIntervalChunkSize,
      reusedNs);
}

}  // namespace torch_mspti::test
