// DrainPolicy::drain against a FakeMspti: how each order (disable_first, poll_first) ends —
// balanced once every awaited launch has its row, quiet when nothing more comes, at the bound
// with the launches still pending — which classes hold it, that no kind is disabled while a launch
// it answers is pending (MSPTI drops what its reader parses after the switch clears, mspti.md 2.3),
// what the last flush brings, and that failing calls are reported, never thrown.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "DrainPolicy.h"
#include "FakeMspti.h"
#include "FakeOps.h"
#include "MsptiBufferPool.h"
#include "StoreFill.h"

namespace torch_mspti::test {
namespace {

constexpr uint32_t bit(LaunchClass c) { return 1u << static_cast<int>(c); }
constexpr uint32_t kKernels =
    (1u << static_cast<int>(LaunchClass::kKernel)) | (1u << static_cast<int>(LaunchClass::kNone));

class DrainPolicyTest : public ::testing::Test {
 protected:
  void arm() {
    table = fake.functions();
    api = std::make_unique<MsptiActivityApi>(table);
    pool.configure(64 << 10, 16);
    pool.bindCallbacks();
    pool.setSink(store);
    ASSERT_EQ(api->subscribe(&subscriber), MSPTI_SUCCESS);
    ASSERT_EQ(api->registerCallbacks(&MsptiBufferPool::onRequest, &MsptiBufferPool::onComplete), MSPTI_SUCCESS);
    for (auto k : kinds) ASSERT_EQ(api->enable(k), MSPTI_SUCCESS);
  }
  DrainStats run(uint32_t waitFor = kKernels) {
    DrainInput in{api.get(), store.get(), kinds, config, waitFor};
    DrainStats d = drain(in, errors, disabledAt);
    store->seal();
    return d;
  }
  // Index of the first call named `name` in the fake's log (-1 when absent).
  int firstCall(const std::string& name) const {
    const auto calls = fake.calls();
    for (size_t i = 0; i < calls.size(); ++i)
      if (calls[i] == name) return static_cast<int>(i);
    return -1;
  }

  FakeMspti fake;
  MsptiFunctions table;
  std::unique_ptr<MsptiActivityApi> api;
  MsptiBufferPool pool;
  std::shared_ptr<RecordStore> store = std::make_shared<RecordStore>(0);
  msptiSubscriberHandle subscriber = nullptr;
  std::vector<msptiActivityKind> kinds = {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                          MSPTI_ACTIVITY_KIND_RUNTIME_API};
  ConfigSnapshot config = [] {
    ConfigSnapshot c = Config::defaults();
    c.drainPollIntervalMs = 1;
    c.drainTimeoutMs = 50;
    return c;
  }();
  std::vector<std::string> errors;
  int64_t disabledAt = 0;
};

TEST_F(DrainPolicyTest, DisableFirstEndsBalancedWhenEveryLaunchHasItsRow) {
  arm();
  for (int i = 0; i < 3; ++i) fake.launchKernel("k");
  const DrainStats d = run();
  EXPECT_EQ(d.order, "disable_first");
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(d.pendingLaunches, 0u);
  EXPECT_EQ(d.recordsDuringDrain, 6u);  // 3 API + 3 KERNEL
  EXPECT_EQ(d.lateRecords, 0u);
  EXPECT_TRUE(errors.empty());
  EXPECT_GT(disabledAt, 0);
  // A flush learns the launches before anything is disabled; KERNEL had launches, so no kind could
  // pull for it (COMMUNICATION is not collected here): it goes off after its rows, then a last
  // flush. The drain leaves Unsubscribe to the session (SubscriptionRelease).
  EXPECT_EQ(d.pulledBy, "");
  EXPECT_LT(firstCall("flushAll"), firstCall("disable(KERNEL)"));
  const auto calls = fake.calls();
  EXPECT_EQ(calls.back(), "flushAll");
  EXPECT_EQ(fake.count("unsubscribe"), 0u);
  EXPECT_TRUE(fake.subscribed());
}

// The pull: COMMUNICATION had no launch in the session, so its Disable (which flushes both driver
// channels) comes right after the first flush, and KERNEL, whose launch is pending, stays on until
// the flush that brought its row.
TEST_F(DrainPolicyTest, DisableFirstPullsWithAKindNoLaunchNeededAndKeepsTheAwaitedKindOn) {
  kinds.push_back(MSPTI_ACTIVITY_KIND_COMMUNICATION);
  arm();
  RecordBuilder launch, row;
  launch.api(1000, 2000, 1, 2, 7, "LaunchKernelV2");
  row.kernel(3000, 4000, 0, 1, 7, "k");
  fake.writeNow(launch);
  fake.putInFlightLater(row, 2);  // the reader parses it after the pulling Disable
  const DrainStats d = run();
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(d.pulledBy, "COMMUNICATION");
  EXPECT_EQ(store->recordsOfKind(MSPTI_ACTIVITY_KIND_KERNEL), 1u);
  const auto calls = fake.calls();
  const int pull = firstCall("disable(COMMUNICATION)");
  const int kernelOff = firstCall("disable(KERNEL)");
  ASSERT_GE(pull, 0);
  ASSERT_GE(kernelOff, 0);
  EXPECT_EQ(std::count(calls.begin(), calls.begin() + pull, std::string("flushAll")), 1);
  EXPECT_GE(std::count(calls.begin(), calls.begin() + kernelOff, std::string("flushAll")), 2);
}

// With kernels and collectives in one session neither pulling kind is safe: nothing is disabled
// before the rows came by MSPTI's own delivery.
TEST_F(DrainPolicyTest, WithLaunchesOfBothPullingKindsNothingIsDisabledBeforeTheirRows) {
  kinds.push_back(MSPTI_ACTIVITY_KIND_COMMUNICATION);
  arm();
  RecordBuilder calls, rows;
  calls.api(1000, 2000, 1, 2, 7, "LaunchKernelV2");
  calls.api(1000, 2000, 1, 2, 8, "HcclAllReduce");
  DeviceFields f;
  f.start = 3000;
  f.end = 4000;
  f.streamId = 6;
  f.correlationId = 8;
  rows.kernel(3000, 4000, 0, 1, 7, "k");
  rows.communication(f);
  fake.writeNow(calls);
  fake.putInFlightLater(rows, 4);
  const DrainStats d = run(kKernels | bit(LaunchClass::kCommunication));
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(d.pulledBy, "");
  const auto all = fake.calls();
  const int firstOff = std::min(firstCall("disable(COMMUNICATION)"), firstCall("disable(KERNEL)"));
  EXPECT_GE(std::count(all.begin(), all.begin() + firstOff, std::string("flushAll")), 4);
}

// Each Disable of a device kind flushes its channels (mspti.md 2.3): COMMUNICATION flushes both,
// so it goes first, then KERNEL and MARKER find them empty; host-record kinds come after, in the
// order they were enabled. Enabled here in another order.
TEST_F(DrainPolicyTest, CommunicationIsDisabledFirstThenKernelThenMarkerThenTheHostKinds) {
  kinds = {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_MARKER, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
           MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_RUNTIME_API};
  arm();
  fake.launchKernel("k");
  run();
  std::vector<std::string> disables;
  for (const std::string& call : fake.calls())
    if (call.rfind("disable(", 0) == 0) disables.push_back(call);
  const std::vector<std::string> expected = {"disable(COMMUNICATION)", "disable(KERNEL)", "disable(MARKER)",
                                             "disable(EXTERNAL_CORRELATION)", "disable(RUNTIME_API)"};
  EXPECT_EQ(disables, expected);
}

TEST_F(DrainPolicyTest, DisableFirstHoldsPendingLaunchesUntilTheBoundWithTheirKindOn) {
  arm();
  fake.flushDelivers = false;  // launches known, their kernels never come
  fake.launchKernel("lost");
  fake.deliverNow();  // the launch call's record arrived during the session
  const DrainStats d = run();
  EXPECT_EQ(d.exitReason, "timeout");
  EXPECT_TRUE(d.evidence.empty());
  EXPECT_EQ(d.pendingLaunches, 1u);
  EXPECT_GT(d.flushes, 3);
  // KERNEL stayed on to the bound, and went off once, at the end.
  EXPECT_EQ(fake.count("disable(KERNEL)"), 1u);
  EXPECT_EQ(fake.count("enable(KERNEL)"), 1u);
  EXPECT_EQ(fake.calls()[fake.calls().size() - 2].rfind("disable(", 0), 0u);
  EXPECT_FALSE(fake.enabled(MSPTI_ACTIVITY_KIND_KERNEL));
}

TEST_F(DrainPolicyTest, DisableFirstWaitsForRowsThatComeLaterThanDisable) {
  arm();
  RecordBuilder late;
  for (uint64_t id = 1; id <= 3; ++id) {
    RecordBuilder launch;
    launch.api(1000, 2000, 1, 2, id, "LaunchKernelV2");
    fake.writeNow(launch);
    late.kernel(3000, 4000, 0, 1, id, "late");
  }
  fake.deliverNow();
  fake.putInFlightLater(late, 5);  // they come with the fifth flush
  const DrainStats d = run();
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(d.pendingLaunches, 0u);
  EXPECT_EQ(store->recordsOfKind(MSPTI_ACTIVITY_KIND_KERNEL), 3u);
  const auto calls = fake.calls();
  EXPECT_GE(std::count(calls.begin(), calls.begin() + firstCall("disable(KERNEL)"), std::string("flushAll")), 5);
}

TEST_F(DrainPolicyTest, SiblingsThatComeAfterTheBalancingFlushAreKept) {
  // one launch, three kernels: the first satisfies the ledger, the siblings come one and two
  // flushes later
  fake.withIsEnabled = false;  // poll_first
  arm();
  RecordBuilder launch, first, second, third;
  launch.api(1000, 2000, 1, 2, 7, "LaunchKernelV2");
  first.kernel(3000, 4000, 0, 1, 7, "multi");
  second.kernel(4000, 5000, 0, 1, 7, "multi");
  third.kernel(5000, 6000, 0, 1, 7, "multi");
  fake.writeNow(launch);
  fake.deliverNow();
  fake.putInFlightLater(first, 3);
  fake.putInFlightLater(second, 4);
  fake.putInFlightLater(third, 5);
  const DrainStats d = run();
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(store->recordsOfKind(MSPTI_ACTIVITY_KIND_KERNEL), 3u);
  // all three before Disable (a library that pulls nothing may discard what comes after it)
  const auto calls = fake.calls();
  const int off = firstCall("disable(KERNEL)");
  ASSERT_GE(off, 0);
  EXPECT_GE(std::count(calls.begin(), calls.begin() + off, std::string("flushAll")), 5);
  EXPECT_EQ(d.lateRecords, 0u);
}

TEST_F(DrainPolicyTest, WithSynchronisedDevicesTheTailWaitsUntilEverySiblingIsDue) {
  // poll_first, devices synchronised: the first row came 30 ms after its kernel ended, so every
  // row is due 30 ms after the drain began; a sibling that comes after several empty flushes
  // (a launch of long kernels) is still waited for
  fake.withIsEnabled = false;
  config.drainTimeoutMs = 500;
  arm();
  const auto end = static_cast<uint64_t>(realtimeNs() - 30'000'000);
  RecordBuilder launch, first, sibling;
  launch.api(end - 2000, end - 1000, 1, 2, 7, "LaunchKernelV2");
  first.kernel(end - 1000, end, 0, 1, 7, "multi");
  sibling.kernel(end, end + 500, 0, 1, 7, "multi");
  fake.writeNow(launch);
  fake.deliverNow();
  fake.putInFlightLater(first, 2);
  fake.putInFlightLater(sibling, 9);  // after six empty flushes
  DrainInput in{api.get(), store.get(), kinds, config, kKernels};
  in.devicesSynchronized = true;
  const DrainStats d = drain(in, errors, disabledAt);
  store->seal();
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(store->recordsOfKind(MSPTI_ACTIVITY_KIND_KERNEL), 2u);
  EXPECT_EQ(d.lateRecords, 0u);
  const auto calls = fake.calls();
  const int off = firstCall("disable(KERNEL)");
  ASSERT_GE(off, 0);
  EXPECT_GE(std::count(calls.begin(), calls.begin() + off, std::string("flushAll")), 9);
}

TEST_F(DrainPolicyTest, AfterAPullOneMoreFlushTakesTheSiblings) {
  kinds.push_back(MSPTI_ACTIVITY_KIND_COMMUNICATION);
  arm();
  RecordBuilder launch, first, sibling;
  launch.api(1000, 2000, 1, 2, 7, "LaunchKernelV2");
  first.kernel(3000, 4000, 0, 1, 7, "multi");
  sibling.kernel(4000, 5000, 0, 1, 7, "multi");
  fake.writeNow(launch);
  fake.putInFlightLater(first, 2);  // parsed after COMMUNICATION's pulling Disable
  fake.putInFlightLater(sibling, 3);
  DrainInput in{api.get(), store.get(), kinds, config, kKernels};
  in.devicesSynchronized = true;  // every task had ended: the pull took all of their rows
  const DrainStats d = drain(in, errors, disabledAt);
  store->seal();
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(d.pulledBy, "COMMUNICATION");
  EXPECT_EQ(store->recordsOfKind(MSPTI_ACTIVITY_KIND_KERNEL), 2u);
  EXPECT_EQ(d.lateRecords, 0u);
  EXPECT_EQ(d.flushes, 4);  // learning, balancing, siblings, after the last Disables
}

TEST_F(DrainPolicyTest, APendingCopyKeepsItsKindEnabledUntilItsRowArrives) {
  // Disable does not pull copies (mspti.md 2.3): MEMCPY stays on while a copy is pending
  kinds.push_back(MSPTI_ACTIVITY_KIND_MEMCPY);
  arm();
  RecordBuilder call, row;
  call.api(1000, 2000, 1, 2, 9, "aclrtMemcpyAsync");
  DeviceFields f;
  f.start = 3000;
  f.end = 4000;
  f.streamId = 1;
  f.correlationId = 9;
  f.count = 64;
  row.copy(MSPTI_ACTIVITY_KIND_MEMCPY, f);
  fake.writeNow(call);
  fake.deliverNow();
  fake.putInFlightLater(row, 3);
  const DrainStats d = run(kKernels | bit(LaunchClass::kMemcpy));
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(store->recordsOfKind(MSPTI_ACTIVITY_KIND_MEMCPY), 1u);
  // MEMCPY only after the third flush, the one that brought the copy's row
  const auto calls = fake.calls();
  const int memcpyOff = firstCall("disable(MEMCPY)");
  ASSERT_GE(memcpyOff, 0);
  EXPECT_GE(std::count(calls.begin(), calls.begin() + memcpyOff, std::string("flushAll")), 3);
}

TEST_F(DrainPolicyTest, NoKernelFromALibraryThatNeedsThePreloadEndsTheDrainAtOnce) {
  fake.withIsEnabled = false;
  arm();
  fake.flushDelivers = false;
  fake.launchKernel("never");
  fake.deliverNow();
  DrainInput in{api.get(), store.get(), kinds, config, kKernels};
  in.kernelsNeedPreload = true;
  const DrainStats d = drain(in, errors, disabledAt);
  EXPECT_EQ(d.exitReason, "no_row_can_come");
  EXPECT_EQ(d.evidence, "kernels_need_preload");
  EXPECT_EQ(d.pendingLaunches, 1u);
  EXPECT_EQ(d.flushes, 2);  // the one that found no kernel, the one after the Disables
}

TEST_F(DrainPolicyTest, PollFirstWaitsForPendingLaunchesUntilTheBound) {
  fake.withIsEnabled = false;  // an older generation: auto resolves to poll_first
  arm();
  fake.flushDelivers = false;
  fake.launchKernel("lost");
  fake.deliverNow();
  const DrainStats d = run();
  EXPECT_EQ(d.order, "poll_first");
  EXPECT_EQ(d.exitReason, "timeout");
  EXPECT_EQ(d.pendingLaunches, 1u);
  EXPECT_GT(d.flushes, 3);
  // Disabled only after polling.
  EXPECT_GT(firstCall("disable(KERNEL)"), firstCall("flushAll"));
}

TEST_F(DrainPolicyTest, PollFirstWithoutKnownLaunchesEndsAfterTheQuietFlushes) {
  fake.withIsEnabled = false;
  arm();
  const DrainStats d = run();
  EXPECT_EQ(d.exitReason, "quiet");
  EXPECT_EQ(d.flushes, static_cast<int>(config.drainQuietFlushes) + 1);  // + the one after the Disables
}

TEST_F(DrainPolicyTest, OnlyTheAwaitedClassesHoldTheDrain) {
  arm();
  fake.flushDelivers = false;
  RecordBuilder copy;
  copy.api(1000, 2000, 1, 2, 50, "aclrtMemcpyAsync");  // a copy whose MEMCPY kind is not collected
  fake.writeNow(copy);
  fake.deliverNow();
  config.drainOrder = DrainOrder::kPollFirst;
  const DrainStats d = run(kKernels);
  EXPECT_EQ(d.exitReason, "balanced");
  EXPECT_EQ(d.pendingLaunches, 0u);
  EXPECT_EQ(store->pendingLaunches(bit(LaunchClass::kMemcpy)), 1u);
}

TEST_F(DrainPolicyTest, TheDrainLeavesUnsubscribeToTheSession) {
  fake.withIsEnabled = false;  // poll_first: nothing is disabled before the timeout
  arm();
  fake.launchKernel("late");
  fake.deliverNow();
  config.drainTimeoutMs = 20;
  fake.flushDelivers = false;  // the launch's row never comes during the polls
  const DrainStats d = run();
  EXPECT_EQ(d.exitReason, "timeout");
  EXPECT_EQ(fake.count("unsubscribe"), 0u);  // the drain never unsubscribes (SubscriptionRelease does)
  EXPECT_EQ(d.lateRecords, 0u);
  EXPECT_EQ(d.pendingLaunches, 1u);
}

TEST_F(DrainPolicyTest, FailingCallsAreReportedNotThrown) {
  arm();
  fake.flushResult = MSPTI_ERROR_INNER;
  fake.throwIn = FakeMspti::kDisable;
  DrainStats d;
  EXPECT_NO_THROW(d = run());
  bool flush = false, disable = false;
  for (const auto& e : errors) {
    flush |= e == "msptiActivityFlushAll(1) -> 999 MSPTI_ERROR_INNER";
    disable |= e == "msptiActivityDisable(KERNEL) -> -1 threw a C++ exception";
  }
  EXPECT_TRUE(flush && disable) << ::testing::PrintToString(errors);
  EXPECT_LE(errors.size(), 16u + 3u);  // flush errors are capped
}

TEST(DrainOrder, AutoFollowsTheLibraryGeneration) {
  EXPECT_EQ(resolveDrainOrder(DrainOrder::kAuto, true), DrainOrder::kDisableFirst);
  EXPECT_EQ(resolveDrainOrder(DrainOrder::kAuto, false), DrainOrder::kPollFirst);
  EXPECT_EQ(resolveDrainOrder(DrainOrder::kPollFirst, true), DrainOrder::kPollFirst);
  EXPECT_EQ(resolveDrainOrder(DrainOrder::kDisableFirst, false), DrainOrder::kDisableFirst);
}

}  // namespace
}  // namespace torch_mspti::test
