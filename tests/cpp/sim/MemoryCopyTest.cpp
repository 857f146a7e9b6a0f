// msptiSimMemcpy / msptiSimMemset: copies and memsets through the interposed ACL memory API,
// which exists only with a process-start LD_PRELOAD of libmspti (mspti.md 3.4, 4, 5.5).
#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class MemoryCopyTest : public SimTest {};

TEST_F(MemoryCopyTest, AsDeviceRecordsCopiesProduceMemcpyRecordsWithTheirBytesKindIdsAndDeviceTimes) {
  ASSERT_EQ(api_.setOption("copies_at_call_end", 0), 0);
  setPreload(true);
  setenv("ASCEND_RT_VISIBLE_DEVICES", "6,7", 1);
  api_.reloadEnvironment();
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_MEMCPY, MSPTI_ACTIVITY_KIND_RUNTIME_API, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 77), MSPTI_SUCCESS);
  const auto before = api_.stats();
  const uint64_t memcpyRecords = api_.getCounter("memcpy_records");
  const uint64_t h2d = api_.memcpy(MSPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4096, 1, 3, 20'000, 1);
  const uint64_t d2h = api_.memcpy(MSPTI_ACTIVITY_MEMCPY_KIND_DTOH, 512, 1, 3, 3'000'000, 0);
  // A synchronous copy returns once it has ended on the timeline.
  EXPECT_GE(nowNs(), api_.streamTail(1, 3));
  ASSERT_NE(h2d, 0u);
  EXPECT_EQ(d2h, h2d + 1);
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.memcpys.size(), 2u);
  const MemoryView& a = records.memcpys[0];
  EXPECT_EQ(a.copyKindOrValue, static_cast<uint32_t>(MSPTI_ACTIVITY_MEMCPY_KIND_HTOD));
  EXPECT_EQ(a.bytes, 4096u);
  EXPECT_EQ(a.deviceId, 7u);  // physical
  EXPECT_EQ(a.streamId, 3u);
  EXPECT_EQ(a.correlationId, h2d);
  EXPECT_EQ(a.isAsync, 1u);
  EXPECT_EQ(a.end - a.start, 20'000u);
  const MemoryView& b = records.memcpys[1];
  EXPECT_EQ(b.copyKindOrValue, static_cast<uint32_t>(MSPTI_ACTIVITY_MEMCPY_KIND_DTOH));
  EXPECT_EQ(b.bytes, 512u);
  EXPECT_EQ(b.correlationId, d2h);
  EXPECT_EQ(b.isAsync, 0u);
  EXPECT_GE(b.start, a.end);  // same stream: one after the other
  // A copy is a DMA task, never a kernel.
  EXPECT_TRUE(records.kernels.empty());
  EXPECT_EQ(api_.stats().kernels_launched, before.kernels_launched);
  EXPECT_EQ(api_.getCounter("memcpy_records"), memcpyRecords + 2);
  const auto async = records.apisNamed("aclrtMemcpyAsync");
  const auto sync = records.apisNamed("aclrtMemcpy");
  ASSERT_EQ(async.size(), 1u);
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_EQ(async[0].correlationId, h2d);
  EXPECT_EQ(sync[0].correlationId, d2h);
  EXPECT_GE(sync[0].end, b.end);  // the synchronous call spans its copy
  ASSERT_EQ(records.externals.size(), 2u);
  EXPECT_EQ(records.externals[0].correlationId, h2d);
  EXPECT_EQ(records.externals[1].correlationId, d2h);
  EXPECT_EQ(records.externals[1].externalId, 77u);
}

TEST_F(MemoryCopyTest, ByDefaultTheCallWritesItsMemcpyRecordAsItReturnsWithTheHostSpan) {
  // mspti.md 5.7: the interposed ACL call writes the record itself, start/end = the host call.
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);  // no device record could arrive
  setPreload(true);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_MEMCPY, MSPTI_ACTIVITY_KIND_RUNTIME_API, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  ASSERT_EQ(api_.pushExternal(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 78), MSPTI_SUCCESS);
  const uint64_t memcpyRecords = api_.getCounter("memcpy_records");
  const uint64_t before = nowNs();
  const uint64_t h2d = api_.memcpy(MSPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4096, 0, 3, 50'000'000, 1);
  const uint64_t afterAsync = nowNs();
  const uint64_t d2h = api_.memcpy(MSPTI_ACTIVITY_MEMCPY_KIND_DTOH, 512, 0, 3, 3'000'000, 0);
  const uint64_t afterSync = nowNs();
  // Written at the end of each call, not `delivery delay` after the copy.
  EXPECT_EQ(api_.getCounter("memcpy_records"), memcpyRecords + 2);
  EXPECT_EQ(api_.stats().records_pending, 0u);
  const Records records = flushAndDecode();
  ASSERT_EQ(records.memcpys.size(), 2u);
  const MemoryView& a = records.memcpys[0];
  EXPECT_EQ(a.correlationId, h2d);
  EXPECT_EQ(a.bytes, 4096u);
  EXPECT_EQ(a.streamId, 3u);
  EXPECT_EQ(a.isAsync, 1u);
  // The async call's span: inside the call, far shorter than the 50 ms copy it enqueued.
  EXPECT_GE(a.start, before);
  EXPECT_LE(a.end, afterAsync);
  EXPECT_LT(a.end, api_.streamTail(0, 3) - 3'000'000);
  const MemoryView& b = records.memcpys[1];
  EXPECT_EQ(b.correlationId, d2h);
  EXPECT_EQ(b.isAsync, 0u);
  // The synchronous call waits for both copies of its stream: its span covers that wait.
  EXPECT_GE(b.start, a.end);
  EXPECT_GE(b.end, api_.streamTail(0, 3));
  EXPECT_LE(b.end, afterSync);
  // The API record of each call spans its copy record.
  const auto async = records.apisNamed("aclrtMemcpyAsync");
  const auto sync = records.apisNamed("aclrtMemcpy");
  ASSERT_EQ(async.size(), 1u);
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_LE(async[0].start, a.start);
  EXPECT_GE(async[0].end, a.end);
  EXPECT_LE(sync[0].start, b.start);
  EXPECT_GE(sync[0].end, b.end);
  ASSERT_EQ(records.externals.size(), 2u);
  EXPECT_EQ(records.externals[0].correlationId, h2d);
  EXPECT_EQ(records.externals[0].externalId, 78u);
}

TEST_F(MemoryCopyTest, WithoutThePreloadACopyRunsButMintsNothingAndItsApiRecordCarriesAStaleId) {
  // As on generations < 26.0, where Enable(MEMCPY) succeeds without the preload: the switch is on
  // (enabled while the environment said "preloaded"), the interposer is not.
  setPreload(true);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_MEMCPY, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  setPreload(false);
  const uint64_t kernel = api_.launchKernel("k", nullptr, 0, 4, 1000);
  const uint64_t tasks = api_.getCounter("device_tasks");
  EXPECT_EQ(api_.memcpy(MSPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4096, 0, 4, 1'000'000, 1), 0u);
  EXPECT_EQ(api_.getCounter("device_tasks"), tasks + 1);  // the copy still ran
  api_.launchKernel("next", nullptr, 0, 4, 1000);
  waitForDelivery();
  const Records records = flushAndDecode();
  EXPECT_TRUE(records.memcpys.empty());
  ASSERT_EQ(records.kernels.size(), 2u);
  EXPECT_GE(records.kernels[1].start, records.kernels[0].end + 1'000'000);  // behind the copy
  const auto copies = records.apisNamed("aclrtMemcpyAsync");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].correlationId, kernel);
}

TEST_F(MemoryCopyTest, On26xEnableOfMemcpyAndMemsetNeedsThePreload) {
  setPreload(false);
  EXPECT_EQ(api_.enable(MSPTI_ACTIVITY_KIND_MEMCPY), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
  EXPECT_EQ(api_.enable(MSPTI_ACTIVITY_KIND_MEMSET), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
}

TEST_F(MemoryCopyTest, MemsetRecordCarriesValueAndBytes) {
  setPreload(true);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_MEMSET, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t id = api_.memset(0xAB, 1 << 20, 0, 5, 10'000, 1);
  const uint64_t sync = api_.memset(0, 64, 0, 5, 10'000, 0);
  ASSERT_NE(id, 0u);
  waitForDelivery();
  const Records records = flushAndDecode();
  ASSERT_EQ(records.memsets.size(), 2u);
  EXPECT_EQ(records.memsets[0].copyKindOrValue, 0xABu);
  EXPECT_EQ(records.memsets[0].bytes, uint64_t{1} << 20);
  EXPECT_EQ(records.memsets[0].correlationId, id);
  EXPECT_EQ(records.memsets[0].isAsync, 1u);
  EXPECT_EQ(records.memsets[1].correlationId, sync);
  EXPECT_EQ(records.memsets[1].isAsync, 0u);
  EXPECT_EQ(records.apisNamed("aclrtMemsetAsync").size(), 1u);
  EXPECT_EQ(records.apisNamed("aclrtMemset").size(), 1u);
  EXPECT_TRUE(records.memcpys.empty());
}

TEST_F(MemoryCopyTest, AnInvalidCopyKindCopiesNothing) {
  setPreload(true);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_MEMCPY, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const uint64_t tasks = api_.getCounter("device_tasks");
  EXPECT_EQ(api_.memcpy(9, 64, 0, 14, 1000, 1), 0u);
  EXPECT_EQ(api_.getCounter("device_tasks"), tasks);
  EXPECT_EQ(api_.streamTail(0, 14), 0u);
  EXPECT_TRUE(flushAndDecode().apis.empty());
}

}  // namespace
}  // namespace torch_mspti::sim::test
