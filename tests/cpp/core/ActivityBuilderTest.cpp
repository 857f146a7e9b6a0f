// ActivityBuilder: records + linked ops -> kernel and launch activities, flows, drops counted
// (kineto.md 1.4-1.5, 2).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "ActivityBuilder.h"
#include "CorrelationIds.h"
#include "NameTable.h"

namespace torch_mspti::test {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

constexpr uint32_t kCustom0 = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr uint32_t kCustom1 = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // ns since the epoch

const std::string* name(const char* s) { return NameTable::instance().intern(s); }

class ActivityBuilderTest : public ::testing::Test {
 protected:
  // A CPU op as torch hands it to kineto: pid = device, tid = resource, id = torch's op id.
  GenericTraceActivity& op(int32_t id, int64_t start, int64_t end, int32_t pid = 4242, int32_t tid = 777) {
    auto a = std::make_unique<GenericTraceActivity>(span_, ActivityType::CPU_OP, "aten::op" + std::to_string(id));
    a->id = id;
    a->startTime = start;
    a->endTime = end;
    a->device = pid;
    a->resource = tid;
    a->threadId = tid;
    GenericTraceActivity& ref = *a;
    ops_[id] = std::move(a);
    return ref;
  }
  void external(uint64_t opId, uint64_t corr, uint32_t kind = kCustom0) {
    batch_.externals.push_back({kind, opId, corr});
  }
  void api(uint64_t corr, int64_t start, int64_t end, uint32_t tid = 777, const char* n = "LaunchKernelV2") {
    batch_.apis.push_back({start, end, 4242, tid, corr, name(n)});
  }
  void kernel(uint64_t corr, int64_t start, int64_t end, uint32_t device = 0, uint32_t stream = 3,
              const char* n = "MatMul") {
    batch_.kernels.push_back({start, end, corr, device, stream, name(n), name("KERNEL_AICORE")});
  }

  void build(int64_t windowStart = 0, int64_t windowEnd = 0, std::vector<uint32_t> visible = {}) {
    store_.append(batch_);
    BuildInput in{&store_, &callback_, windowStart, windowEnd, std::move(visible), &intervals_};
    buildActivities(in, buffer_, lanes_, counters_);
  }

  std::vector<const GenericTraceActivity*> of(ActivityType t) const {
    std::vector<const GenericTraceActivity*> out;
    for (const auto& a : buffer_.activities)
      if (a->type() == t) out.push_back(a.get());
    return out;
  }
  std::vector<const GenericTraceActivity*> kernels() const { return of(ActivityType::CONCURRENT_KERNEL); }
  std::vector<const GenericTraceActivity*> launches() const { return of(ActivityType::PRIVATEUSE1_RUNTIME); }

  libkineto::TraceSpan span_{0, 0, "ops"};
  std::map<int32_t, std::unique_ptr<GenericTraceActivity>> ops_;
  std::vector<int32_t> calls_;
  libkineto::getLinkedActivityCallback callback_ = [this](int32_t id) -> const libkineto::ITraceActivity* {
    calls_.push_back(id);
    auto it = ops_.find(id);
    return it == ops_.end() ? nullptr : it->second.get();
  };
  RecordStore store_{0};
  WalkResult batch_;
  libkineto::CpuTraceBuffer buffer_;
  DeviceLanes lanes_;
  SessionCounters counters_;
  std::vector<OpInterval> intervals_;  // interval mode (no external correlation)
};

TEST_F(ActivityBuilderTest, LinkedKernelGetsAFlowFinishAndALaunchEventThatStartsIt) {
  const auto& o = op(17, kT0, kT0 + 10'000);
  external(17, 501);
  api(501, kT0 + 2'000, kT0 + 3'000);
  kernel(501, kT0 + 50'000, kT0 + 60'000, 0, 3, "MatMul_v2");
  build();

  ASSERT_EQ(kernels().size(), 1u);
  ASSERT_EQ(launches().size(), 1u);
  const auto& k = *kernels()[0];
  const auto& rt = *launches()[0];
  EXPECT_EQ(k.name(), "MatMul_v2");
  EXPECT_EQ(k.timestamp(), kT0 + 50'000);
  EXPECT_EQ(k.duration(), 10'000);
  EXPECT_EQ(k.deviceId(), 0);
  EXPECT_EQ(k.resourceId(), 3);
  EXPECT_EQ(k.linkedActivity(), &o);
  EXPECT_EQ(k.flowType(), static_cast<int>(libkineto::kLinkAsyncCpuGpu));
  EXPECT_FALSE(k.flowStart());
  EXPECT_NE(k.flowId(), 0);
  EXPECT_EQ(k.getMetadataValue("device"), "0");
  EXPECT_EQ(k.getMetadataValue("stream"), "3");
  EXPECT_EQ(k.getMetadataValue("type"), "KERNEL_AICORE");
  EXPECT_EQ(k.getMetadataValue("correlation"), std::to_string(k.correlationId()));

  EXPECT_EQ(rt.name(), "LaunchKernelV2");
  EXPECT_EQ(rt.flowId(), k.flowId());
  EXPECT_EQ(rt.flowType(), static_cast<int>(libkineto::kLinkAsyncCpuGpu));
  EXPECT_TRUE(rt.flowStart());
  EXPECT_EQ(rt.correlationId(), k.correlationId());
  EXPECT_EQ(rt.linkedActivity(), &o);
  EXPECT_EQ(rt.deviceId(), 4242);   // the op's pid
  EXPECT_EQ(rt.resourceId(), 777);  // the op's tid
  EXPECT_EQ(rt.getThreadId(), 777);
  EXPECT_EQ(rt.timestamp(), kT0 + 2'000);  // the API record's host time
  EXPECT_EQ(rt.timestamp() + rt.duration(), kT0 + 3'000);
  EXPECT_GE(rt.timestamp(), o.timestamp());
  EXPECT_LE(rt.timestamp() + rt.duration(), o.timestamp() + o.duration());
  EXPECT_LE(rt.timestamp(), k.timestamp());

  EXPECT_EQ(calls_, std::vector<int32_t>{17});
  EXPECT_EQ(counters_.kernels, 1u);
  EXPECT_EQ(counters_.linkedKernels, 1u);
  EXPECT_EQ(counters_.unlinkedKernels, 0u);
  EXPECT_EQ(buffer_.gpuOpCount, 1);
  ASSERT_EQ(lanes_.resourceInfos().size(), 1u);
  EXPECT_EQ(lanes_.resourceInfos()[0].id, 3);
}

TEST_F(ActivityBuilderTest, LaunchEventIsClampedIntoTheOpAndNeverAfterItsKernel) {
  const auto& o = op(5, kT0, kT0 + 1'000);
  external(5, 10);
  api(10, kT0 + 900, kT0 + 5'000);     // API ends after the op: clamp the end to the op's end
  kernel(10, kT0 + 400, kT0 + 2'000);  // kernel starts before the API start: launch moved to it
  build();
  ASSERT_EQ(launches().size(), 1u);
  const auto& rt = *launches()[0];
  EXPECT_GE(rt.timestamp(), o.timestamp());
  EXPECT_LE(rt.timestamp(), kT0 + 400);
  EXPECT_LE(rt.timestamp() + rt.duration(), o.timestamp() + o.duration());
  EXPECT_GT(rt.duration(), 0);
}

TEST_F(ActivityBuilderTest, CallbackIsNeverCalledWithZero) {
  op(0, kT0, kT0 + 100);  // what torch's activityMap_[0] would hold: an arbitrary event
  external(0, 20);        // external id 0: unlinked
  kernel(20, kT0 + 10, kT0 + 20);
  kernel(21, kT0 + 30, kT0 + 40);  // no external record at all
  kernel(0, kT0 + 50, kT0 + 60);   // no correlation id
  build();
  for (int32_t id : calls_) EXPECT_NE(id, 0);
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(kernels().size(), 3u);
  EXPECT_TRUE(launches().empty());
  for (const auto* k : kernels()) {
    EXPECT_EQ(k->flowId(), 0);
    EXPECT_EQ(k->linkedActivity(), nullptr);
  }
  EXPECT_EQ(counters_.unlinkedKernels, 3u);
}

TEST_F(ActivityBuilderTest, OnlyCustom0ExternalIdsLink) {
  op(8, kT0, kT0 + 100);
  external(8, 30, kCustom1);  // a user range id, not an op id
  kernel(30, kT0 + 10, kT0 + 20);
  build();
  EXPECT_TRUE(calls_.empty());
  EXPECT_TRUE(launches().empty());
  EXPECT_EQ(counters_.unlinkedKernels, 1u);
}

TEST_F(ActivityBuilderTest, ApiRecordOnAnotherThreadRejectsTheLink) {
  op(9, kT0, kT0 + 1'000, 4242, 777);
  external(9, 40);
  api(40, kT0 + 100, kT0 + 200, /*tid=*/888);  // launched by the task-queue thread
  kernel(40, kT0 + 500, kT0 + 600);
  build();
  EXPECT_EQ(counters_.mislinksRejected, 1u);
  EXPECT_TRUE(launches().empty());
  ASSERT_EQ(kernels().size(), 1u);
  EXPECT_EQ(kernels()[0]->linkedActivity(), nullptr);
  EXPECT_EQ(kernels()[0]->flowId(), 0);
  EXPECT_EQ(counters_.unlinkedKernels, 1u);
}

TEST_F(ActivityBuilderTest, KernelStartingBeforeItsOpRejectsTheLink) {
  op(10, kT0 + 1'000, kT0 + 2'000);
  external(10, 41);
  kernel(41, kT0 + 500, kT0 + 600);
  build();
  EXPECT_EQ(counters_.mislinksRejected, 1u);
  EXPECT_TRUE(launches().empty());
}

TEST_F(ActivityBuilderTest, ApiTimeOutsideTheOpFallsBackToTheOpStart) {
  const auto& o = op(11, kT0, kT0 + 1'000);
  external(11, 42);
  api(42, 123'456, 123'999);  // raw monotonic host time from an old MSPTI build
  kernel(42, kT0 + 5'000, kT0 + 6'000);
  build();
  EXPECT_EQ(counters_.apiTimeUntrusted, 1u);
  ASSERT_EQ(launches().size(), 1u);
  EXPECT_EQ(launches()[0]->timestamp(), o.timestamp());
  EXPECT_GT(launches()[0]->duration(), 0);
  EXPECT_LE(launches()[0]->timestamp() + launches()[0]->duration(), o.timestamp() + o.duration());
}

TEST_F(ActivityBuilderTest, WithoutAnApiRecordTheLaunchSitsAtTheOpStart) {
  const auto& o = op(12, kT0 + 100, kT0 + 1'000);
  external(12, 43);
  kernel(43, kT0 + 5'000, kT0 + 6'000);
  build();
  ASSERT_EQ(launches().size(), 1u);
  EXPECT_EQ(launches()[0]->timestamp(), o.timestamp());
  EXPECT_EQ(launches()[0]->name(), "LaunchKernel");
  EXPECT_EQ(counters_.apiTimeUntrusted, 0u);
}

TEST_F(ActivityBuilderTest, MissingLinkTargetIsCounted) {
  external(99, 44);  // torch did not record op 99 in this trace
  kernel(44, kT0 + 5'000, kT0 + 6'000);
  build();
  EXPECT_EQ(calls_, std::vector<int32_t>{99});
  EXPECT_EQ(counters_.linkTargetMissing, 1u);
  EXPECT_TRUE(launches().empty());
}

TEST_F(ActivityBuilderTest, DuplicateKernelRecordsAreDroppedAndCounted) {
  op(13, kT0, kT0 + 1'000);
  external(13, 50);
  kernel(50, kT0 + 5'000, kT0 + 6'000);
  kernel(50, kT0 + 5'000, kT0 + 6'000);
  kernel(50, kT0 + 5'000, kT0 + 6'000);
  build();
  EXPECT_EQ(counters_.duplicates, 2u);
  EXPECT_EQ(kernels().size(), 1u);
  EXPECT_EQ(launches().size(), 1u);
}

TEST_F(ActivityBuilderTest, ZeroOrInvertedTimingIsDroppedAndCounted) {
  kernel(60, 0, kT0);              // no start
  kernel(61, kT0 + 10, kT0 + 10);  // zero length
  kernel(62, kT0 + 10, kT0 + 5);   // inverted
  kernel(63, kT0 + 10, kT0 + 20);  // fine
  build();
  EXPECT_EQ(counters_.invalidTiming, 3u);
  ASSERT_EQ(kernels().size(), 1u);
  EXPECT_EQ(kernels()[0]->timestamp(), kT0 + 10);
}

TEST_F(ActivityBuilderTest, KernelsOutsideTheCaptureWindowAreDroppedAndCounted) {
  kernel(70, kT0 - 100, kT0 + 100);      // starts before the window
  kernel(71, kT0 + 900, kT0 + 1'100);    // ends after it
  kernel(72, kT0 + 10, kT0 + 20);        // inside
  kernel(73, kT0 + 2'000, kT0 + 3'000);  // entirely after
  build(kT0, kT0 + 1'000);
  EXPECT_EQ(counters_.outOfWindow, 3u);
  ASSERT_EQ(kernels().size(), 1u);
  EXPECT_EQ(kernels()[0]->timestamp(), kT0 + 10);
}

TEST_F(ActivityBuilderTest, PhysicalDevicesAreMappedToLogicalOnes) {
  kernel(80, kT0 + 10, kT0 + 20, /*device=*/6, 1);
  kernel(81, kT0 + 10, kT0 + 20, /*device=*/4, 2);
  build(0, 0, {4, 6});
  std::map<int64_t, int64_t> streamToDevice;
  for (const auto* k : kernels()) {
    streamToDevice[k->resourceId()] = k->deviceId();
    EXPECT_EQ(k->getMetadataValue("device"), std::to_string(k->deviceId()));
  }
  EXPECT_EQ(streamToDevice[1], 1);
  EXPECT_EQ(streamToDevice[2], 0);
  EXPECT_EQ(lanes_.devices(), (std::vector<int32_t>{0, 1}));
}

TEST_F(ActivityBuilderTest, WithoutVisibleDevicesPhysicalIdsAreKept) {
  kernel(82, kT0 + 10, kT0 + 20, /*device=*/5, 1);
  build();
  ASSERT_EQ(kernels().size(), 1u);
  EXPECT_EQ(kernels()[0]->deviceId(), 5);
}

TEST_F(ActivityBuilderTest, IdsAreInTheirRangeAndUniquePerLaunch) {
  for (int i = 0; i < 20; ++i) {
    op(100 + i, kT0 + i * 10'000, kT0 + i * 10'000 + 1'000);
    external(100 + i, 900 + i);
    kernel(900 + i, kT0 + i * 10'000 + 500, kT0 + i * 10'000 + 800);
  }
  for (int i = 0; i < 5; ++i) kernel(2000 + i, kT0 + i, kT0 + i + 1);  // unlinked launches
  build();
  ASSERT_EQ(launches().size(), 20u);
  std::set<int64_t> launchIds, flowIds, kernelIds;
  for (const auto* rt : launches()) {
    EXPECT_GE(rt->correlationId(), int64_t{1} << 30);
    EXPECT_LT(rt->correlationId(), int64_t{1} << 31);
    launchIds.insert(rt->correlationId());
    flowIds.insert(rt->flowId());
  }
  for (const auto* k : kernels()) {
    EXPECT_GE(k->correlationId(), int64_t{1} << 30);
    EXPECT_LT(k->correlationId(), int64_t{1} << 31);
    kernelIds.insert(k->correlationId());
  }
  EXPECT_EQ(launchIds.size(), 20u);
  EXPECT_EQ(flowIds.size(), 20u);
  EXPECT_EQ(kernelIds.size(), 25u);  // one id per launch
}

TEST_F(ActivityBuilderTest, IdsStayUniqueAcrossSessions) {
  std::set<int64_t> seen;
  for (int session = 0; session < 3; ++session) {
    RecordStore store(0);
    WalkResult w;
    w.kernels.push_back({kT0 + 1, kT0 + 2, 1, 0, 0, name("k"), name("KERNEL_AICORE")});
    store.append(w);
    libkineto::CpuTraceBuffer buffer;
    DeviceLanes lanes;
    SessionCounters counters;
    buildActivities(BuildInput{&store, nullptr, 0, 0, {}}, buffer, lanes, counters);
    ASSERT_EQ(buffer.activities.size(), 1u);
    EXPECT_TRUE(seen.insert(buffer.activities[0]->correlationId()).second);
  }
}

TEST_F(ActivityBuilderTest, SiblingKernelsOfOneLaunchShareOneLaunchEvent) {
  const auto& o = op(21, kT0, kT0 + 1'000);
  external(21, 300);
  api(300, kT0 + 100, kT0 + 200);
  kernel(300, kT0 + 2'000, kT0 + 3'000, 0, 3, "part0");
  kernel(300, kT0 + 3'000, kT0 + 4'000, 0, 3, "part1");
  build();
  ASSERT_EQ(launches().size(), 1u);
  ASSERT_EQ(kernels().size(), 2u);
  for (const auto* k : kernels()) {
    EXPECT_EQ(k->flowId(), launches()[0]->flowId());
    EXPECT_FALSE(k->flowStart());
    EXPECT_EQ(k->correlationId(), launches()[0]->correlationId());
    EXPECT_EQ(k->linkedActivity(), &o);
  }
  EXPECT_EQ(calls_.size(), 1u);
  EXPECT_EQ(counters_.linkedKernels, 2u);
}

TEST_F(ActivityBuilderTest, NullCallbackLinksNothing) {
  op(22, kT0, kT0 + 1'000);
  external(22, 310);
  kernel(310, kT0 + 2'000, kT0 + 3'000);
  store_.append(batch_);
  BuildInput in{&store_, nullptr, 0, 0, {}};
  buildActivities(in, buffer_, lanes_, counters_);
  EXPECT_EQ(kernels().size(), 1u);
  EXPECT_TRUE(launches().empty());
  EXPECT_EQ(counters_.unlinkedKernels, 1u);
}

TEST(CorrelationIdsTest, WrapsBackToTheStartOfTheRange) {
  CorrelationIds& ids = CorrelationIds::instance();
  const uint64_t wraps = ids.wraps();
  ids.resetForTesting(CorrelationIds::kEnd - 2);
  EXPECT_EQ(static_cast<uint32_t>(ids.next()), CorrelationIds::kEnd - 2);
  EXPECT_EQ(static_cast<uint32_t>(ids.next()), CorrelationIds::kEnd - 1);
  EXPECT_EQ(static_cast<uint32_t>(ids.next()), CorrelationIds::kFirst);
  EXPECT_EQ(ids.wraps(), wraps + 1);
}

}  // namespace
// Interval mode (CANN 8.0.RC3: no external correlation). A launch links to the innermost op on
// the API record's thread whose push/pop interval contains the API record's start.
TEST_F(ActivityBuilderTest, WithoutExternalCorrelationTheInnermostOpIntervalOnTheApiThreadLinks) {
  op(1, kT0, kT0 + 1000);                  // outer op on thread 777
  op(2, kT0 + 100, kT0 + 300);             // nested op, first child
  op(3, kT0 + 400, kT0 + 600);             // nested op, second child
  op(4, kT0 + 100, kT0 + 900, 4242, 888);  // an op on another thread covering the same time
  intervals_ = {{777, 1, kT0, kT0 + 1000},
                {777, 2, kT0 + 100, kT0 + 300},
                {777, 3, kT0 + 400, kT0 + 600},
                {888, 4, kT0 + 100, kT0 + 900}};
  api(11, kT0 + 150, kT0 + 160);       // inside op 2
  api(12, kT0 + 350, kT0 + 360);       // between the children: the outer op
  api(13, kT0 + 450, kT0 + 460, 888);  // thread 888: op 4
  api(14, kT0 + 2000, kT0 + 2010);     // outside every op: unlinked
  kernel(11, kT0 + 200, kT0 + 250, 0, 3, "K11");
  kernel(12, kT0 + 400, kT0 + 450, 0, 3, "K12");
  kernel(13, kT0 + 500, kT0 + 550, 0, 3, "K13");
  kernel(14, kT0 + 2100, kT0 + 2150, 0, 3, "K14");
  build();
  std::map<std::string, const libkineto::ITraceActivity*> linkedOf;
  for (const auto* k : kernels()) linkedOf[k->name()] = k->linkedActivity();
  EXPECT_EQ(linkedOf["K11"], ops_[2].get());
  EXPECT_EQ(linkedOf["K12"], ops_[1].get());
  EXPECT_EQ(linkedOf["K13"], ops_[4].get());
  EXPECT_EQ(linkedOf["K14"], nullptr);
  EXPECT_EQ(counters_.linkedKernels, 3u);
  EXPECT_EQ(counters_.linkedByOpInterval, 3u);
  EXPECT_EQ(counters_.mislinksRejected, 0u);
}

TEST_F(ActivityBuilderTest, ExternalCorrelationWinsOverOpIntervals) {
  op(1, kT0, kT0 + 1000);
  op(2, kT0 + 100, kT0 + 300);
  intervals_ = {{777, 2, kT0 + 100, kT0 + 300}};
  external(1, 21);
  api(21, kT0 + 150, kT0 + 160);
  kernel(21, kT0 + 200, kT0 + 250);
  build();
  ASSERT_EQ(kernels().size(), 1u);
  EXPECT_EQ(kernels()[0]->linkedActivity(), ops_[1].get());
  EXPECT_EQ(counters_.linkedByOpInterval, 0u);
}

}  // namespace torch_mspti::test
