// Repeated sessions: no thread growth, callbacks kept (mspti.md 5.6).
#include <thread>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class LifecycleTest : public SimTest {
 protected:
  void cycle() {
    msptiSubscriberHandle handle = nullptr;
    ASSERT_EQ(api_.subscribe(&handle, nullptr, nullptr), MSPTI_SUCCESS);
    for (auto kind :
         {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API}) {
      ASSERT_EQ(api_.enable(kind), MSPTI_SUCCESS);
    }
    ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1), MSPTI_SUCCESS);
    for (int i = 0; i < 8; ++i) {
      api_.launchKernel("k", nullptr, 0, static_cast<uint32_t>(i % 2), 1000);
    }
    uint64_t id = 0;
    ASSERT_EQ(api_.popExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id), MSPTI_SUCCESS);
    for (auto kind :
         {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API}) {
      ASSERT_EQ(api_.disable(kind), MSPTI_SUCCESS);
    }
    ASSERT_EQ(api_.unsubscribe(handle), MSPTI_SUCCESS);
    ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  }
};

TEST_F(LifecycleTest, AThousandSessionsDoNotGrowTheThreadCount) {
  collector_.setBufferSize(512);  // several full buffers per session: worker threads each time
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 0), 0);
  ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
  cycle();  // starts the lifelong threads (ActivityManager, driver reader)
  collector_.reset();
  collector_.setBufferSize(512);
  const size_t baseline = threadCount();
  const std::string baselineNames = threadNames();
  const auto before = api_.stats();
  for (int i = 0; i < 1000; ++i) {
    cycle();
    if (HasFatalFailure()) {
      return;
    }
  }
  // FlushAll joined every worker; the kernel may take a moment to drop an exited thread's
  // /proc entry, hence the short grace period.
  for (int i = 0; i < 100 && threadCount() > baseline; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LE(threadCount(), baseline) << "before: " << baselineNames << "\nafter: " << threadNames();
  const auto after = api_.stats();
  EXPECT_EQ(after.kernels_launched - before.kernels_launched, 8000u);
  EXPECT_GT(after.buffers_completed - before.buffers_completed, 1000u);
  EXPECT_EQ(after.records_pending, 0u);
  // Every record written was delivered: API + external + kernel records, minus the ones dropped.
  const Records records = decode(collector_.delivered());
  EXPECT_EQ(records.apis.size(), after.api_records - before.api_records);
  EXPECT_EQ(records.externals.size(), after.external_records - before.external_records);
  EXPECT_EQ(records.kernels.size(), after.kernel_records - before.kernel_records);
}

}  // namespace
}  // namespace torch_mspti::sim::test
