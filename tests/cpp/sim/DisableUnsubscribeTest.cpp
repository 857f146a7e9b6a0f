// The tail of a session: Disable's driver flush, records due after Disable, Unsubscribe stopping
// the device tasks (mspti.md 2.2, 2.3, 5.3).
#include "SimTestSupport.h"

#include <chrono>
#include <thread>
#include <utility>

namespace torch_mspti::sim::test {
namespace {

class DisableUnsubscribeTest : public SimTest {};

TEST_F(DisableUnsubscribeTest, DisablePullsRecordsOfEndedKernelsOnly) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);  // the driver never reports
  ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
  ASSERT_EQ(api_.setOption("driver_flush_ns", 30'000'000), 0);
  ASSERT_EQ(api_.setOption("parse_after_pull_ns", 0), 0);  // parsed before the switch clears
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  const uint64_t ended = api_.launchKernel("short", nullptr, 0, 0, 1'000'000);
  // On its own device, so that no later synchronize(0) in this process waits for it.
  api_.launchKernel("long", nullptr, 7, 1, 5'000'000'000);
  waitUntilEnded(0, 0);
  const auto before = api_.stats();
  const uint64_t t0 = nowNs();
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);
  EXPECT_GE(nowNs() - t0, 30'000'000u);  // the driver flush takes its time
  const auto after = api_.stats();
  EXPECT_EQ(after.kernel_records - before.kernel_records, 1u);
  EXPECT_EQ(after.records_pending, 1u);  // the running kernel is not waited for
  const Records records = flushAndDecode();
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_EQ(records.kernels[0].correlationId, ended);
  EXPECT_EQ(records.kernels[0].name, "short");
}

TEST_F(DisableUnsubscribeTest, DisableOfCommunicationAlsoFlushesTheSocLogChannel) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);
  ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  waitUntilEnded(0, 0);
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_COMMUNICATION), MSPTI_SUCCESS);
  // The reader parses the pulled record after the Disable returned; KERNEL is still on.
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  EXPECT_EQ(api_.stats().records_dropped, 0u);
  EXPECT_EQ(flushAndDecode().kernels.size(), 1u);
}

// The real reader parses what a Disable's flush pulled after the Disable has returned, and drops a
// record of a kind switched off by then, uncounted (mspti.md 2.3): the pulling Disable's own kind
// loses them, and so does a kind disabled right after another kind's pull.
TEST_F(DisableUnsubscribeTest, RecordsPulledByADisableAreParsedAfterItAndLostToAKindSwitchedOffByThen) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);
  ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
  ASSERT_EQ(api_.setOption("driver_flush_ns", 1'000'000), 0);
  ASSERT_EQ(api_.setOption("parse_after_pull_ns", 50'000'000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  api_.launchKernel("k0", nullptr, 0, 0, 1000);
  api_.launchKernel("k1", nullptr, 0, 0, 1000);
  waitUntilEnded(0, 0);
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_COMMUNICATION), MSPTI_SUCCESS);  // pulls both kernels
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);         // before they are parsed
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  EXPECT_EQ(api_.stats().records_dropped, 2u);
  EXPECT_EQ(flushAndDecode().kernels.size(), 0u);
}

// halProfDataFlush reports what it handed over, and returns at once when that is nothing (mspti.md
// 2.3): a Disable whose channels an earlier Disable emptied, or MARKER's (TS_FW, which holds no
// record in the simulator), costs no driver flush time; one that pulls records costs it once.
TEST_F(DisableUnsubscribeTest, OnlyAFlushThatHandsOverRecordsTakesTheDriversTime) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);
  ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
  ASSERT_EQ(api_.setOption("driver_flush_ns", 300'000'000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_MARKER});
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  waitUntilEnded(0, 0);
  uint64_t t0 = nowNs();
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_COMMUNICATION), MSPTI_SUCCESS);  // pulls the kernel
  EXPECT_GE(nowNs() - t0, 300'000'000u);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));  // parsed
  t0 = nowNs();
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);  // its channel is empty now
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_MARKER), MSPTI_SUCCESS);  // TS_FW holds nothing here
  EXPECT_LT(nowNs() - t0, 150'000'000u);
  EXPECT_EQ(flushAndDecode().kernels.size(), 1u);
}

TEST_F(DisableUnsubscribeTest, WithoutPullsRecordsDueAfterDisableAreDropped) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 150'000'000), 0);
  ASSERT_EQ(api_.setOption("disable_pulls", 0), 0);
  ASSERT_EQ(api_.setOption("driver_flush_ns", 500'000'000), 0);  // unused without pulls
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  api_.synchronize(0);
  const auto before = api_.stats();
  const uint64_t t0 = nowNs();
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);
  EXPECT_LT(nowNs() - t0, 100'000'000u);
  EXPECT_EQ(api_.stats().records_pending, 1u);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  const auto after = api_.stats();
  EXPECT_EQ(after.kernel_records, before.kernel_records);
  EXPECT_EQ(after.records_dropped - before.records_dropped, 1u);
  EXPECT_TRUE(flushAndDecode().kernels.empty());
}

TEST_F(DisableUnsubscribeTest, DropAfterDisableOffStillRecordsLateKernels) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 20'000'000), 0);
  ASSERT_EQ(api_.setOption("disable_pulls", 0), 0);
  ASSERT_EQ(api_.setOption("drop_after_disable", 0), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  EXPECT_EQ(flushAndDecode().kernels.size(), 1u);
}

TEST_F(DisableUnsubscribeTest, UnsubscribeDropsPendingRecordsAndDeliversNothing) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  api_.launchKernels("k", nullptr, 0, 0, 1000, 3);
  api_.synchronize(0);
  const auto before = api_.stats();
  ASSERT_EQ(before.records_pending, 3u);
  ASSERT_EQ(api_.unsubscribe(subscriber_), MSPTI_SUCCESS);
  subscriber_ = nullptr;
  const auto after = api_.stats();
  EXPECT_EQ(after.records_pending, 0u);
  EXPECT_EQ(after.records_dropped - before.records_dropped, 3u);
  EXPECT_EQ(after.buffers_completed, before.buffers_completed);
  EXPECT_TRUE(collector_.delivered().empty());
  // The callbacks stay registered: a new subscription records into the same collector, and
  // nothing launched under the old one reappears. Subscribe does not restart the device tasks:
  // until KERNEL is enabled again, launches get ids but no kernel records (mspti.md 5.6).
  subscribe();
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 1'000'000), 0);
  EXPECT_GT(api_.launchKernel("orphan", nullptr, 0, 0, 1000), 0u);
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  api_.launchKernel("fresh", nullptr, 0, 0, 1000);
  api_.synchronize(0);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  const Records records = flushAndDecode();
  EXPECT_EQ(records.apis.size(), 3u);
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_EQ(records.kernels[0].name, "fresh");
}

TEST_F(DisableUnsubscribeTest, EnablingBeforeSubscribingCollectsNoKernels) {
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  subscribe();
  const auto before = api_.stats();
  const uint64_t id = api_.launchKernel("k", nullptr, 0, 0, 1000);
  EXPECT_GT(id, 0u);  // the host side still mints ids and reports the API
  EXPECT_EQ(api_.stats().records_pending, 0u);
  EXPECT_EQ(api_.stats().records_dropped - before.records_dropped, 1u);
  Records records = flushAndDecode();
  EXPECT_EQ(records.apis.size(), 1u);
  EXPECT_TRUE(records.kernels.empty());
  // Lenient mode, for tests that do not care about the order.
  ASSERT_EQ(api_.setOption("require_enable_after_subscribe", 0), 0);
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  api_.synchronize(0);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  records = flushAndDecode();
  EXPECT_EQ(records.kernels.size(), 1u);
}

TEST_F(DisableUnsubscribeTest, DisableFromAFlushAllCompletionCallbackAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
        subscribe();
        enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
        api_.launchKernel("k", nullptr, 0, 0, 1000);
        collector_.setCompletionHook([&](const DeliveredBuffer&) { api_.disable(MSPTI_ACTIVITY_KIND_KERNEL); });
        api_.flushAll(1);
      },
      "msptiActivityDisable called from a FlushAll completion callback");
}

// unsubscribe_poll_ns: Unsubscribe joins a channel poller that waits out its poll (mspti.md 2.2),
// holding the subscriber lock: a Subscribe made meanwhile waits for it, then succeeds.
TEST_F(DisableUnsubscribeTest, UnsubscribeWaitsOutThePollersPollAndASubscribeMeanwhileWaitsForIt) {
  constexpr uint64_t kPollNs = 300'000'000;
  ASSERT_EQ(api_.setOption("unsubscribe_poll_ns", kPollNs), 0);
  const uint64_t beforeSubscribe = nowNs();
  subscribe();
  const msptiSubscriberHandle handle = std::exchange(subscriber_, nullptr);  // released here, not by TearDown
  std::thread unsubscriber([&] { EXPECT_EQ(api_.unsubscribe(handle), MSPTI_SUCCESS); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  msptiSubscriberHandle again = nullptr;
  ASSERT_EQ(api_.subscribe(&again, nullptr, nullptr), MSPTI_SUCCESS);
  const uint64_t subscribed = nowNs();
  unsubscriber.join();
  // The poll began at the first Subscribe and nothing was handed over, so the Unsubscribe's poll
  // ended no earlier than one period after it: a Subscribe that waited for the Unsubscribe (and
  // not one that returned 50 ms in) returns after that. (Comparing the two threads' return times
  // raced: both leave the lock at once.)
  EXPECT_GE(subscribed - beforeSubscribe, kPollNs);
  ASSERT_EQ(api_.unsubscribe(again), MSPTI_SUCCESS);
}

}  // namespace
}  // namespace torch_mspti::sim::test
