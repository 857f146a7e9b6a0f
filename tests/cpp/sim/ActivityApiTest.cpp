// Entry-point contracts: callbacks, enable switches, LD_PRELOAD gating, the single subscriber,
// options (mspti.md 2.2, 2.3).
#include <cstdlib>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class ActivityApiTest : public SimTest {};

TEST_F(ActivityApiTest, RegisterCallbacksRejectsNullAndKeepsThePreviousPair) {
  EXPECT_EQ(api_.registerCallbacks(nullptr, &BufferCollector::onComplete), MSPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(api_.registerCallbacks(&BufferCollector::onRequest, nullptr), MSPTI_ERROR_INVALID_PARAMETER);
  // The earlier registration still works.
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  EXPECT_EQ(flushAndDecode().apis.size(), 1u);
}

TEST_F(ActivityApiTest, EnableAcceptsKindsOneToTwelveOnly) {
  ::setenv("LD_PRELOAD", "/opt/x/libmspti_sim.so", 1);
  api_.reloadEnvironment();
  for (int kind : {0, 13, 14, -1, 0x7fffffff}) {
    EXPECT_EQ(api_.enable(static_cast<msptiActivityKind>(kind)), MSPTI_ERROR_INVALID_PARAMETER) << kind;
    EXPECT_EQ(api_.disable(static_cast<msptiActivityKind>(kind)), MSPTI_ERROR_INVALID_PARAMETER) << kind;
    EXPECT_FALSE(api_.isEnabled(static_cast<msptiActivityKind>(kind))) << kind;
  }
  for (int kind = 1; kind <= 12; ++kind) {
    const auto k = static_cast<msptiActivityKind>(kind);
    EXPECT_EQ(api_.enable(k), MSPTI_SUCCESS) << kind;
    EXPECT_TRUE(api_.isEnabled(k)) << kind;
    EXPECT_EQ(api_.disable(k), MSPTI_SUCCESS) << kind;
    EXPECT_FALSE(api_.isEnabled(k)) << kind;
  }
  ::unsetenv("LD_PRELOAD");
  api_.reloadEnvironment();
}

TEST_F(ActivityApiTest, PreloadKindsNeedLibmsptiInLdPreload) {
  ::unsetenv("LD_PRELOAD");
  api_.reloadEnvironment();
  for (auto kind :
       {MSPTI_ACTIVITY_KIND_HCCL, MSPTI_ACTIVITY_KIND_MEMORY, MSPTI_ACTIVITY_KIND_MEMSET, MSPTI_ACTIVITY_KIND_MEMCPY}) {
    EXPECT_EQ(api_.enable(kind), MSPTI_ERROR_WITHOUT_LD_PRELOAD) << kind;
    EXPECT_FALSE(api_.isEnabled(kind));
  }
  EXPECT_EQ(api_.enable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);
  EXPECT_EQ(api_.enable(MSPTI_ACTIVITY_KIND_COMMUNICATION), MSPTI_SUCCESS);

  // The answer is cached: changing the variable alone changes nothing.
  ::setenv("LD_PRELOAD", "libfoo.so:/usr/local/Ascend/cann/lib64/libmspti.so", 1);
  EXPECT_EQ(api_.enable(MSPTI_ACTIVITY_KIND_MEMCPY), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
  api_.reloadEnvironment();
  EXPECT_EQ(api_.enable(MSPTI_ACTIVITY_KIND_MEMCPY), MSPTI_SUCCESS);
  ::unsetenv("LD_PRELOAD");
  api_.reloadEnvironment();
}

TEST_F(ActivityApiTest, OnlyOneSubscriberPerProcess) {
  EXPECT_EQ(api_.subscribe(nullptr, nullptr, nullptr), MSPTI_ERROR_INVALID_PARAMETER);
  // Nothing subscribed: unsubscribe succeeds whatever the handle.
  EXPECT_EQ(api_.unsubscribe(nullptr), MSPTI_SUCCESS);
  subscribe();
  ASSERT_NE(subscriber_, nullptr);
  msptiSubscriberHandle second = nullptr;
  EXPECT_EQ(api_.subscribe(&second, nullptr, nullptr), MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_EQ(api_.unsubscribe(reinterpret_cast<msptiSubscriberHandle>(0x1234)), MSPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(api_.unsubscribe(subscriber_), MSPTI_SUCCESS);
  EXPECT_EQ(api_.unsubscribe(subscriber_), MSPTI_SUCCESS);
  subscriber_ = nullptr;
  subscribe();  // possible again
}

TEST_F(ActivityApiTest, NothingIsRecordedWithoutASubscriber) {
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 5), MSPTI_SUCCESS);
  const auto before = api_.stats();
  EXPECT_EQ(api_.launchKernel("k", nullptr, 0, 0, 1000), 0u);
  api_.synchronize(0);
  EXPECT_EQ(api_.stats().kernels_launched, before.kernels_launched + 1);  // the kernel still ran
  EXPECT_EQ(api_.stats().records_pending, 0u);
  EXPECT_TRUE(flushAndDecode().kinds.empty());
}

TEST_F(ActivityApiTest, CorrelationIdsAreProcessWideAndOnlyMintedForKernelCollection) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_API});
  const uint64_t a = api_.launchKernel("a", nullptr, 0, 0, 1000);
  const uint64_t b = api_.launchKernels("b", nullptr, 0, 1, 1000, 3);
  EXPECT_GT(a, 0u);
  EXPECT_EQ(b, a + 1);
  // Not a KERNEL* task type: no id, no kernel record, but the launch API is still reported.
  EXPECT_EQ(api_.launchKernel("dma", "MEMCPY_ASYNC", 0, 0, 1000), 0u);
  ASSERT_EQ(api_.disable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);
  EXPECT_EQ(api_.launchKernel("c", nullptr, 0, 0, 1000), 0u);
  ASSERT_EQ(api_.enable(MSPTI_ACTIVITY_KIND_KERNEL), MSPTI_SUCCESS);
  const uint64_t d = api_.launchKernel("d", nullptr, 0, 0, 1000);
  EXPECT_EQ(d, b + 1);  // never reset, no gaps for unminted launches
  api_.synchronize(0);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  const Records records = flushAndDecode();
  ASSERT_EQ(records.apis.size(), 5u);
  // API records take the thread's current id: the stale one when nothing was minted.
  EXPECT_EQ(records.apis[0].correlationId, a);
  EXPECT_EQ(records.apis[1].correlationId, b);
  EXPECT_EQ(records.apis[2].correlationId, b);
  EXPECT_EQ(records.apis[3].correlationId, b);
  EXPECT_EQ(records.apis[4].correlationId, d);
  for (const ApiView& api : records.apis) {
    EXPECT_EQ(api.kind, MSPTI_ACTIVITY_KIND_API);  // RUNTIME_API is off: the older kind
  }
  // a, 3 x b and d; the MEMCPY_ASYNC task and c minted nothing and so have no record.
  EXPECT_EQ(records.kernels.size(), 5u);
}

TEST_F(ActivityApiTest, OptionsValidateKeysAndRanges) {
  EXPECT_EQ(api_.setOption("no_such_key", 1), -1);
  EXPECT_EQ(api_.setOption(nullptr, 1), -1);
  EXPECT_EQ(api_.getOption("no_such_key"), INT64_MIN);
  EXPECT_EQ(api_.setOption("disable_pulls", 2), -1);
  EXPECT_EQ(api_.setOption("buffer_threshold_pct", 0), -1);
  EXPECT_EQ(api_.setOption("delivery_delay_ns", -1), -1);
  EXPECT_EQ(api_.setOption("buffer_threshold_pct", 50), 0);
  EXPECT_EQ(api_.getOption("buffer_threshold_pct"), 50);
  api_.resetOptions();
  EXPECT_EQ(api_.getOption("delivery_delay_ns"), 200'000'000);
  EXPECT_EQ(api_.getOption("launch_latency_ns"), 5'000);
  EXPECT_EQ(api_.getOption("disable_pulls"), 1);
  EXPECT_EQ(api_.getOption("driver_flush_ns"), 20'000'000);
  EXPECT_EQ(api_.getOption("drop_after_disable"), 1);
  EXPECT_EQ(api_.getOption("per_thread_stacks"), 0);
  EXPECT_EQ(api_.getOption("buffer_threshold_pct"), 80);
}

}  // namespace
}  // namespace torch_mspti::sim::test
