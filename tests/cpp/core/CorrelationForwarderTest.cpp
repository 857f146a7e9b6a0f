// CorrelationForwarder against the simulator's process-global external-correlation stack
// (mspti.md 5.4): the plugin pops exactly what it pushed, and nothing else.
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>

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
}  // namespace torch_mspti::test
