// buildActivities: what kineto receives for each launch — the launch event nested in its op (or
// on its thread's own lane), device rows of each kind with their names, lanes, arguments and
// the link state, the flow from launch to rows, and user-range spans on the device lanes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ActivityBuilder.h"
#include "FakeOps.h"
#include "KindHandlers.h"
#include "StoreFill.h"

namespace torch_mspti::test {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;
using Fwd = CorrelationForwarder;

constexpr int64_t T = 1'780'000'000'000'000'000;
constexpr uint64_t at(int64_t offset) { return static_cast<uint64_t>(T + offset); }
constexpr uint32_t kOpThread = 7, kQueueThread = 8;

class ActivityBuilderTest : public ::testing::Test {
 protected:
  // Builds the activities of `records` with op 1 [1000, 2000] on kOpThread and, inside it, user
  // range 60 [1050, 1900].
  void build(const RecordBuilder& records) {
    ops.add(kOpThread, T + 1000, T + 2000, "aten::mm", 1);
    ops.add(kOpThread, T + 1050, T + 1900, "my_range", 60);
    log = {{kOpThread, {1, 60 | Fwd::kUserRangeBit}}};
    appendRecords(store, records);
    store.seal();
    Admission admission(HostClock::realtime(), {T, T + 10'000, T + 10'000}, store.ledger(), counters);
    table = LaunchTable::build(store, admission, {}, counters);
    cb = ops.callback();
    timeline = std::make_unique<OpTimeline>(log, &cb, counters);
    buildActivities({&table, timeline.get(), &ids, 4242}, buffer, lanes, counters);
  }
  std::vector<const GenericTraceActivity*> of(ActivityType type) const {
    std::vector<const GenericTraceActivity*> out;
    for (const auto& a : buffer.activities)
      if (a->type() == type) out.push_back(static_cast<const GenericTraceActivity*>(a.get()));
    return out;
  }
  static std::string arg(const GenericTraceActivity* a, const std::string& key) { return a->getMetadataValue(key); }

  FakeOps ops;
  std::vector<ThreadOps> log;
  RecordStore store{0};
  LaunchTable table;
  SessionCounters counters;
  libkineto::getLinkedActivityCallback cb;
  std::unique_ptr<OpTimeline> timeline;
  CorrelationIds ids;
  libkineto::CpuTraceBuffer buffer;
  DeviceLanes lanes;
};

TEST_F(ActivityBuilderTest, LaunchInsideAnOpIsNestedAndLinked) {
  RecordBuilder b;
  b.external(layout::kCustom0, 1, 5).api(at(1010), at(1040), 1, kOpThread, 5, "LaunchKernelV2");  // before the range
  b.kernel(at(3000), at(3500), 0, 12, 5, "MatMul", "KERNEL_AICORE").kernel(at(3500), at(3600), 0, 12, 5, "Cast");
  build(b);
  const auto launches = of(ActivityType::PRIVATEUSE1_RUNTIME);
  const auto kernels = of(ActivityType::CONCURRENT_KERNEL);
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(kernels.size(), 2u);
  const GenericTraceActivity* l = launches[0];
  EXPECT_EQ(l->name(), "LaunchKernelV2");
  EXPECT_EQ(l->startTime, T + 1010);
  EXPECT_EQ(l->endTime, T + 1040);
  EXPECT_EQ(l->threadId, static_cast<int32_t>(kOpThread));
  ASSERT_NE(l->linked, nullptr);
  EXPECT_EQ(l->linked->correlationId(), 1);
  EXPECT_EQ(l->flow.type, libkineto::kLinkAsyncCpuGpu);
  EXPECT_TRUE(l->flow.start);
  EXPECT_GE(l->id, static_cast<int32_t>(CorrelationIds::kFirst));
  for (const GenericTraceActivity* k : kernels) {
    EXPECT_EQ(k->id, l->id);  // one correlation for the launch and all its rows
    EXPECT_EQ(k->flow.id, l->flow.id);
    EXPECT_FALSE(k->flow.start);
    EXPECT_EQ(k->device, 0);
    EXPECT_EQ(k->resource, 12);
    ASSERT_NE(k->linked, nullptr);
    EXPECT_EQ(k->linked->correlationId(), 1);
    EXPECT_EQ(arg(k, "link"), "verified");
    EXPECT_EQ(arg(k, "stream"), "12");
  }
  EXPECT_EQ(kernels[0]->name(), "MatMul");
  EXPECT_EQ(arg(kernels[0], "type"), "KERNEL_AICORE");
  EXPECT_EQ(counters.kernels, 2u);
  EXPECT_EQ(counters.deviceRows, 2u);
  EXPECT_EQ(counters.linkedVerified, 2u);
  EXPECT_EQ(counters.launchEvents, 1u);
  EXPECT_EQ(buffer.gpuOpCount, 2);
  EXPECT_EQ(lanes.devices(), std::vector<int32_t>{0});
}

TEST_F(ActivityBuilderTest, LaunchJustBeforeItsOpIsClampedIntoTheOp) {
  RecordBuilder b;
  b.api(at(999), at(1010), 1, kOpThread, 5, "LaunchKernelV2").kernel(at(3000), at(3100), 0, 1, 5, "k");
  build(b);
  const auto launches = of(ActivityType::PRIVATEUSE1_RUNTIME);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0]->startTime, T + 1000);
  EXPECT_EQ(launches[0]->endTime, T + 1010);
  EXPECT_EQ(arg(of(ActivityType::CONCURRENT_KERNEL)[0], "link"), "recovered");  // no hint
}

TEST_F(ActivityBuilderTest, LaunchFromAThreadWithoutOpsGetsItsOwnLane) {
  RecordBuilder b;
  b.external(layout::kCustom0, 1, 5).api(at(1100), at(1150), 1, kQueueThread, 5, "LaunchKernelV2");
  b.kernel(at(3000), at(3100), 0, 1, 5, "k");
  build(b);
  const auto launches = of(ActivityType::PRIVATEUSE1_RUNTIME);
  const auto kernels = of(ActivityType::CONCURRENT_KERNEL);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0]->linked, nullptr);
  EXPECT_EQ(launches[0]->device, 4242);
  EXPECT_EQ(launches[0]->threadId, static_cast<int32_t>(kQueueThread));
  EXPECT_EQ(kernels[0]->linked, nullptr);
  EXPECT_EQ(arg(kernels[0], "link"), "no_op_on_thread");
  EXPECT_EQ(counters.unlinkedNoOp, 1u);
  EXPECT_EQ(counters.launchThreadEvents, 1u);
  bool named = false;
  for (const auto& r : lanes.resourceInfos()) named |= r.id == static_cast<int64_t>(kQueueThread) && r.deviceId == 4242;
  EXPECT_TRUE(named);
}

TEST_F(ActivityBuilderTest, CopiesMemsetsAndCollectivesAreNamedAndDescribed) {
  RecordBuilder b;
  b.api(at(1100), at(1110), 1, kOpThread, 5, "aclrtMemcpyAsync")
      .copy(layout::kMemcpy, {.start = at(3000),
                              .end = at(3100),
                              .deviceId = 0,
                              .streamId = 2,
                              .correlationId = 5,
                              .subkind = 2,
                              .count = 1000,
                              .isAsync = 1});
  b.api(at(1200), at(1210), 1, kOpThread, 6, "aclrtMemsetAsync")
      .copy(layout::kMemset, {.start = at(3200),
                              .end = at(3250),
                              .deviceId = 0,
                              .streamId = 2,
                              .correlationId = 6,
                              .subkind = 0,
                              .count = 64});
  b.api(at(1300), at(1310), 1, kOpThread, 7, "HcclAllReduce")
      .communication({.start = at(4000),
                      .end = at(5000),
                      .deviceId = 0,
                      .streamId = 3,
                      .correlationId = 7,
                      .name = "hcom_allReduce__12_0_1",
                      .detail = "RING",
                      .group = "group_0",
                      .subkind = 4,
                      .count = 256});
  build(b);
  const auto copies = of(ActivityType::GPU_MEMCPY);
  const auto sets = of(ActivityType::GPU_MEMSET);
  const auto kernels = of(ActivityType::CONCURRENT_KERNEL);
  ASSERT_EQ(copies.size(), 1u);
  ASSERT_EQ(sets.size(), 1u);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(copies[0]->name(), "Memcpy HtoD (Host -> Device)");
  EXPECT_EQ(arg(copies[0], "bytes"), "1000");
  EXPECT_EQ(arg(copies[0], "memory bandwidth (GB/s)"), "10");
  EXPECT_EQ(arg(copies[0], "copy kind"), "HtoD");
  EXPECT_EQ(arg(copies[0], "async"), "1");
  EXPECT_EQ(sets[0]->name(), "Memset (Device)");
  EXPECT_EQ(arg(sets[0], "bytes"), "64");
  const GenericTraceActivity* c = kernels[0];
  EXPECT_EQ(c->name(), "hcom_allReduce__12_0_1");
  EXPECT_EQ(arg(c, "Collective name"), "allreduce");
  EXPECT_EQ(arg(c, "algorithm"), "RING");
  EXPECT_EQ(arg(c, "In msg nelems"), "256");
  EXPECT_EQ(arg(c, "dtype"), "Float");
  EXPECT_EQ(arg(c, "bytes"), "1024");
  EXPECT_EQ(arg(c, "Process Group Name"), "group_0");
  EXPECT_EQ(counters.memcpys, 1u);
  EXPECT_EQ(counters.memsets, 1u);
  EXPECT_EQ(counters.communications, 1u);
  EXPECT_EQ(counters.deviceRows, 3u);
}

TEST_F(ActivityBuilderTest, UserRangesBecomeSpansOverTheirRowsPerStream) {
  RecordBuilder b;
  b.external(layout::kCustom1, 60, 5).api(at(1100), at(1110), 1, kOpThread, 5, "LaunchKernelV2");
  b.kernel(at(3000), at(3100), 0, 1, 5, "a");
  b.external(layout::kCustom1, 60, 6).api(at(1200), at(1210), 1, kOpThread, 6, "LaunchKernelV2");
  b.kernel(at(3200), at(3400), 0, 1, 6, "b").kernel(at(3300), at(3500), 0, 2, 6, "c");
  b.api(at(1950), at(1960), 1, kOpThread, 7, "LaunchKernelV2").kernel(at(9000), at(9100), 0, 1, 7, "outside");
  build(b);
  const auto spans = of(ActivityType::GPU_USER_ANNOTATION);
  ASSERT_EQ(spans.size(), 2u);  // streams 1 and 2
  for (const GenericTraceActivity* s : spans) {
    EXPECT_EQ(s->name(), "my_range");
    EXPECT_EQ(s->id, 60);
    EXPECT_EQ(s->linked, nullptr);  // credited to no op
    // Handed to kineto 1 ns narrower on each side: its Chrome writer widens every
    // GPU_USER_ANNOTATION by 1 ns per side, so the written span lies exactly over its rows.
    if (s->resource == 1) {
      EXPECT_EQ(s->startTime, T + 3000 + 1);
      EXPECT_EQ(s->endTime, T + 3400 - 1);  // not the row launched after the range ended
    } else {
      EXPECT_EQ(s->startTime, T + 3300 + 1);
      EXPECT_EQ(s->endTime, T + 3500 - 1);
    }
  }
  EXPECT_EQ(counters.annotations, 2u);
  // Rows in the range are linked to the range (the innermost node); the last one to the op.
  for (const GenericTraceActivity* k : of(ActivityType::CONCURRENT_KERNEL))
    EXPECT_EQ(k->linked->correlationId(), k->name() == "outside" ? 1 : 60) << k->name();
}

// Spans are handed to kineto in order of their start (then op id, device, stream), not in the
// order of node addresses or lanes: here stream 2's rows of the range start before stream 1's.
TEST_F(ActivityBuilderTest, UserRangeSpansAreOrderedByStart) {
  RecordBuilder b;
  b.external(layout::kCustom1, 60, 5).api(at(1100), at(1110), 1, kOpThread, 5, "LaunchKernelV2");
  b.kernel(at(3000), at(3100), 0, 2, 5, "early on stream 2");
  b.external(layout::kCustom1, 60, 6).api(at(1200), at(1210), 1, kOpThread, 6, "LaunchKernelV2");
  b.kernel(at(3200), at(3300), 0, 1, 6, "later on stream 1");
  b.kernel(at(3400), at(3500), 1, 1, 6, "later still, device 1");
  build(b);
  const auto spans = of(ActivityType::GPU_USER_ANNOTATION);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0]->resource, 2);
  EXPECT_EQ(spans[0]->startTime, T + 3000 + 1);
  EXPECT_EQ(spans[1]->resource, 1);
  EXPECT_EQ(spans[1]->device, 0);
  EXPECT_EQ(spans[2]->device, 1);
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1]->startTime, spans[i]->startTime);
}

// The lane levels that keep every lane nested (DeviceLanes.h): nested and sequential spans share
// level 0 (touching ends included), a span that crosses one goes a level further, levels are
// reused once the spans on them have ended, with no bound on their number.
TEST(NestingLevels, CrossingSpansGoFurtherAndNestedOnesStay) {
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(nestingLevels(V{{0, 10}, {2, 5}, {5, 8}, {10, 12}}), (std::vector<int32_t>{0, 0, 0, 0}));
  // "add" starts inside "matmul" and ends after it (their kernels interleave on the stream)
  EXPECT_EQ(nestingLevels(V{{5, 20}, {0, 10}}), (std::vector<int32_t>{1, 0}));
  // three crossing each other; then one after all of them is back on level 0
  EXPECT_EQ(nestingLevels(V{{0, 10}, {5, 15}, {8, 20}, {30, 40}}), (std::vector<int32_t>{0, 1, 2, 0}));
  V many;
  for (int64_t i = 0; i < 20; ++i) many.emplace_back(i, 100 + i);  // each crosses every later one
  const std::vector<int32_t> levels = nestingLevels(many);
  for (int32_t i = 0; i < 20; ++i) EXPECT_EQ(levels[static_cast<size_t>(i)], i);
  EXPECT_TRUE(nestingLevels(V{}).empty());
}

// Range lanes are handed out once per (process or device, kind, recorded lane, level) and named
// for what they hold.
TEST(DeviceLanes, RangeLanesAreOnePerLevelAndNamedForWhatTheyHold) {
  DeviceLanes lanes;
  const int32_t host = lanes.rangeLane(100, RangeLane::kHostMstx, 7, 0);
  EXPECT_EQ(lanes.rangeLane(100, RangeLane::kHostMstx, 7, 0), host);
  EXPECT_GE(host, kHostRangeLanesBase);
  const int32_t mstx = lanes.rangeLane(0, RangeLane::kStreamMstx, 1, 0);
  const int32_t user = lanes.rangeLane(0, RangeLane::kStreamUserRanges, 1, 1);
  EXPECT_NE(mstx, user);
  EXPECT_GE(std::min(mstx, user), kRangeLanesBase);
  std::map<std::pair<int64_t, int64_t>, std::string> names;
  for (const auto& r : lanes.resourceInfos()) names[{r.deviceId, r.id}] = r.name;
  EXPECT_EQ((names[{100, host}]), "mstx ranges 7");
  EXPECT_EQ((names[{0, mstx}]), "stream 1 mstx ranges");
  EXPECT_EQ((names[{0, user}]), "stream 1 user ranges (2)");
}

// Rows without a correlation id are launches of their own: each gets its own trace id.
TEST_F(ActivityBuilderTest, RowsWithoutIdGetOneTraceIdEach) {
  RecordBuilder b;
  b.kernel(at(3000), at(3100), 0, 1, 0, "x").kernel(at(3200), at(3300), 0, 1, 0, "y");
  build(b);
  const auto kernels = of(ActivityType::CONCURRENT_KERNEL);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_NE(kernels[0]->id, kernels[1]->id);
  EXPECT_NE(arg(kernels[0], "correlation"), arg(kernels[1], "correlation"));
}

TEST(ActivityBuilderNames, CollectivesAndDataTypes) {
  EXPECT_EQ(collectiveName("hcom_allReduce__360_0_1"), "allreduce");
  EXPECT_EQ(collectiveName("HcclReduceScatter"), "reduce_scatter");
  EXPECT_EQ(collectiveName("hcom_allGather_"), "allgather");
  EXPECT_EQ(collectiveName("AllToAllV"), "all_to_allv");
  EXPECT_EQ(collectiveName("HcclReduce"), "reduce");
  EXPECT_EQ(collectiveName("hcom_receive"), "recv");
  EXPECT_EQ(collectiveName("something"), "");
  EXPECT_STREQ(communicationTypeName(0), "Char");
  EXPECT_STREQ(communicationTypeName(11), "BFloat16");
  EXPECT_STREQ(communicationTypeName(13), "unknown");
  EXPECT_STREQ(communicationTypeName(0xFFFF), "unknown");
  EXPECT_EQ(communicationTypeSize(4), 4u);
  EXPECT_EQ(communicationTypeSize(12), 16u);
  EXPECT_EQ(communicationTypeSize(0xFFFF), 0u);
}

}  // namespace
}  // namespace torch_mspti::test
