// Harsh clock modes: raw monotonic API times (api_clock), a device clock off and drifting from the
// host (device_clock_offset_ns / device_clock_drift_ppm), reported early starts
// (early_start_every / early_start_ns). mspti.md 4.
#include <ctime>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

uint64_t monotonicRawNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// Before main, so before the simulator (loaded by the first fixture) set its drift's t0.
const uint64_t kProgramStartNs = nowNs();

class ClockModesTest : public SimTest {};

TEST_F(ClockModesTest, ApiClockRawGivesApiRecordsMonotonicRawTimesAndNothingElse) {
  ASSERT_EQ(api_.setOption("api_clock", 1), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t rawBefore = monotonicRawNs();
  const uint64_t realBefore = nowNs();
  api_.launchKernel("k", nullptr, 0, 1, 1000);
  api_.runtimeCall("aclrtSynchronizeDevice", 0);
  const uint64_t rawAfter = monotonicRawNs();
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.apis.size(), 2u);
  for (const ApiView& a : records.apis) {
    EXPECT_GE(a.start, rawBefore) << a.name;
    EXPECT_LE(a.end, rawAfter) << a.name;
    EXPECT_LE(a.start, a.end) << a.name;
  }
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_GE(records.kernels[0].start, realBefore);  // device records keep epoch ns
  // Far apart: epoch ns against time since boot.
  EXPECT_GT(realBefore - rawAfter, 1'000'000'000'000'000ULL);
}

TEST_F(ClockModesTest, DeviceClockOffsetShiftsDeviceRecordsButNotTheTimeline) {
  ASSERT_EQ(api_.setOption("device_clock_offset_ns", 10'000'000'000), 0);  // 10 s ahead
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);       // only the pull delivers
  ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
  ASSERT_EQ(api_.setOption("copies_at_call_end", 0), 0);   // the copy as a device record
  ASSERT_EQ(api_.setOption("parse_after_pull_ns", 0), 0);  // the pull parsed before the switch clears
  setPreload(true);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_MEMCPY,
          MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t t0 = nowNs();
  api_.launchKernel("k", nullptr, 0, 21, 1'000'000);
  const uint64_t kernelEnd = api_.streamTail(0, 21);  // true time
  api_.launchCommunication("allreduce", "RING", "g", 4, 8, 0, 22, 1000, nullptr);
  api_.memcpy(MSPTI_ACTIVITY_MEMCPY_KIND_HTOD, 64, 0, 23, 1000, 1);
  api_.synchronize(0);  // waits for the true end, not for the reported one 10 s later
  EXPECT_LT(nowNs() - t0, 2'000'000'000u);
  // Disable's pull judges "ended" by true time, although the records report ends 10 s ahead.
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);
  ASSERT_EQ(api_.stats().records_pending, 1u);  // the copy: not on the SOC log channel
  const Records records = flushAndDecode();
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_EQ(records.kernels[0].end, kernelEnd + 10'000'000'000);
  EXPECT_EQ(records.kernels[0].end - records.kernels[0].start, 1'000'000u);
  ASSERT_EQ(records.communications.size(), 1u);
  EXPECT_EQ(records.communications[0].end, api_.streamTail(0, 22) + 10'000'000'000);
  ASSERT_EQ(records.apis.size(), 3u);
  for (const ApiView& a : records.apis) {
    EXPECT_LT(a.end, t0 + 2'000'000'000) << a.name;  // host times are not shifted
  }
}

TEST_F(ClockModesTest, NegativeOffsetAndDriftFollowTheFormula) {
  constexpr int64_t kOffset = -3'000'000;
  constexpr int64_t kPpm = 100'000;  // 10 %
  ASSERT_EQ(api_.setOption("device_clock_offset_ns", kOffset), 0);
  ASSERT_EQ(api_.setOption("device_clock_drift_ppm", kPpm), 0);
  EXPECT_EQ(api_.setOption("device_clock_drift_ppm", 100'001), -1);  // out of range
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  const uint64_t beforeLaunch = nowNs();
  api_.launchKernel("k", nullptr, 0, 24, 1000);
  const uint64_t trueEnd = api_.streamTail(0, 24);
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.kernels.size(), 1u);
  // reported = true + offset + ppm * (true - t0) / 1e6 with t0 in [program start, launch].
  const auto shift = static_cast<int64_t>(records.kernels[0].end - trueEnd);
  const int64_t lowest = kOffset + kPpm * static_cast<int64_t>(trueEnd - beforeLaunch) / 1'000'000;
  const int64_t highest = kOffset + kPpm * static_cast<int64_t>(trueEnd - kProgramStartNs) / 1'000'000;
  EXPECT_GE(shift, lowest);
  EXPECT_LE(shift, highest);
}

TEST_F(ClockModesTest, EveryNthTaskOnAStreamIsReportedStartingEarlyAndOverlapsThePreviousOne) {
  ASSERT_EQ(api_.setOption("early_start_every", 3), 0);
  ASSERT_EQ(api_.setOption("early_start_ns", 5000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  api_.launchKernels("k", nullptr, 0, 25, 20'000, 6);  // back to back: tasks 1..6 of stream 25
  api_.launchCommunication("allreduce", "RING", "g", 4, 8, 0, 25, 20'000, nullptr);
  api_.launchKernels("k", nullptr, 0, 25, 20'000, 2);  // tasks 8, 9
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.kernels.size(), 8u);
  ASSERT_EQ(records.communications.size(), 1u);
  const std::vector<KernelView>& k = records.kernels;
  for (size_t i : {size_t{2}, size_t{5}}) {  // tasks 3 and 6
    EXPECT_EQ(k[i].start, k[i - 1].end - 5000) << i;
    EXPECT_EQ(k[i].end - k[i].start, 25'000u) << i;
  }
  for (size_t i : {size_t{1}, size_t{3}, size_t{4}}) {
    EXPECT_EQ(k[i].start, k[i - 1].end) << i;
  }
  EXPECT_GE(records.communications[0].start, k[5].end);  // task 7: on time
  EXPECT_EQ(k[7].start, k[6].end - 5000);                // task 9
}

}  // namespace
}  // namespace torch_mspti::sim::test
