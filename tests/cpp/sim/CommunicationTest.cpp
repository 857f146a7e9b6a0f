// msptiSimLaunchCommunication: a collective as HCCL launches it (mspti.md 3.4, 4, 5.4).
#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

constexpr uint32_t kFp32 = 4;  // MSPTI_ACTIVITY_COMMUNICATION_FP32

class CommunicationTest : public SimTest {};

TEST_F(CommunicationTest, RecordCarriesTheCollectivesMetadataAndItsIdIsSharedWithApiAndExternal) {
  setenv("ASCEND_RT_VISIBLE_DEVICES", "4,5", 1);
  api_.reloadEnvironment();
  subscribe();
  enable(
      {MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_RUNTIME_API, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42), MSPTI_SUCCESS);
  const uint64_t recordsBefore = api_.getCounter("communication_records");
  const uint64_t before = nowNs();
  const uint64_t id =
      api_.launchCommunication("hcom_allReduce__360_0_1", "RING", "group_0", kFp32, 1024, 1, 9, 50'000, nullptr);
  const uint64_t after = nowNs();
  ASSERT_NE(id, 0u);
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.communications.size(), 1u);
  const CommunicationView& c = records.communications[0];
  EXPECT_EQ(c.name, "hcom_allReduce__360_0_1");
  EXPECT_EQ(c.algType, "RING");
  EXPECT_EQ(c.commName, "group_0");
  EXPECT_EQ(c.dataType, kFp32);
  EXPECT_EQ(c.count, 1024u);
  EXPECT_EQ(c.deviceId, 5u);  // physical id of logical device 1
  EXPECT_EQ(c.streamId, 9u);
  EXPECT_EQ(c.correlationId, id);
  EXPECT_EQ(c.end - c.start, 50'000u);
  EXPECT_GE(c.start, before);
  EXPECT_EQ(c.end, api_.streamTail(1, 9));
  ASSERT_EQ(records.externals.size(), 1u);
  EXPECT_EQ(records.externals[0].externalId, 42u);
  EXPECT_EQ(records.externals[0].correlationId, id);
  ASSERT_EQ(records.apis.size(), 1u);
  EXPECT_EQ(records.apis[0].name, "HcclAllReduce");  // derived from the op name
  EXPECT_EQ(records.apis[0].kind, MSPTI_ACTIVITY_KIND_RUNTIME_API);
  EXPECT_EQ(records.apis[0].correlationId, id);
  EXPECT_EQ(records.apis[0].threadId, static_cast<uint32_t>(currentTid()));
  EXPECT_GE(records.apis[0].start, before);
  EXPECT_LE(records.apis[0].end, after);
  EXPECT_TRUE(records.kernels.empty());
  EXPECT_EQ(api_.getCounter("communication_records"), recordsBefore + 1);
  EXPECT_EQ(api_.getCounter("no_such_counter"), UINT64_MAX);
}

TEST_F(CommunicationTest, ApiNameIsTheOneGivenOrDerivedFromTheOp) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  api_.launchCommunication("hcom_broadcast__1_0_1", "RING", "g", kFp32, 8, 0, 9, 1000, "HcclBroadcast");
  api_.launchCommunication("reduce_scatter", "RING", "g", kFp32, 8, 0, 9, 1000, nullptr);
  api_.launchCommunication("alltoall", "PAIRWISE", "g", kFp32, 8, 0, 9, 1000, nullptr);
  api_.launchCommunication("my_fused_collective", "RING", "g", kFp32, 8, 0, 9, 1000, nullptr);
  const Records records = flushAndDecode();
  ASSERT_EQ(records.apis.size(), 4u);
  EXPECT_EQ(records.apis[0].name, "HcclBroadcast");
  EXPECT_EQ(records.apis[1].name, "HcclReduceScatter");
  EXPECT_EQ(records.apis[2].name, "HcclAlltoAll");
  EXPECT_EQ(records.apis[3].name, "HcclMyFusedCollective");
}

TEST_F(CommunicationTest, IdsComeFromTheCounterKernelsUse) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  const uint64_t k1 = api_.launchKernel("k", nullptr, 0, 1, 1000);
  const uint64_t c = api_.launchCommunication("allreduce", "RING", "g", kFp32, 8, 0, 9, 1000, nullptr);
  const uint64_t k2 = api_.launchKernel("k", nullptr, 0, 1, 1000);
  EXPECT_EQ(c, k1 + 1);
  EXPECT_EQ(k2, c + 1);
}

TEST_F(CommunicationTest, WithoutTheKindItRunsButMintsNothingAndItsApiRecordCarriesTheStaleId) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t kernel = api_.launchKernel("k", nullptr, 0, 1, 1000);
  const uint64_t tasksBefore = api_.getCounter("device_tasks");
  EXPECT_EQ(api_.launchCommunication("allreduce", "RING", "g", kFp32, 8, 0, 9, 1000, nullptr), 0u);
  EXPECT_EQ(api_.getCounter("device_tasks"), tasksBefore + 1);  // it ran on the timeline
  EXPECT_GT(api_.streamTail(0, 9), 0u);
  waitForDelivery();
  const Records records = flushAndDecode();
  EXPECT_TRUE(records.communications.empty());
  const auto launches = records.apisNamed("HcclAllReduce");
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].correlationId, kernel);
}

TEST_F(CommunicationTest, SharesTheStreamTimelineWithKernels) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  api_.launchCommunication("allreduce", "RING", "g", kFp32, 8, 0, 6, 2'000'000, nullptr);
  api_.launchKernel("after", nullptr, 0, 6, 1000);
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.communications.size(), 1u);
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_GE(records.kernels[0].start, records.communications[0].end);
}

}  // namespace
}  // namespace torch_mspti::sim::test
