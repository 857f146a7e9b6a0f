// The simulated device timeline and device ids (mspti.md 4).
#include <cstdlib>
#include <thread>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class DeviceTimelineTest : public SimTest {
 protected:
  // Devices 0..5 only: another test may have left a long kernel on device 7 (one timeline per
  // process), and synchronize(-1) would wait for it.
  Records collect() {
    for (int32_t device = 0; device <= 5; ++device) {
      api_.synchronize(device);
    }
    EXPECT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
    return flushAndDecode();
  }
};

TEST_F(DeviceTimelineTest, KernelsOnOneStreamRunBackToBack) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  api_.launchKernel("a", nullptr, 0, 5, 30'000'000);
  api_.launchKernel("b", nullptr, 0, 5, 30'000'000);
  const uint64_t afterSecondLaunch = nowNs();
  const Records records = collect();
  ASSERT_EQ(records.kernels.size(), 2u);
  EXPECT_GE(records.kernels[1].start, records.kernels[0].end);
  // b was launched while a still had work queued (the usual case, unless the host stalled
  // for 30 ms): it starts exactly when a ends.
  const uint64_t latency = static_cast<uint64_t>(api_.getOption("launch_latency_ns"));
  if (afterSecondLaunch + latency < records.kernels[0].end) {
    EXPECT_EQ(records.kernels[1].start, records.kernels[0].end);
  }
  EXPECT_EQ(api_.streamTail(0, 5), records.kernels[1].end);
  EXPECT_EQ(api_.streamTail(0, 6), 0u);
}

TEST_F(DeviceTimelineTest, StreamsOverlap) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  api_.launchKernel("a", nullptr, 0, 0, 20'000'000);
  api_.launchKernel("b", nullptr, 0, 1, 20'000'000);
  const Records records = collect();
  ASSERT_EQ(records.kernels.size(), 2u);
  EXPECT_LT(records.kernels[1].start, records.kernels[0].end);
}

TEST_F(DeviceTimelineTest, KernelStartsNoEarlierThanTheLaunchLatency) {
  ASSERT_EQ(api_.setOption("launch_latency_ns", 4'000'000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  const uint64_t before = nowNs();
  api_.launchKernel("a", nullptr, 0, 0, 1000);
  const Records records = collect();
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_GE(records.kernels[0].start, before + 4'000'000);
}

TEST_F(DeviceTimelineTest, SynchronizeWaitsInRealTime) {
  api_.launchKernel("a", nullptr, 1, 0, 30'000'000);
  const uint64_t tail = api_.streamTail(1, 0);
  ASSERT_EQ(api_.synchronize(1), 0);
  EXPECT_GE(nowNs(), tail);
  // Another device's tail is not waited for.
  api_.launchKernel("b", nullptr, 2, 0, 200'000'000);
  const uint64_t t0 = nowNs();
  api_.synchronize(1);
  EXPECT_LT(nowNs() - t0, 100'000'000u);
  api_.synchronize(2);
  EXPECT_GE(nowNs(), api_.streamTail(2, 0));
}

TEST_F(DeviceTimelineTest, OneLaunchOfSeveralKernelsSharesOneId) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t id = api_.launchKernels("k", "KERNEL_MIX_AIC", 0, 2, 1'000'000, 4);
  const Records records = collect();
  ASSERT_EQ(records.kernels.size(), 4u);
  ASSERT_EQ(records.apis.size(), 1u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(records.kernels[i].correlationId, id);
    EXPECT_EQ(records.kernels[i].type, "KERNEL_MIX_AIC");
    if (i > 0) {
      EXPECT_EQ(records.kernels[i].start, records.kernels[i - 1].end);
    }
  }
  EXPECT_EQ(api_.stats().kernels_launched >= 4, true);
}

TEST_F(DeviceTimelineTest, KernelRecordsCarryThePhysicalDeviceId) {
  ::setenv("ASCEND_RT_VISIBLE_DEVICES", "2,3", 1);
  api_.reloadEnvironment();
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  api_.launchKernel("on0", nullptr, 0, 0, 1000);
  api_.launchKernel("on1", nullptr, 1, 0, 1000);
  api_.launchKernel("on5", nullptr, 5, 0, 1000);  // no such entry: left as is
  Records records = collect();
  ASSERT_EQ(records.kernels.size(), 3u);
  EXPECT_EQ(records.kernels[0].deviceId, 2u);
  EXPECT_EQ(records.kernels[1].deviceId, 3u);
  EXPECT_EQ(records.kernels[2].deviceId, 5u);
  EXPECT_GT(api_.streamTail(1, 0), 0u);  // the timeline is indexed by the logical device
  EXPECT_EQ(api_.streamTail(3, 0), 0u);

  ::unsetenv("ASCEND_RT_VISIBLE_DEVICES");
  api_.reloadEnvironment();
  collector_.reset();
  api_.launchKernel("on1", nullptr, 1, 0, 1000);
  records = collect();
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_EQ(records.kernels[0].deviceId, 1u);
}

}  // namespace
}  // namespace torch_mspti::sim::test
