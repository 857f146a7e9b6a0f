// External-correlation stacks: process-global by default, pop quirks, one record per non-empty
// kind at launch (mspti.md 2.3, 5.4, 6 item 1).
#include <thread>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

constexpr auto kCustom0 = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr auto kCustom1 = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
constexpr auto kCustom2 = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

class ExternalCorrelationTest : public SimTest {};

TEST_F(ExternalCorrelationTest, PopWithNullLastIdFailsWithoutPopping) {
  EXPECT_EQ(api_.popExternal(kCustom0, nullptr), MSPTI_ERROR_INVALID_PARAMETER);  // empty too
  ASSERT_EQ(api_.pushExternal(kCustom0, 11), MSPTI_SUCCESS);
  EXPECT_EQ(api_.popExternal(kCustom0, nullptr), MSPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(api_.stats().external_stack_depth, 1u);
  uint64_t id = 0;
  EXPECT_EQ(api_.popExternal(kCustom0, &id), MSPTI_SUCCESS);
  EXPECT_EQ(id, 11u);
  EXPECT_EQ(api_.popExternal(kCustom0, &id), MSPTI_ERROR_QUEUE_EMPTY);
}

TEST_F(ExternalCorrelationTest, PushNeverValidatesTheKind) {
  EXPECT_EQ(api_.pushExternal(static_cast<msptiExternalCorrelationKind>(77), 5), MSPTI_SUCCESS);
  EXPECT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_INVALID, 6), MSPTI_SUCCESS);
  uint64_t id = 0;
  EXPECT_EQ(api_.popExternal(static_cast<msptiExternalCorrelationKind>(77), &id), MSPTI_SUCCESS);
  EXPECT_EQ(id, 5u);
  EXPECT_EQ(api_.popExternal(MSPTI_EXTERNAL_CORRELATION_KIND_INVALID, &id), MSPTI_SUCCESS);
  EXPECT_EQ(id, 6u);
}

TEST_F(ExternalCorrelationTest, StacksAreProcessGlobalByDefault) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  std::thread([&] { ASSERT_EQ(api_.pushExternal(kCustom0, 1001), MSPTI_SUCCESS); }).join();
  uint64_t id = 0;
  // Thread B launches and is tagged with thread A's top.
  std::thread([&] { id = api_.launchKernel("k", nullptr, 0, 0, 1000); }).join();
  uint64_t popped = 0;
  EXPECT_EQ(api_.popExternal(kCustom0, &popped), MSPTI_SUCCESS);  // main pops A's push
  EXPECT_EQ(popped, 1001u);
  const Records records = flushAndDecode();
  ASSERT_EQ(records.externals.size(), 1u);
  EXPECT_EQ(records.externals[0].externalKind, static_cast<uint32_t>(kCustom0));
  EXPECT_EQ(records.externals[0].externalId, 1001u);
  EXPECT_EQ(records.externals[0].correlationId, id);
}

TEST_F(ExternalCorrelationTest, PerThreadStacksOptionIsolatesThreads) {
  ASSERT_EQ(api_.setOption("per_thread_stacks", 1), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  uint64_t taggedId = 0;
  std::thread([&] {
    ASSERT_EQ(api_.pushExternal(kCustom0, 2002), MSPTI_SUCCESS);
    taggedId = api_.launchKernel("mine", nullptr, 0, 0, 1000);
    uint64_t popped = 0;
    EXPECT_EQ(api_.popExternal(kCustom0, &popped), MSPTI_SUCCESS);
    EXPECT_EQ(popped, 2002u);
  }).join();
  ASSERT_EQ(api_.pushExternal(kCustom0, 3003), MSPTI_SUCCESS);
  std::thread([&] {
    uint64_t popped = 0;
    EXPECT_EQ(api_.popExternal(kCustom0, &popped), MSPTI_ERROR_QUEUE_EMPTY);  // main's is not ours
    api_.launchKernel("untagged", nullptr, 0, 0, 1000);
  }).join();
  EXPECT_EQ(api_.stats().external_stack_depth, 0u);  // the global stack is unused
  uint64_t popped = 0;
  EXPECT_EQ(api_.popExternal(kCustom0, &popped), MSPTI_SUCCESS);
  EXPECT_EQ(popped, 3003u);
  const Records records = flushAndDecode();
  ASSERT_EQ(records.externals.size(), 1u);
  EXPECT_EQ(records.externals[0].externalId, 2002u);
  EXPECT_EQ(records.externals[0].correlationId, taggedId);
}

TEST_F(ExternalCorrelationTest, OneRecordPerNonEmptyKindCarryingItsTop) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 100'000'000), 0);  // launch done before the report
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  uint64_t scratch = 0;
  ASSERT_EQ(api_.pushExternal(kCustom0, 1), MSPTI_SUCCESS);
  ASSERT_EQ(api_.pushExternal(kCustom0, 2), MSPTI_SUCCESS);
  ASSERT_EQ(api_.pushExternal(kCustom2, 9), MSPTI_SUCCESS);
  ASSERT_EQ(api_.pushExternal(kCustom1, 5), MSPTI_SUCCESS);
  ASSERT_EQ(api_.popExternal(kCustom1, &scratch), MSPTI_SUCCESS);  // CUSTOM1 now empty
  const uint64_t id = api_.launchKernel("k", nullptr, 0, 0, 1000);
  api_.synchronize(0);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  const Records records = flushAndDecode();
  // Written at launch: external records first, then the API record, then the device's kernel.
  EXPECT_EQ(records.kinds, (std::vector<int>{8, 8, 12, 2}));
  ASSERT_EQ(records.externals.size(), 2u);
  EXPECT_EQ(records.externals[0].externalKind, static_cast<uint32_t>(kCustom0));
  EXPECT_EQ(records.externals[0].externalId, 2u);
  EXPECT_EQ(records.externals[1].externalKind, static_cast<uint32_t>(kCustom2));
  EXPECT_EQ(records.externals[1].externalId, 9u);
  for (const auto& e : records.externals) {
    EXPECT_EQ(e.correlationId, id);
  }
}

TEST_F(ExternalCorrelationTest, NoRecordsUnlessTheKindIsEnabled) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL});
  ASSERT_EQ(api_.pushExternal(kCustom0, 1), MSPTI_SUCCESS);
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  EXPECT_TRUE(flushAndDecode().externals.empty());
}

}  // namespace
}  // namespace torch_mspti::sim::test
