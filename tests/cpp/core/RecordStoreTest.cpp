// RecordStore: batches appended from completion threads keep the ledger current; seal() ends
// collection so that records arriving later are counted, not kept; abandoned buffers and the
// devices seen are recorded.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "MsptiRecordWalker.h"
#include "RecordBuilder.h"
#include "RecordStore.h"
#include "StoreFill.h"

namespace torch_mspti::test {
namespace {

constexpr uint32_t kKernelBit = 1u << static_cast<int>(LaunchClass::kKernel);
constexpr uint32_t kUnclassifiedBit = 1u << static_cast<int>(LaunchClass::kNone);

// A store over `cap` records of a session that collects kernels and launch calls.
std::unique_ptr<RecordStore> kernelSession(uint64_t cap, uint32_t also = 0) {
  auto store = std::make_unique<RecordStore>(0, cap);
  store->waitFor(kKernelBit | kUnclassifiedBit | also, /*launchCalls=*/true);
  return store;
}

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
  auto owned = kernelSession(5);
  RecordStore& store = *owned;
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
  auto owned = kernelSession(kCap);
  RecordStore& store = *owned;
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
  auto owned = kernelSession(kCap);
  RecordStore& store = *owned;
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

// Records the store holds: every record appended minus those counted over the cap.
uint64_t keptRecords(const RecordStore& store) { return store.records() - store.overCap(); }

// Every kept device row has its launch call kept (the call of each id in `calls` was delivered).
void expectEveryKeptRowWithItsCall(const RecordStore& store) {
  std::set<uint64_t> calls;
  for (const auto& a : store.apis()) calls.insert(a.correlationId);
  for (const auto& d : store.devices()) EXPECT_TRUE(calls.count(d.correlationId)) << "row " << d.correlationId;
}

// A launch call that starts device work the session does not collect (a copy while MEMCPY is off,
// with the library preloaded: its id is minted, mspti.md 5.5) opens no wait that any record ends:
// it must hold no room. 600 copies and 400 kernel launches, host records first as MSPTI delivers
// them, at a cap that holds exactly all of their records.
TEST(RecordStore, CallsOfClassesNotCollectedHoldNoRoom) {
  constexpr uint64_t kCopies = 600, kLaunches = 400;
  auto owned = kernelSession(2 * kCopies + 3 * kLaunches);
  RecordStore& store = *owned;
  uint64_t id = 0;
  for (uint64_t i = 0; i < kCopies; ++i) {
    ++id;
    RecordBuilder host;
    host.external(layout::kCustom0, 10'000 + id, id).api(10 * id, 10 * id + 5, 1, 2, id, "aclrtMemcpyAsync");
    appendRecords(store, host);
  }
  for (uint64_t i = 0; i < kLaunches; ++i) {
    ++id;
    RecordBuilder host;
    host.external(layout::kCustom0, 10'000 + id, id).api(10 * id, 10 * id + 5, 1, 2, id, "LaunchKernelV2");
    appendRecords(store, host);
  }
  for (uint64_t k = kCopies + 1; k <= id; ++k) {
    RecordBuilder device;
    device.kernel(100'000 + 10 * k, 100'005 + 10 * k, 0, 1, k, "k");
    appendRecords(store, device);
  }
  store.seal();
  EXPECT_EQ(store.overCap(), 0u);
  EXPECT_EQ(store.devices().size(), kLaunches);
  EXPECT_EQ(store.apis().size(), kCopies + kLaunches);
}

// The same with copies collected: their calls hold room for their rows, which then come.
TEST(RecordStore, CallsOfCollectedClassesHoldRoomForTheirRows) {
  constexpr uint32_t kMemcpyBit = 1u << static_cast<int>(LaunchClass::kMemcpy);
  auto owned = kernelSession(4, kMemcpyBit);
  RecordStore& store = *owned;
  RecordBuilder host;
  host.api(10, 15, 1, 2, 1, "aclrtMemcpyAsync").api(20, 25, 1, 2, 2, "aclrtMemcpyAsync");
  host.api(30, 35, 1, 2, 3, "aclrtMemcpyAsync");
  appendRecords(store, host);  // two calls with room for their rows; the third finds none
  EXPECT_EQ(store.overCap(), 1u);
  EXPECT_EQ(store.pendingLaunches(kMemcpyBit), 2u);
}

// A launch call refused for want of room keeps its rows out in every later batch: at cap 31,
// host records first (external + call per launch, three records with the kernel's room), ten
// launches fit whole; the eleventh's call is refused, and its kernel, coming later when the
// kept kernels have ended their waits, must not take the room they leave.
TEST(RecordStore, ARowWhoseCallWasRefusedIsRefusedInALaterBatch) {
  constexpr uint64_t kCap = 31, kLaunches = 20;
  auto owned = kernelSession(kCap);
  RecordStore& store = *owned;
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
  EXPECT_EQ(store.apis().size(), 10u);
  EXPECT_EQ(store.devices().size(), 10u);
  expectEveryKeptRowWithItsCall(store);
  EXPECT_LE(keptRecords(store), kCap);
}

// Never more than the cap, and never a row without its call, for every cap up to a session's
// size and every order MSPTI can deliver in: each launch's host records before its kernel (in
// their own buffers), every host record before every kernel, kernels before their calls (a
// later buffer holding the calls), and everything in one buffer.
TEST(RecordStore, NeverMoreThanTheCapAndNeverARowWithoutItsCall) {
  constexpr uint64_t kLaunches = 12;
  auto host = [](uint64_t id) {
    RecordBuilder b;
    b.external(layout::kCustom0, 100 + id, id).api(10 * id, 10 * id + 5, 1, 2, id, "LaunchKernelV2");
    return b;
  };
  auto device = [](uint64_t id) {
    RecordBuilder b;
    b.kernel(1000 + 10 * id, 1005 + 10 * id, 0, 1, id, "k");
    return b;
  };
  // An external record in an earlier buffer than its call (MSPTI writes it as the id is minted,
  // the call's record as the call returns).
  auto external = [](uint64_t id) {
    RecordBuilder b;
    b.external(layout::kCustom0, 100 + id, id);
    return b;
  };
  auto call = [](uint64_t id) {
    RecordBuilder b;
    b.api(10 * id, 10 * id + 5, 1, 2, id, "LaunchKernelV2");
    return b;
  };
  enum Order { kInterleaved, kHostFirst, kDeviceFirst, kOneBuffer, kExternalsApart };
  for (int order = kInterleaved; order <= kExternalsApart; ++order) {
    for (uint64_t cap = 1; cap <= 3 * kLaunches + 1; ++cap) {
      SCOPED_TRACE("order " + std::to_string(order) + ", cap " + std::to_string(cap));
      auto owned = kernelSession(cap);
      RecordStore& store = *owned;
      RecordBuilder all;
      for (uint64_t id = 1; id <= kLaunches; ++id) {
        if (order == kInterleaved) {
          appendRecords(store, host(id));
          appendRecords(store, device(id));
        } else if (order == kOneBuffer) {
          all.append(host(id)).append(device(id));
        }
      }
      const bool hostFirst = order == kHostFirst;
      if (order == kHostFirst || order == kDeviceFirst)
        for (int pass = 0; pass < 2; ++pass)
          for (uint64_t id = 1; id <= kLaunches; ++id)
            appendRecords(store, (pass == 0) == hostFirst ? host(id) : device(id));
      if (order == kOneBuffer) appendRecords(store, all);
      if (order == kExternalsApart) {
        for (uint64_t id = 1; id <= kLaunches; ++id) {
          appendRecords(store, external(id));
          appendRecords(store, call(id));
        }
        for (uint64_t id = 1; id <= kLaunches; ++id) appendRecords(store, device(id));
      }
      store.seal();
      EXPECT_LE(keptRecords(store), cap);
      EXPECT_EQ(store.records(), 3 * kLaunches);
      expectEveryKeptRowWithItsCall(store);
      if (cap >= 3 * kLaunches) EXPECT_EQ(store.overCap(), 0u);
    }
  }
}

// Drops are counted per kind, and add up to the total.
TEST(RecordStore, OverCapIsCountedPerKind) {
  auto owned = kernelSession(3);
  RecordStore& store = *owned;
  RecordBuilder b;
  b.external(layout::kCustom0, 101, 1).api(10, 15, 1, 2, 1, "LaunchKernelV2");
  b.external(layout::kCustom0, 102, 2).api(20, 25, 1, 2, 2, "LaunchKernelV2");
  b.marker(30, 7, "m", "default");
  appendRecords(store, b);
  store.seal();
  const std::vector<uint64_t> byKind = store.overCapByKind();
  uint64_t sum = 0;
  for (uint64_t n : byKind) sum += n;
  EXPECT_EQ(sum, store.overCap());
  EXPECT_EQ(byKind[MSPTI_ACTIVITY_KIND_MARKER], 1u);
  EXPECT_GE(byKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION], 1u);
}

// A row refused before its call, and the call then coming in a small batch after room freed up:
// the whole-batch fast path must not keep the call (its wait would hold the drain for a row that
// was thrown away).
TEST(RecordStore, ACallOfARefusedRowStaysRefusedWhenRoomFreesUp) {
  auto owned = kernelSession(6);
  RecordStore& store = *owned;
  RecordBuilder hints;
  hints.external(layout::kCustom0, 105, 5).external(layout::kCustom0, 106, 6).api(10, 15, 1, 2, 1, "LaunchKernelV2");
  appendRecords(store, hints);  // two hints and a call, each with its answer's room: the cap is full
  RecordBuilder ahead;
  ahead.kernel(100, 110, 0, 1, 3, "k3");  // a row before its call, no room for both: refused
  appendRecords(store, ahead);
  RecordBuilder calls;
  calls.api(20, 25, 1, 2, 5, "LaunchKernelV2").api(30, 35, 1, 2, 6, "LaunchKernelV2");
  appendRecords(store, calls);  // no room: launches 5 and 6 refused
  RecordBuilder rows;
  rows.kernel(120, 130, 0, 1, 1, "k1").kernel(140, 150, 0, 1, 5, "k5").kernel(160, 170, 0, 1, 6, "k6");
  appendRecords(store, rows);  // k1 kept, k5 and k6 refused: their waits end and room frees up
  RecordBuilder late;
  late.api(90, 95, 1, 2, 3, "LaunchKernelV2");  // the refused row's call, alone in a small batch
  appendRecords(store, late);
  store.seal();
  EXPECT_EQ(store.pendingLaunches(kKernelBit | kUnclassifiedBit), 0u);  // nothing holds the drain
  for (const auto& a : store.apis()) EXPECT_NE(a.correlationId, 3u);
  expectEveryKeptRowWithItsCall(store);
  EXPECT_LE(keptRecords(store), 6u);
}

// A session that waits for MEMORY only (KERNEL not collected): hints of allocations wait in a class
// it does not wait for, so they hold no room, and their MEMORY records must then take room like any
// other record: never more than the cap.
TEST(RecordStore, AnswersOfWaitsNotWaitedForStillNeedRoom) {
  constexpr uint32_t kMemoryBit = 1u << static_cast<int>(LaunchClass::kMemory);
  auto store = std::make_unique<RecordStore>(0, 50);
  store->waitFor(kMemoryBit, /*launchCalls=*/true);
  RecordBuilder b;
  for (uint64_t id = 1; id <= 100; ++id) b.external(layout::kCustom0, 1000 + id, id);
  for (uint64_t id = 1; id <= 100; ++id)
    b.memory(MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000 * id, 64, 10 * id, 10 * id + 5, id, 0);
  appendRecords(*store, b);
  store->seal();
  EXPECT_LE(keptRecords(*store), 50u);
}

// MEMORY records whose allocation call the library does not report (its API records name only
// launches): once API records have shown which calls come, the MEMORY records hold no room for a
// call that never comes, so a cap that holds every record keeps them all.
TEST(RecordStore, AnswersWhoseCallsTheLibraryDoesNotReportHoldNoRoom) {
  constexpr uint32_t kMemoryBit = 1u << static_cast<int>(LaunchClass::kMemory);
  auto owned = kernelSession(2 + 40, kMemoryBit);
  RecordStore& store = *owned;
  RecordBuilder launch;
  launch.api(10, 15, 1, 2, 1, "LaunchKernelV2").kernel(20, 30, 0, 1, 1, "k");
  appendRecords(store, launch);
  for (uint64_t id = 2; id <= 41; ++id) {
    RecordBuilder m;
    m.memory(MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000 * id, 64, 10 * id, 10 * id + 5, id, 0);
    appendRecords(store, m);
  }
  store.seal();
  EXPECT_EQ(store.overCap(), 0u);
  EXPECT_EQ(store.memory().size(), 40u);
}

}  // namespace
}  // namespace torch_mspti::test
