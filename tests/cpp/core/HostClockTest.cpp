// HostClock::decide: API records on the realtime clock, on CLOCK_MONOTONIC_RAW (converted with
// the offset measured at start), on neither (untrusted), and the nine-in-ten rule that keeps a
// stray record from deciding.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "HostClock.h"

namespace torch_mspti::test {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
// A session of 10 s: realtime around 2026, monotonic raw around 5 days of uptime.
const ClockSample kStart{1'780'000'000 * kSecond, 432'000 * kSecond};
const ClockSample kStop{kStart.realtime + 10 * kSecond, kStart.monotonicRaw + 10 * kSecond + 1000};

ApiRecords apisAt(std::vector<int64_t> starts) {
  ApiRecords out;
  for (int64_t s : starts) {
    ApiRecord a;
    a.start = s;
    a.end = s + 100;
    out.push_back(a);
  }
  return out;
}

TEST(HostClock, RealtimeRecords) {
  const HostClock c = HostClock::decide(apisAt({kStart.realtime + kSecond, kStop.realtime - 1}), kStart, kStop);
  EXPECT_EQ(c.kind(), HostClock::Kind::kRealtime);
  EXPECT_TRUE(c.trusted());
  EXPECT_EQ(c.toRealtime(kStart.realtime + 5), kStart.realtime + 5);
  EXPECT_STREQ(c.name(), "realtime");
  // A launch a little before start() (a call in progress) still counts as realtime.
  EXPECT_EQ(HostClock::decide(apisAt({kStart.realtime - kSecond}), kStart, kStop).kind(), HostClock::Kind::kRealtime);
}

TEST(HostClock, MonotonicRawRecordsAreConvertedWithTheStartOffset) {
  const int64_t t = kStart.monotonicRaw + 3 * kSecond;
  const HostClock c = HostClock::decide(apisAt({t, t + kSecond}), kStart, kStop);
  EXPECT_EQ(c.kind(), HostClock::Kind::kMonotonicRaw);
  EXPECT_TRUE(c.trusted());
  EXPECT_EQ(c.offsetNs(), kStart.realtime - kStart.monotonicRaw);
  EXPECT_EQ(c.toRealtime(t), kStart.realtime + 3 * kSecond);
  EXPECT_EQ(c.driftNs(), -1000);  // monotonic raw ran 1 us faster over the session
  EXPECT_STREQ(c.name(), "monotonic_raw");
}

TEST(HostClock, RecordsOnNeitherClockAreUntrusted) {
  const HostClock c = HostClock::decide(apisAt({12345, 67890}), kStart, kStop);
  EXPECT_EQ(c.kind(), HostClock::Kind::kUntrusted);
  EXPECT_FALSE(c.trusted());
  EXPECT_STREQ(c.name(), "untrusted");
  const HostClock none = HostClock::decide(ApiRecords{}, kStart, kStop);
  EXPECT_EQ(none.kind(), HostClock::Kind::kNoRecords);
  EXPECT_FALSE(none.trusted());
  EXPECT_STREQ(none.name(), "no_records");
}

TEST(HostClock, NineInTenRecordsDecide) {
  std::vector<int64_t> starts(9, kStart.realtime + kSecond);
  starts.push_back(42);  // one stray value
  EXPECT_EQ(HostClock::decide(apisAt(starts), kStart, kStop).kind(), HostClock::Kind::kRealtime);
  starts[0] = 43;  // two in ten: no longer decided
  EXPECT_EQ(HostClock::decide(apisAt(starts), kStart, kStop).kind(), HostClock::Kind::kUntrusted);
  // Half on each clock: neither.
  EXPECT_EQ(HostClock::decide(apisAt({kStart.realtime, kStart.monotonicRaw}), kStart, kStop).kind(),
            HostClock::Kind::kUntrusted);
}

TEST(HostClock, SampleReadsTheRealtimeClock) {
  const int64_t before =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const ClockSample s = ClockSample::now();
  EXPECT_GE(s.realtime, before);
  EXPECT_GT(s.monotonicRaw, 0);
  EXPECT_EQ(HostClock::realtime().kind(), HostClock::Kind::kRealtime);
}

}  // namespace
}  // namespace torch_mspti::test
