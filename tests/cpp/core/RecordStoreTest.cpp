// RecordStore: batches appended from completion threads keep the ledger current; seal() ends
// collection so that records arriving later are counted, not kept; abandoned buffers and the
// devices seen are recorded.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "MsptiRecordWalker.h"
#include "RecordBuilder.h"
#include "RecordStore.h"
#include "StoreFill.h"

namespace torch_mspti::test {
namespace {

constexpr uint32_t kKernelBit = 1u << static_cast<int>(LaunchClass::kKernel);

TEST(RecordStore, AppendLeavesTheBatchEmpty) {
  RecordStore store(0);
  RecordBuilder b;
  b.kernel(1, 2, 0, 1, 1, "k").api(1, 2, 3, 4, 1, "LaunchKernelV2").external(layout::kCustom0, 1, 1);
  MsptiRecordWalker walker;
  WalkResult batch;
  walker.walk(b.data(), b.size(), &store.names(), batch);
  store.append(batch);
  EXPECT_TRUE(batch.devices.empty() && batch.apis.empty() && batch.externals.empty());
  EXPECT_EQ(batch.records, 0u);
  EXPECT_EQ(store.records(), 3u);
}

TEST(RecordStore, AppendedBatchesKeepTheLedgerCurrent) {
  RecordStore store(0);
  RecordBuilder launches;
  launches.external(layout::kCustom0, 7, 1).api(10, 20, 1, 2, 1, "LaunchKernelV2");
  launches.external(layout::kCustom0, 8, 2).api(30, 40, 1, 2, 2, "LaunchKernelV2");
  appendRecords(store, launches);
  EXPECT_TRUE(store.knowsLaunches());
  EXPECT_EQ(store.pendingLaunches(kKernelBit), 2u);
  RecordBuilder kernels;
  kernels.kernel(50, 60, 4, 1, 1, "a").kernel(70, 80, 6, 1, 2, "b");
  appendRecords(store, kernels);
  EXPECT_EQ(store.pendingLaunches(kKernelBit), 0u);
  EXPECT_EQ(store.records(), 6u);
  EXPECT_EQ(store.maxCorrelationId(), 2u);
  EXPECT_EQ(store.devicesSeen(), (std::vector<uint32_t>{4, 6}));
  store.seal();
  ASSERT_EQ(store.devices().size(), 2u);
  ASSERT_EQ(store.apis().size(), 2u);
  EXPECT_EQ(store.recordsByKind()[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION], 2u);  // kept in the ledger only
  EXPECT_EQ(store.recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL], 2u);
  EXPECT_EQ(store.recordsByKind()[MSPTI_ACTIVITY_KIND_RUNTIME_API], 2u);
  // The ledger's API indices point at the store's API records.
  const LaunchEntry* e = store.ledger().find(2);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(store.apis()[static_cast<size_t>(e->launchApi)].start, 30);
  EXPECT_EQ(e->opHint, 8u);
}

TEST(RecordStore, RecordsAfterSealAreCountedNotKept) {
  RecordStore store(0);
  RecordBuilder b;
  b.kernel(1, 2, 0, 1, 1, "kept");
  appendRecords(store, b);
  store.seal();
  RecordBuilder late;
  late.kernel(3, 4, 0, 1, 2, "late").kernel(5, 6, 0, 1, 3, "late").api(1, 2, 3, 4, 2, "LaunchKernelV2");
  appendRecords(store, late);
  EXPECT_EQ(store.afterCollection(), 3u);
  EXPECT_EQ(store.records(), 1u);
  ASSERT_EQ(store.devices().size(), 1u);
  EXPECT_EQ(*store.devices()[0].name, "kept");
  EXPECT_EQ(store.ledger().find(2), nullptr);
}

TEST(RecordStore, AbandonedBuffersAreCounted) {
  RecordStore store(0);
  RecordBuilder b;
  b.kernel(1, 2, 0, 1, 1, "k").raw(200, 40);
  appendRecords(store, b);
  appendRecords(store, b);
  store.seal();
  EXPECT_EQ(store.abandonedBuffers(), 2u);
  EXPECT_EQ(store.abandonedBytes(), 80u);
  EXPECT_EQ(store.devices().size(), 2u);
}

TEST(RecordStore, ConcurrentAppendsAndSealLoseNothingUncounted) {
  RecordStore store(0);
  constexpr int kThreads = 4, kBatches = 200;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kBatches; ++i) {
        RecordBuilder b;
        b.kernel(1, 2, static_cast<uint32_t>(t), 1, static_cast<uint64_t>(t * kBatches + i + 1), "k");
        appendRecords(store, b);
      }
    });
  }
  go = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  store.seal();
  for (auto& th : threads) th.join();
  EXPECT_EQ(store.devices().size() + store.afterCollection(), static_cast<size_t>(kThreads * kBatches));
  EXPECT_EQ(store.records(), store.devices().size());
}

// max_session_records: the store keeps what fits (device rows first, then launch calls, then
// hints), counts the rest, and a device record over the cap still ends its launch's wait.
TEST(RecordStore, CapKeepsRoomForTheKernelOfEachLaunchItKeeps) {
  RecordStore store(0, 5);
  RecordBuilder first;
  first.external(layout::kCustom0, 7, 1).api(10, 20, 1, 2, 1, "LaunchKernelV2");
  first.external(layout::kCustom0, 8, 2).api(30, 40, 1, 2, 2, "LaunchKernelV2");
  // Two launch calls (4 of 5 with their kernels' room), id 1's hint (5); id 2's hint does not fit.
  appendRecords(store, first);
  EXPECT_EQ(store.overCap(), 1u);
  EXPECT_EQ(store.pendingLaunches(kKernelBit), 2u);
  RecordBuilder second;
  second.kernel(50, 60, 0, 1, 1, "a").kernel(70, 80, 0, 1, 2, "b");
  second.external(layout::kCustom0, 9, 3).api(90, 95, 1, 2, 3, "LaunchKernelV2");
  appendRecords(store, second);  // both kernels had their room; launch 3 has none
  EXPECT_EQ(store.overCap(), 3u);
  EXPECT_EQ(store.pendingLaunches(kKernelBit), 0u);
  EXPECT_EQ(store.ledger().find(3), nullptr);
  RecordBuilder third;
  third.kernel(100, 110, 0, 1, 9, "c");  // a kernel whose launch the session never kept
  appendRecords(store, third);
  EXPECT_EQ(store.overCap(), 4u);
  EXPECT_EQ(store.ledger().size(), 2u);
  store.seal();
  ASSERT_EQ(store.devices().size(), 2u);
  EXPECT_EQ(store.devices()[0].correlationId, 1u);
  EXPECT_EQ(store.devices()[1].correlationId, 2u);
  EXPECT_EQ(store.apis().size(), 2u);
}

// MSPTI delivers a launch's API and external records long before its kernel (mspti.md 5.3), so
// with small buffers a session's host records fill buffer after buffer before the first kernel
// arrives: those buffers must not take the room of the kernels their launches announced.
TEST(RecordStore, HostRecordsArrivingFirstNeverCrowdOutTheKernelsOfKeptLaunches) {
  constexpr uint64_t kCap = 30, kLaunches = 20;
  RecordStore store(0, kCap);
  for (uint64_t id = 1; id <= kLaunches; ++id) {
    RecordBuilder host;
    host.external(layout::kCustom0, 100 + id, id).api(10 * id, 10 * id + 5, 1, 2, id, "LaunchKernelV2");
    appendRecords(store, host);
  }
  for (uint64_t id = 1; id <= kLaunches; ++id) {
    RecordBuilder device;
    device.kernel(1000 + 10 * id, 1005 + 10 * id, 0, 1, id, "k");
    appendRecords(store, device);
  }
  store.seal();
  // Whole launches up to the cap: ten calls, their hints and their kernels.
  ASSERT_EQ(store.apis().size(), kCap / 3);
  ASSERT_EQ(store.devices().size(), store.apis().size());
  for (size_t i = 0; i < store.devices().size(); ++i)
    EXPECT_EQ(store.devices()[i].correlationId, store.apis()[i].correlationId);
  EXPECT_EQ(store.overCap(), 3 * kLaunches - kCap);
  EXPECT_EQ(store.pendingLaunches(kKernelBit), 0u);
}

TEST(RecordStore, OneBatchOverTheCapKeepsNoKernelWithoutItsCall) {
  // The whole session in one buffer (a large buffer flushed at stop): kernels come in the same
  // batch as their calls and must not fill the cap ahead of them.
  constexpr uint64_t kCap = 30, kLaunches = 50;
  RecordStore store(0, kCap);
  RecordBuilder all;
  for (uint64_t id = 1; id <= kLaunches; ++id)
    all.external(layout::kCustom0, 100 + id, id).api(10 * id, 10 * id + 5, 1, 2, id, "LaunchKernelV2");
  for (uint64_t id = 1; id <= kLaunches; ++id) all.kernel(1000 + 10 * id, 1005 + 10 * id, 0, 1, id, "k");
  appendRecords(store, all);
  store.seal();
  // Calls and their kernels first (two records a launch); the hints find no room left.
  ASSERT_EQ(store.apis().size(), kCap / 2);
  ASSERT_EQ(store.devices().size(), store.apis().size());
  for (size_t i = 0; i < store.devices().size(); ++i)
    EXPECT_EQ(store.devices()[i].correlationId, store.apis()[i].correlationId);
  EXPECT_EQ(store.overCap(), 3 * kLaunches - kCap);
}

}  // namespace
}  // namespace torch_mspti::test
