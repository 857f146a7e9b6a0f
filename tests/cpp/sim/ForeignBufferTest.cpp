// msptiSimCompleteForeignBuffer: another tool's buffer completed into the registered callback
// (one callback pair per process, mspti.md 2.3). The buffer stays the simulator's.
#include <cstdlib>
#include <cstring>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class ForeignBufferTest : public SimTest {
 protected:
  // A process whose complete callback is `complete` dies completing a foreign buffer, printing
  // something that matches `message`.
  void expectCaught(msptiBuffersCallbackCompleteFunc complete, int onNewThread, const char* message) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
          api_.registerCallbacks(&BufferCollector::onRequest, complete);
          api_.completeForeignBuffer(1, onNewThread);
        },
        message);
  }
};

TEST_F(ForeignBufferTest, IsCompletedIntoTheRegisteredCallbackWithValidKernelRecords) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t launched = api_.launchKernel("mine", nullptr, 0, 41, 1000);
  const uint64_t before = api_.getCounter("foreign_buffers");
  ASSERT_EQ(api_.completeForeignBuffer(3, 1), 0);
  ASSERT_EQ(api_.completeForeignBuffer(2, 0), 0);
  EXPECT_EQ(api_.getCounter("foreign_buffers"), before + 2);
  std::vector<DeliveredBuffer> foreign;
  for (const DeliveredBuffer& b : collector_.delivered()) {
    if (b.foreign) foreign.push_back(b);
  }
  ASSERT_EQ(foreign.size(), 2u);
  EXPECT_NE(foreign[0].tid, currentTid());  // on a new thread
  EXPECT_EQ(foreign[1].tid, currentTid());  // on the caller's
  EXPECT_EQ(foreign[0].validSize, 3 * sizeof(msptiActivityKernel));
  EXPECT_GT(foreign[0].size, foreign[0].validSize);
  const Records records = decode(foreign);
  ASSERT_EQ(records.kernels.size(), 5u);
  for (const KernelView& k : records.kernels) {
    EXPECT_EQ(k.name, "ForeignKernel");
    EXPECT_EQ(k.type, "KERNEL_AICORE");
    EXPECT_GT(k.correlationId, launched);  // fresh ids from the shared counter
    EXPECT_LT(k.start, k.end);
  }
  // Its ids became no thread's current id.
  api_.runtimeCall("after", 0);
  const auto after = flushAndDecode().apisNamed("after");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].correlationId, launched);
}

void freeingComplete(uint8_t* buffer, size_t, size_t) { std::free(buffer); }
void scribblingComplete(uint8_t* buffer, size_t, size_t validSize) { std::memset(buffer + validSize, 0, 8); }

TEST_F(ForeignBufferTest, ACallbackThatFreesItIsCaught) {
  // glibc aborts on the double free; under ASan the canary check is a heap-use-after-free.
  expectCaught(&freeingComplete, 0, "");
}

TEST_F(ForeignBufferTest, ACallbackThatWritesIntoItIsCaught) {
  expectCaught(&scribblingComplete, 1, "wrote into a foreign buffer it does not own");
}

TEST(ForeignBufferWithoutCallbacks, AnswersMinusOne) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // A fresh process, in which nothing registered callbacks yet.
  EXPECT_EXIT(std::exit(SimApi::get().completeForeignBuffer(1, 0) == -1 ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace torch_mspti::sim::test
