// LaunchTable::build: the rules of LaunchTable.h, one test each — timing checks (zero-length
// kept, (0, 0) and inverted dropped), earlier sessions' ids, duplicates, the window decided by the
// launch call (by the device start when there is no trusted call), the lane repair that leaves
// no two rows of a stream overlapping, and device rows that start before their launch.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "LaunchTable.h"
#include "StoreFill.h"

namespace torch_mspti::test {
namespace {

constexpr int64_t T = 1'780'000'000'000'000'000;  // ns since the epoch
constexpr uint64_t at(int64_t offset) { return static_cast<uint64_t>(T + offset); }
const Window kWindow{T + 1000, T + 2000, T + 2100};

struct Built {
  LaunchTable table;
  SessionCounters counters;
};

Built build(const RecordBuilder& records, uint64_t staleBelow = 0, const std::vector<uint32_t>& visible = {},
            const Window& window = kWindow) {
  RecordStore store(staleBelow);
  appendRecords(store, records);
  store.seal();
  Built b;
  Admission admission(HostClock::realtime(), window, store.ledger(), b.counters);
  b.table = LaunchTable::build(store, admission, visible, b.counters);
  // Rows are copies: the table stays valid after the store is gone, except for `call`.
  for (auto& l : b.table.launches) l.call = nullptr;
  return b;
}

// A launch call (RUNTIME_API LaunchKernelV2) at T + `call` on thread 7 and its kernels.
RecordBuilder& launch(RecordBuilder& b, uint64_t id, int64_t call, std::vector<std::pair<int64_t, int64_t>> kernels,
                      uint32_t stream = 1) {
  b.api(at(call), at(call + 10), 1, 7, id, "LaunchKernelV2");
  for (auto [s, e] : kernels) b.kernel(at(s), at(e), 0, stream, id, "k");
  return b;
}

TEST(LaunchTable, WindowIsDecidedByTheLaunchCall) {
  RecordBuilder b;
  launch(b, 1, 1500, {{1900, 2500}});  // launched inside, still running at stop(): kept
  launch(b, 2, 900, {{1100, 1200}});   // launched before start(), ran inside: dropped
  launch(b, 3, 2050, {{2060, 2070}});  // launched after stop(): dropped
  launch(b, 4, 1000, {{1010, 1020}});  // at the window's edges: kept
  launch(b, 5, 2000, {{2010, 2020}});
  const Built r = build(b);
  ASSERT_EQ(r.table.launches.size(), 3u);
  EXPECT_EQ(r.table.launches[0].correlationId, 1u);
  EXPECT_EQ(r.table.launches[1].correlationId, 4u);
  EXPECT_EQ(r.table.launches[2].correlationId, 5u);
  EXPECT_EQ(r.counters.outOfWindow, 2u);
  EXPECT_TRUE(r.table.launches[0].callTrusted);
  EXPECT_EQ(r.table.launches[0].callStart, T + 1500);
  EXPECT_EQ(r.table.launches[0].callEnd, T + 1510);
}

TEST(LaunchTable, WithoutALaunchCallTheDeviceStartDecidesUpToCollectionEnd) {
  RecordBuilder b;
  b.kernel(at(1500), at(1600), 0, 1, 1, "inside");
  b.kernel(at(2050), at(2060), 0, 1, 2, "after stop, before Disable");
  b.kernel(at(2200), at(2300), 0, 1, 3, "after Disable");
  b.kernel(at(900), at(1100), 0, 1, 4, "before start");
  const Built r = build(b);
  ASSERT_EQ(r.table.launches.size(), 2u);
  EXPECT_EQ(r.table.launches[0].correlationId, 1u);
  EXPECT_EQ(r.table.launches[1].correlationId, 2u);
  EXPECT_FALSE(r.table.launches[0].callTrusted);
  EXPECT_EQ(r.counters.outOfWindow, 2u);
}

TEST(LaunchTable, ZeroDurationIsKeptButNoTimingAndInvertedAreDropped) {
  RecordBuilder b;
  b.kernel(at(1500), at(1500), 0, 1, 1, "zero length");
  b.kernel(0, 0, 0, 1, 2, "no timing");
  b.kernel(at(1600), at(1590), 0, 1, 3, "inverted");
  b.kernel(0, at(1590), 0, 1, 4, "no start");
  const Built r = build(b);
  ASSERT_EQ(r.table.rows.size(), 1u);
  EXPECT_EQ(r.table.rows[0].record.correlationId, 1u);
  EXPECT_EQ(r.table.rows[0].record.start, r.table.rows[0].record.end);
  EXPECT_EQ(r.counters.zeroDuration, 1u);
  EXPECT_EQ(r.counters.invalidTiming, 3u);
}

TEST(LaunchTable, DuplicatesAreDroppedAndSiblingsKept) {
  RecordBuilder b;
  launch(b, 1, 1100, {{1200, 1300}, {1200, 1300}, {1300, 1400}});  // one duplicate, two siblings
  const Built r = build(b);
  ASSERT_EQ(r.table.launches.size(), 1u);
  EXPECT_EQ(r.table.launches[0].rowCount, 2u);
  EXPECT_EQ(r.counters.duplicates, 1u);
}

TEST(LaunchTable, EarlierSessionsRecordsAreDropped) {
  RecordBuilder b;
  b.kernel(at(1500), at(1510), 0, 1, 10, "at the watermark");  // ids <= staleBelow
  b.kernel(at(1500), at(1510), 0, 1, 15, "below the first own launch, never launched here");
  launch(b, 20, 1200, {{1300, 1310}});
  launch(b, 21, 1400, {{1500, 1510}});
  b.kernel(at(1600), at(1610), 0, 1, 25, "above: this session's, call lost");
  const Built r = build(b, /*staleBelow=*/10);
  EXPECT_EQ(r.counters.staleRecords, 2u);
  ASSERT_EQ(r.table.launches.size(), 3u);
  EXPECT_EQ(r.table.launches[0].correlationId, 20u);
  EXPECT_EQ(r.table.launches[2].correlationId, 25u);
}

TEST(LaunchTable, OverlappingRowsOfAStreamAreRepairedInOrderOfTheirEnds) {
  // A stream runs its tasks one after another: ends are in execution order, a start may be early.
  RecordBuilder b;
  launch(b, 1, 1100, {{1200, 1300}});
  launch(b, 2, 1110, {{1250, 1400}});                // starts 50 ns before row 1's end (and before row 3's)
  launch(b, 3, 1120, {{1310, 1350}});                // ends before row 2: ran before it
  launch(b, 4, 1130, {{1250, 1260}}, /*stream=*/2);  // another stream: untouched
  launch(b, 5, 1140, {{1500, 1600}});
  launch(b, 6, 1150, {{1450, 1700}});  // reported 150 ns early, before row 5 starts: stays after row 5
  const Built r = build(b);
  ASSERT_EQ(r.table.rows.size(), 6u);
  auto row = [&](uint64_t id) -> const DeviceRecord& {
    for (const auto& x : r.table.rows)
      if (x.record.correlationId == id) return x.record;
    throw std::runtime_error("no row");
  };
  EXPECT_EQ(row(1).start, T + 1200);
  EXPECT_EQ(row(1).end, T + 1300);
  EXPECT_EQ(row(3).start, T + 1310);
  EXPECT_EQ(row(3).end, T + 1350);
  EXPECT_EQ(row(2).start, T + 1350);
  EXPECT_EQ(row(2).end, T + 1400);
  EXPECT_EQ(row(4).start, T + 1250);
  EXPECT_EQ(row(5).start, T + 1500);
  EXPECT_EQ(row(5).end, T + 1600);
  EXPECT_EQ(row(6).start, T + 1600);  // keeps its place after row 5, and the time it really ran
  EXPECT_EQ(row(6).end, T + 1700);
  EXPECT_EQ(r.counters.overlapRepairs, 2u);
  EXPECT_EQ(r.counters.maxOverlapShiftNs, 150u);  // row 6: 1450 -> 1600
  // No two rows of a lane overlap afterwards.
  for (const auto& a : r.table.rows)
    for (const auto& c : r.table.rows)
      if (&a != &c && a.record.streamId == c.record.streamId && a.record.start < c.record.start) {
        EXPECT_LE(a.record.end, c.record.start);
      }
}

TEST(LaunchTable, CopiesWithTheirCallsSpanGiveWayToTheKernelTheyQueuedBehind) {
  // MEMCPY/MEMSET records carry the ACL call's host span (mspti.md 5.7): an async copy queued while a
  // long kernel runs is reported inside that kernel's time. The kernel keeps its device time; each
  // copy keeps its length and follows the row it overlaps.
  RecordBuilder b;
  launch(b, 1, 1100, {{1200, 1700}});  // a long kernel
  b.api(at(1300), at(1310), 1, 7, 2, "aclrtMemcpyAsync");
  b.copy(MSPTI_ACTIVITY_KIND_MEMCPY, {.start = at(1300),
                                      .end = at(1310),
                                      .streamId = 1,
                                      .correlationId = 2,
                                      .subkind = MSPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                      .count = 64,
                                      .isAsync = 1});
  b.api(at(1320), at(1340), 1, 7, 3, "aclrtMemcpyAsync");
  b.copy(MSPTI_ACTIVITY_KIND_MEMCPY, {.start = at(1320),
                                      .end = at(1340),
                                      .streamId = 1,
                                      .correlationId = 3,
                                      .subkind = MSPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                      .count = 64,
                                      .isAsync = 1});
  launch(b, 4, 1350, {{1710, 1800}});  // the next kernel, which ran after both copies in truth
  b.api(at(1900), at(1905), 1, 7, 5, "aclrtMemcpyAsync");
  b.copy(MSPTI_ACTIVITY_KIND_MEMCPY, {.start = at(1900),
                                      .end = at(1905),
                                      .streamId = 1,
                                      .correlationId = 5,
                                      .subkind = MSPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                      .count = 64,
                                      .isAsync = 1});
  const Built r = build(b);
  ASSERT_EQ(r.table.rows.size(), 5u);
  auto row = [&](uint64_t id) -> const DeviceRecord& {
    for (const auto& x : r.table.rows)
      if (x.record.correlationId == id) return x.record;
    throw std::runtime_error("no row");
  };
  EXPECT_EQ(row(1).start, T + 1200);  // the kernels keep their device times
  EXPECT_EQ(row(1).end, T + 1700);
  EXPECT_EQ(row(4).start, T + 1710);
  EXPECT_EQ(row(4).end, T + 1800);
  EXPECT_EQ(row(2).start, T + 1700);  // after the kernel it overlapped, its 10 ns kept
  EXPECT_EQ(row(2).end, T + 1710);
  EXPECT_EQ(row(3).start, T + 1800);  // the gap after copy 2 is too short: after kernel 4
  EXPECT_EQ(row(3).end, T + 1820);
  EXPECT_EQ(row(5).start, T + 1900);  // overlaps nothing: untouched
  EXPECT_EQ(r.counters.overlapRepairs, 2u);
  EXPECT_EQ(r.counters.maxOverlapShiftNs, 480u);  // copy 3: 1320 -> 1800
  for (const auto& a : r.table.rows)
    for (const auto& c : r.table.rows)
      if (&a != &c && a.record.start < c.record.start) {
        EXPECT_LE(a.record.end, c.record.start);
      }
}

TEST(LaunchTable, AdjacentRowsAreNotRepaired) {
  RecordBuilder b;
  launch(b, 1, 1100, {{1200, 1300}});
  launch(b, 2, 1110, {{1300, 1400}});
  const Built r = build(b);
  EXPECT_EQ(r.counters.overlapRepairs, 0u);
  EXPECT_EQ(r.counters.maxOverlapShiftNs, 0u);
}

TEST(LaunchTable, DeviceRowsBeforeTheirLaunchAreCountedAndKept) {
  RecordBuilder b;
  launch(b, 1, 1500, {{1450, 1460}, {1470, 1480}});  // device clock behind the host clock
  launch(b, 2, 1600, {{1700, 1710}});
  const Built r = build(b);
  EXPECT_EQ(r.counters.deviceBeforeLaunch, 2u);
  EXPECT_EQ(r.table.rows.size(), 3u);
}

TEST(LaunchTable, LogicalDevicesFollowAscendRtVisibleDevices) {
  RecordBuilder b;
  b.api(at(1100), at(1110), 1, 7, 1, "LaunchKernelV2").kernel(at(1200), at(1300), 6, 1, 1, "k");
  b.api(at(1100), at(1110), 1, 7, 2, "LaunchKernelV2").kernel(at(1200), at(1300), 4, 1, 2, "k");
  b.api(at(1100), at(1110), 1, 7, 3, "LaunchKernelV2").kernel(at(1200), at(1300), 9, 1, 3, "k");
  const Built r = build(b, 0, {4, 6});
  ASSERT_EQ(r.table.rows.size(), 3u);
  EXPECT_EQ(r.table.rows[0].device, 1);
  EXPECT_EQ(r.table.rows[1].device, 0);
  EXPECT_EQ(r.table.rows[2].device, 9);  // not listed: keeps its physical id
  EXPECT_EQ(r.table.devices, (std::vector<int32_t>{0, 1, 9}));
  EXPECT_EQ(logicalDevice(6, {}), 6);
}

TEST(LaunchTable, HintsComeFromTheLedgerAndRowsWithoutIdGoLast) {
  RecordBuilder b;
  b.kernel(at(1500), at(1510), 0, 1, 0, "no id");
  b.external(layout::kCustom0, 41, 3).external(layout::kCustom1, 42, 3);
  launch(b, 3, 1200, {{1300, 1310}});
  const Built r = build(b);
  ASSERT_EQ(r.table.launches.size(), 2u);
  EXPECT_EQ(r.table.launches[0].correlationId, 3u);
  EXPECT_EQ(r.table.launches[0].opHint, 41u);
  EXPECT_EQ(r.table.launches[0].userHint, 42u);
  EXPECT_EQ(r.table.launches[1].correlationId, 0u);
}

// Rows without a correlation id are not one launch: a stale one before start() must not take the
// others with it, one long after collection must not ride on them, and each gets its own trace id.
TEST(LaunchTable, RowsWithoutIdAreWindowedOneByOne) {
  RecordBuilder b;
  b.kernel(at(500), at(510), 0, 1, 0, "before start");
  b.kernel(at(1500), at(1510), 0, 1, 0, "inside");
  b.kernel(at(1700), at(1710), 0, 2, 0, "inside too");
  b.kernel(at(9000), at(9010), 0, 1, 0, "long after collection");
  const Built r = build(b);
  ASSERT_EQ(r.table.launches.size(), 2u);
  EXPECT_EQ(r.counters.outOfWindow, 2u);
  ASSERT_EQ(r.table.rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.table.launches[i].correlationId, 0u);
    EXPECT_EQ(r.table.launches[i].rowCount, 1u);
    EXPECT_EQ(r.table.launches[i].firstRow, i);
  }
  EXPECT_EQ(r.table.rows[0].record.start, T + 1500);
  EXPECT_EQ(r.table.rows[1].record.start, T + 1700);
}

}  // namespace
}  // namespace torch_mspti::test
