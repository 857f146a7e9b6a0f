// Buffers: packed layout, asynchronous kernel delivery, completion threads, declined requests,
// FlushAll and FlushPeriod (mspti.md 3, 5.1, 5.2, 5.3).
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

using std::chrono::milliseconds;

class BufferDeliveryTest : public SimTest {};

template <typename T>
T fieldAt(const std::vector<uint8_t>& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

TEST_F(BufferDeliveryTest, RecordsArePackedBackToBackWithTheRealLayout) {
  // Long enough for the launch to finish writing before the device reports, even under TSan.
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 100'000'000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42), MSPTI_SUCCESS);
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 7), MSPTI_SUCCESS);
  const uint64_t before = nowNs();
  const uint64_t id = api_.launchKernel("my_kernel", "KERNEL_AIVEC", 0, 3, 100'000);
  const uint64_t after = nowNs();
  ASSERT_GT(id, 0u);
  api_.synchronize(0);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);

  const auto buffers = collector_.delivered();
  ASSERT_EQ(buffers.size(), 1u);
  const std::vector<uint8_t>& b = buffers[0].bytes;
  ASSERT_EQ(buffers[0].validSize, 24u + 24u + 48u + 56u);
  // Through sizeof() strides first: the field checks below assume this order.
  ASSERT_EQ(decode(buffers).kinds, (std::vector<int>{8, 8, 12, 2}));
  // Offsets are sums of the previous sizeof()s; fields at the packed offsets of mspti.md 3.4.
  EXPECT_EQ(fieldAt<int32_t>(b, 0), MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  EXPECT_EQ(fieldAt<int32_t>(b, 4), MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(fieldAt<uint64_t>(b, 8), 42u);
  EXPECT_EQ(fieldAt<uint64_t>(b, 16), id);
  EXPECT_EQ(fieldAt<int32_t>(b, 24), MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  EXPECT_EQ(fieldAt<int32_t>(b, 28), MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
  EXPECT_EQ(fieldAt<uint64_t>(b, 32), 7u);
  EXPECT_EQ(fieldAt<uint64_t>(b, 40), id);
  const size_t apiAt = 48;
  EXPECT_EQ(fieldAt<int32_t>(b, apiAt), MSPTI_ACTIVITY_KIND_RUNTIME_API);
  const uint64_t apiStart = fieldAt<uint64_t>(b, apiAt + 4);
  const uint64_t apiEnd = fieldAt<uint64_t>(b, apiAt + 12);
  EXPECT_LE(before, apiStart);
  EXPECT_LE(apiStart, apiEnd);
  EXPECT_LE(apiEnd, after);
  EXPECT_EQ(fieldAt<uint32_t>(b, apiAt + 20), static_cast<uint32_t>(getpid()));
  EXPECT_EQ(fieldAt<uint32_t>(b, apiAt + 24), static_cast<uint32_t>(currentTid()));
  EXPECT_EQ(fieldAt<uint64_t>(b, apiAt + 28), id);
  EXPECT_STREQ(fieldAt<const char*>(b, apiAt + 36), "LaunchKernelV2");
  const size_t kernelAt = apiAt + 48;
  EXPECT_EQ(kernelAt % 8, 0u);
  EXPECT_EQ(fieldAt<int32_t>(b, kernelAt), MSPTI_ACTIVITY_KIND_KERNEL);
  const uint64_t start = fieldAt<uint64_t>(b, kernelAt + 4);
  const uint64_t end = fieldAt<uint64_t>(b, kernelAt + 12);
  EXPECT_GE(start, apiStart);
  EXPECT_EQ(end - start, 100'000u);
  EXPECT_EQ(end, api_.streamTail(0, 3));
  EXPECT_EQ(fieldAt<uint32_t>(b, kernelAt + 20), 0u);
  EXPECT_EQ(fieldAt<uint32_t>(b, kernelAt + 24), 3u);
  EXPECT_EQ(fieldAt<uint64_t>(b, kernelAt + 28), id);
  EXPECT_STREQ(fieldAt<const char*>(b, kernelAt + 36), "KERNEL_AIVEC");
  EXPECT_STREQ(fieldAt<const char*>(b, kernelAt + 44), "my_kernel");
}

TEST_F(BufferDeliveryTest, KernelRecordArrivesOnlyAfterTheDeliveryDelay) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 80'000'000), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  api_.launchKernel("k", nullptr, 0, 0, 1'000'000);
  const uint64_t end = api_.streamTail(0, 0);
  api_.synchronize(0);
  // The kernel has ended, but the driver has not reported it: FlushAll finds only the API record.
  Records records = flushAndDecode();
  EXPECT_EQ(records.apis.size(), 1u);
  EXPECT_TRUE(records.kernels.empty());
  EXPECT_EQ(api_.stats().records_pending, 1u);

  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  // No current buffer was left by FlushAll, so the reader thread asked for one when it wrote.
  const auto requests = collector_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[1].tid, currentTid());
  EXPECT_GE(requests[1].timeNs, end + 80'000'000);
  records = flushAndDecode();
  ASSERT_EQ(records.kernels.size(), 1u);
  EXPECT_EQ(records.kernels[0].end, end);
}

TEST_F(BufferDeliveryTest, FlushAllDeliversOnTheCallingThread) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_RUNTIME_API});
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  pid_t flusher = 0;
  std::thread([&] {
    flusher = currentTid();
    api_.flushAll(1);
  }).join();
  const auto buffers = collector_.delivered();
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(buffers[0].tid, flusher);
  EXPECT_EQ(decode(buffers).apis.size(), 1u);
}

TEST_F(BufferDeliveryTest, FullBuffersCompleteConcurrentlyOnNewThreads) {
  collector_.setBufferSize(1024);  // 80 % = 819 bytes: 18 API records of 48 bytes
  std::mutex mutex;
  std::condition_variable cv;
  int active = 0;
  int maxActive = 0;
  collector_.setCompletionHook([&](const DeliveredBuffer&) {
    std::unique_lock<std::mutex> lock(mutex);
    maxActive = std::max(maxActive, ++active);
    cv.notify_all();
    // Hold the first completion until a second one runs beside it (then let everyone through).
    cv.wait_for(lock, milliseconds(2000), [&] { return maxActive >= 2; });
    --active;
  });
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_RUNTIME_API});
  for (int i = 0; i < 19 * 4 + 1; ++i) {
    api_.launchKernel("k", nullptr, 0, 0, 1000);
  }
  ASSERT_TRUE(collector_.waitUntil([](const auto& d) { return d.size() >= 4; }, milliseconds(5000)));
  collector_.setCompletionHook(nullptr);
  const auto buffers = collector_.delivered();
  std::set<pid_t> threads;
  for (const auto& buffer : buffers) {
    EXPECT_NE(buffer.tid, currentTid());
    EXPECT_EQ(buffer.size, 1024u);
    EXPECT_EQ(buffer.validSize, 18u * 48u);
    threads.insert(buffer.tid);
  }
  EXPECT_GE(maxActive, 2);
  EXPECT_GE(threads.size(), 2u);
  ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  EXPECT_EQ(decode(collector_.delivered()).apis.size(), 19u * 4 + 1);
}

TEST_F(BufferDeliveryTest, DeclinedRequestLeadsToANullCompletion) {
  collector_.declineRequests(1);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const auto before = api_.stats();
  api_.launchKernel("lost", nullptr, 0, 0, 1000);  // declined: dropped
  api_.launchKernel("kept", nullptr, 0, 0, 1000);  // queues the empty buffer, asks again
  const auto after = api_.stats();
  EXPECT_EQ(after.buffers_declined - before.buffers_declined, 1u);
  EXPECT_EQ(after.buffers_requested - before.buffers_requested, 2u);
  EXPECT_EQ(after.records_dropped - before.records_dropped, 1u);
  ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  const auto buffers = collector_.delivered();
  ASSERT_EQ(buffers.size(), 2u);
  int nulls = 0;
  for (const auto& buffer : buffers) {
    if (buffer.isNull) {
      ++nulls;
      EXPECT_EQ(buffer.size, 0u);
      EXPECT_EQ(buffer.validSize, 0u);
    }
  }
  EXPECT_EQ(nulls, 1);
  EXPECT_EQ(decode(buffers).apis.size(), 1u);
}

TEST_F(BufferDeliveryTest, RecordThatDoesNotFitIsDropped) {
  collector_.setBufferSize(40);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1), MSPTI_SUCCESS);
  const auto before = api_.stats();
  api_.launchKernel("k", nullptr, 0, 0, 1000);  // ext (24) fits; API (48) does not
  api_.synchronize(0);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  // 24 of 40 bytes is below 80 %: the kernel record (56) meets the same buffer and is dropped.
  EXPECT_EQ(api_.stats().records_dropped - before.records_dropped, 2u);
  const Records records = flushAndDecode();
  EXPECT_EQ(records.kinds, (std::vector<int>{MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}));
}

TEST_F(BufferDeliveryTest, FlushPeriodDeliversOnlyFullBuffers) {
  collector_.setBufferSize(1024);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_RUNTIME_API});
  ASSERT_EQ(api_.flushPeriod(5), MSPTI_SUCCESS);
  for (int i = 0; i < 18; ++i) {
    api_.launchKernel("k", nullptr, 0, 0, 1000);  // 864 bytes: over 80 % but still current
  }
  std::this_thread::sleep_for(milliseconds(40));
  EXPECT_TRUE(collector_.delivered().empty());
  api_.launchKernel("k", nullptr, 0, 0, 1000);  // queues the full one
  ASSERT_TRUE(collector_.waitUntil([](const auto& d) { return d.size() == 1; }, milliseconds(2000)));
  std::this_thread::sleep_for(milliseconds(40));
  auto buffers = collector_.delivered();
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(buffers[0].validSize, 18u * 48u);
  ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  buffers = collector_.delivered();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[1].validSize, 48u);
}

TEST_F(BufferDeliveryTest, FlushAllHoldsTheBufferLockWhileDeliveringTheCurrentBuffer) {
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_RUNTIME_API});
  api_.launchKernel("k", nullptr, 0, 0, 1000);
  std::atomic<bool> launched{false};
  bool launchedDuringCallback = true;
  std::thread launcher;
  const pid_t self = currentTid();
  collector_.setCompletionHook([&](const DeliveredBuffer& buffer) {
    if (buffer.tid != self || launcher.joinable()) {
      return;
    }
    launcher = std::thread([&] {
      api_.launchKernel("blocked", nullptr, 0, 0, 1000);  // records: needs the buffer lock
      launched = true;
    });
    std::this_thread::sleep_for(milliseconds(100));
    launchedDuringCallback = launched.load();
  });
  ASSERT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  launcher.join();
  EXPECT_FALSE(launchedDuringCallback);
  EXPECT_TRUE(launched.load());
}

TEST_F(BufferDeliveryTest, FlushAllFromACompletionCallbackAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        subscribe();
        enable({MSPTI_ACTIVITY_KIND_RUNTIME_API});
        api_.launchKernel("k", nullptr, 0, 0, 1000);
        collector_.setCompletionHook([&](const DeliveredBuffer&) { api_.flushAll(1); });
        api_.flushAll(1);
      },
      "msptiActivityFlushAll called from a FlushAll completion callback");
}

}  // namespace
}  // namespace torch_mspti::sim::test
