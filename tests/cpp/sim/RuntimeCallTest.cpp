// msptiSimRuntimeCall: runtime API calls that launch nothing still report API records, carrying
// their thread's current correlation id (mspti.md 4).
#include <thread>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class RuntimeCallTest : public SimTest {};

TEST_F(RuntimeCallTest, ApiRecordsCarryTheThreadsCurrentIdAndMintNothing) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t first = api_.launchKernel("k", nullptr, 0, 1, 1000);
  const uint64_t t0 = nowNs();
  api_.runtimeCall("aclrtSynchronizeStream", 2'000'000);
  EXPECT_GE(nowNs() - t0, 2'000'000u);  // the call takes its host time
  api_.runtimeCall("aclrtMalloc", 0);
  uint64_t otherThread = 0;
  std::thread([&] {
    api_.runtimeCall("aclrtGetDevice", 0);  // a thread that never launched
    otherThread = static_cast<uint64_t>(currentTid());
  }).join();
  const uint64_t second = api_.launchKernel("k", nullptr, 0, 1, 1000);
  EXPECT_EQ(second, first + 1);  // the runtime calls minted nothing
  api_.runtimeCall("aclrtRecordEvent", 0);
  const Records records = flushAndDecode();
  const auto sync = records.apisNamed("aclrtSynchronizeStream");
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_EQ(sync[0].correlationId, first);
  EXPECT_GE(sync[0].end - sync[0].start, 2'000'000u);
  EXPECT_EQ(sync[0].threadId, static_cast<uint32_t>(currentTid()));
  EXPECT_EQ(sync[0].kind, MSPTI_ACTIVITY_KIND_RUNTIME_API);
  ASSERT_EQ(records.apisNamed("aclrtMalloc").size(), 1u);
  EXPECT_EQ(records.apisNamed("aclrtMalloc")[0].correlationId, first);
  const auto other = records.apisNamed("aclrtGetDevice");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].correlationId, 0u);
  EXPECT_EQ(other[0].threadId, static_cast<uint32_t>(otherThread));
  ASSERT_EQ(records.apisNamed("aclrtRecordEvent").size(), 1u);
  EXPECT_EQ(records.apisNamed("aclrtRecordEvent")[0].correlationId, second);
  // Two launches, four runtime calls: several API records share one correlation id.
  EXPECT_EQ(records.apisNamed("LaunchKernelV2").size(), 2u);
  EXPECT_EQ(records.apis.size(), 6u);
}

TEST_F(RuntimeCallTest, TheCurrentIdOutlivesTheSessionAndNothingIsWrittenOutsideOne) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_API});
  const uint64_t launched = api_.launchKernel("k", nullptr, 0, 1, 1000);
  ASSERT_EQ(api_.unsubscribe(subscriber_), MSPTI_SUCCESS);
  subscriber_ = nullptr;
  const uint64_t apiRecords = api_.stats().api_records;
  api_.runtimeCall("aclrtSynchronizeDevice", 0);  // not subscribed: no record
  EXPECT_EQ(api_.stats().api_records, apiRecords);
  ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  collector_.reset();
  ASSERT_EQ(api_.registerCallbacks(&BufferCollector::onRequest, &BufferCollector::onComplete), MSPTI_SUCCESS);
  subscribe();
  api_.runtimeCall("aclrtSynchronizeDevice", 0);
  const Records records = flushAndDecode();
  ASSERT_EQ(records.apis.size(), 1u);
  EXPECT_EQ(records.apis[0].kind, MSPTI_ACTIVITY_KIND_API);  // only API is on
  EXPECT_EQ(records.apis[0].correlationId, launched);        // from the earlier session
}

}  // namespace
}  // namespace torch_mspti::sim::test
