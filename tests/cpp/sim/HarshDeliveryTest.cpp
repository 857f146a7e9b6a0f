// Harsh delivery modes: records delivered after Unsubscribe into the next session
// (deliver_after_unsubscribe), no device records without a preload (kernels_need_preload), and
// runtime API records around every launch (api_records_per_launch). mspti.md 4, 5.5, 5.6.
#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class HarshDeliveryTest : public SimTest {};

TEST_F(HarshDeliveryTest, WithDeliverAfterUnsubscribeASessionsRecordsLandInTheNextOne) {
  ASSERT_EQ(api_.setOption("deliver_after_unsubscribe", 1), 0);
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 300'000'000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  const uint64_t oldKernel = api_.launchKernel("session1", nullptr, 0, 31, 1000);
  const uint64_t oldCollective = api_.launchCommunication("allreduce", "RING", "g", 4, 8, 0, 32, 1000, nullptr);
  const auto before = api_.stats();
  ASSERT_EQ(api_.unsubscribe(subscriber_), MSPTI_SUCCESS);
  subscriber_ = nullptr;
  EXPECT_EQ(api_.stats().records_pending, 2u);  // not discarded
  EXPECT_EQ(api_.stats().records_dropped, before.records_dropped);
  ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  EXPECT_TRUE(decode(collector_.delivered()).kernels.empty());
  collector_.reset();
  subscribe();  // the next session, KERNEL and COMMUNICATION still on
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  const uint64_t newKernel = api_.launchKernel("session2", nullptr, 0, 31, 1000);
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.kernels.size(), 2u);
  EXPECT_EQ(records.kernels[0].name, "session1");
  EXPECT_EQ(records.kernels[0].correlationId, oldKernel);
  EXPECT_EQ(records.kernels[1].correlationId, newKernel);
  ASSERT_EQ(records.communications.size(), 1u);
  EXPECT_EQ(records.communications[0].correlationId, oldCollective);
}

TEST_F(HarshDeliveryTest, WithKernelsNeedPreloadNoDeviceIsKnownWithoutThePreload) {
  ASSERT_EQ(api_.setOption("kernels_need_preload", 1), 0);
  setPreload(false);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_RUNTIME_API,
          MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 5), MSPTI_SUCCESS);
  const auto before = api_.stats();
  const uint64_t kernel = api_.launchKernels("k", nullptr, 0, 33, 1000, 2);
  const uint64_t collective = api_.launchCommunication("allreduce", "RING", "g", 4, 8, 0, 34, 1000, nullptr);
  EXPECT_NE(kernel, 0u);  // the host side still mints ids
  EXPECT_NE(collective, 0u);
  EXPECT_EQ(api_.stats().records_pending, 0u);
  EXPECT_EQ(api_.stats().records_dropped - before.records_dropped, 3u);
  Records records = flushAndDecode();
  EXPECT_TRUE(records.kernels.empty());
  EXPECT_TRUE(records.communications.empty());
  EXPECT_EQ(records.apis.size(), 2u);
  EXPECT_EQ(records.externals.size(), 2u);
  // With the preload (read at load; reloaded here) the device is known.
  setPreload(true);
  api_.launchKernel("preloaded", nullptr, 0, 33, 1000);
  waitForDelivery();
  records = flushAndDecode();
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_EQ(records.kernels[0].name, "preloaded");
}

TEST_F(HarshDeliveryTest, ApiRecordsPerLaunchSurroundEachLaunchWithTheIdsThreadStateGives) {
  ASSERT_EQ(api_.setOption("api_records_per_launch", 3), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  api_.runtimeCall("probe", 0);  // its record tells this thread's current id before the launches
  const uint64_t first = api_.launchKernel("a", nullptr, 0, 35, 1000);
  const uint64_t second = api_.launchKernel("b", nullptr, 0, 35, 1000);
  api_.launchCommunication("allreduce", "RING", "g", 4, 8, 0, 36, 1000, nullptr);  // kernels only
  const Records records = flushAndDecode();
  ASSERT_FALSE(records.apis.empty());
  const uint64_t prior = records.apis[0].correlationId;
  std::vector<std::pair<std::string, uint64_t>> got;
  for (const ApiView& a : records.apis) {
    got.emplace_back(a.name, a.correlationId);
  }
  const std::vector<std::pair<std::string, uint64_t>> expected = {
      {"probe", prior},          {"ContextGetCurrent", prior},   {"KernelArgsInit", prior},
      {"LaunchKernelV2", first}, {"CacheLastTaskOpInfo", first}, {"ContextGetCurrent", first},
      {"KernelArgsInit", first}, {"LaunchKernelV2", second},     {"CacheLastTaskOpInfo", second},
      {"HcclAllReduce", second},
  };
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace torch_mspti::sim::test
