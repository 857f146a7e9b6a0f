// SubscriptionRelease against a FakeMspti: the Unsubscribe runs on another thread and is followed
// by one FlushAll, the next waitIdle() returns once it is done, and a failed Unsubscribe is kept
// for the next session to report (once).
#include <gtest/gtest.h>

#include <thread>

#include "FakeMspti.h"
#include "MsptiActivityApi.h"
#include "SubscriptionRelease.h"

namespace torch_mspti::test {
namespace {

class SubscriptionReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    table = fake.functions();
    ASSERT_EQ(MsptiActivityApi(table).subscribe(&handle), MSPTI_SUCCESS);
  }
  FakeMspti fake;
  MsptiFunctions table;
  msptiSubscriberHandle handle = nullptr;
};

TEST_F(SubscriptionReleaseTest, UnsubscribesAndFlushesOffTheCallersThread) {
  SubscriptionRelease release;
  release.begin(&table, handle);
  release.waitIdle();
  EXPECT_FALSE(fake.subscribed());
  const auto calls = fake.calls();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[calls.size() - 2], "unsubscribe");
  EXPECT_EQ(calls.back(), "flushAll");
  const SubscriptionRelease::Stats s = release.stats();
  EXPECT_EQ(s.releases, 1u);
  EXPECT_FALSE(s.inFlight);
  EXPECT_EQ(s.lastResult, 0);
  EXPECT_EQ(s.lastError, "");
  EXPECT_EQ(release.takeError(), "");
  // The subscriber is free again: the next Subscribe succeeds.
  msptiSubscriberHandle again = nullptr;
  EXPECT_EQ(MsptiActivityApi(table).subscribe(&again), MSPTI_SUCCESS);
}

TEST_F(SubscriptionReleaseTest, AFailedUnsubscribeIsToldToTheNextSessionOnce) {
  fake.unsubscribeResult = MSPTI_ERROR_INVALID_PARAMETER;
  SubscriptionRelease release;
  release.begin(&table, handle);
  release.waitIdle();
  EXPECT_EQ(release.stats().lastError, "msptiUnsubscribe(subscriber) -> 1 MSPTI_ERROR_INVALID_PARAMETER");
  EXPECT_EQ(release.takeError(), "msptiUnsubscribe(subscriber) -> 1 MSPTI_ERROR_INVALID_PARAMETER");
  EXPECT_EQ(release.takeError(), "");
  fake.releaseSubscriber();
}

TEST_F(SubscriptionReleaseTest, AThrowingUnsubscribeIsContained) {
  fake.throwIn = FakeMspti::kUnsubscribe;
  SubscriptionRelease release;
  release.begin(&table, handle);
  release.waitIdle();
  EXPECT_EQ(release.stats().lastResult, -1);
  EXPECT_NE(release.takeError().find("threw a C++ exception"), std::string::npos);
  fake.releaseSubscriber();
}

TEST_F(SubscriptionReleaseTest, BeginWaitsForTheReleaseInFlight) {
  SubscriptionRelease release;
  release.begin(&table, handle);
  msptiSubscriberHandle second = nullptr;
  release.waitIdle();
  ASSERT_EQ(MsptiActivityApi(table).subscribe(&second), MSPTI_SUCCESS);
  release.begin(&table, second);
  release.waitIdle();
  EXPECT_EQ(release.stats().releases, 2u);
  EXPECT_EQ(fake.count("unsubscribe"), 2u);
  EXPECT_FALSE(fake.subscribed());
}

}  // namespace
}  // namespace torch_mspti::test
