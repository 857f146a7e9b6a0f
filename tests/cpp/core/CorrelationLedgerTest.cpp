// CorrelationLedger: which launch class each correlation id is (by its launch call's name, or
// only known from an external record), which launches still wait for their device row, per
// class, and that ids of earlier sessions never wait.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "CorrelationLedger.h"

namespace torch_mspti::test {
namespace {

constexpr uint32_t bit(LaunchClass c) { return 1u << static_cast<int>(c); }
constexpr uint32_t kAll = 0xFFu;

ApiRecord api(uint64_t id, const std::string* name, int64_t start = 100) {
  ApiRecord a;
  a.correlationId = id;
  a.name = name;
  a.start = start;
  a.end = start + 10;
  return a;
}

// The store's API records, as the ledger indexes them.
struct Apis {
  ApiRecords records;
  void note(CorrelationLedger& l, const ApiRecord& a) {
    records.push_back(a);
    l.noteApi(records, records.size() - 1);
  }
};

DeviceRecord device(uint64_t id, uint32_t kind) {
  DeviceRecord d;
  d.correlationId = id;
  d.kind = kind;
  d.start = 1;
  d.end = 2;
  return d;
}

TEST(CorrelationLedger, ClassifiesLaunchCallsByName) {
  EXPECT_EQ(classifyApiName("LaunchKernelV2"), LaunchClass::kKernel);
  EXPECT_EQ(classifyApiName("rtKernelLaunch"), LaunchClass::kKernel);
  EXPECT_EQ(classifyApiName("aclrtLaunchKernel"), LaunchClass::kKernel);
  EXPECT_EQ(classifyApiName("aclrtMemcpyAsync"), LaunchClass::kMemcpy);
  EXPECT_EQ(classifyApiName("aclrtMEMSET"), LaunchClass::kMemset);
  EXPECT_EQ(classifyApiName("HcclAllReduce"), LaunchClass::kCommunication);
  EXPECT_EQ(classifyApiName("hcom_broadcast"), LaunchClass::kCommunication);
  EXPECT_EQ(classifyApiName("LcclAllGather"), LaunchClass::kCommunication);
  EXPECT_EQ(classifyApiName("StreamSynchronize"), LaunchClass::kNone);
  // Calls named "launch" that start no kernel: a host callback or host function.
  EXPECT_EQ(classifyApiName("aclrtLaunchCallback"), LaunchClass::kNone);
  EXPECT_EQ(classifyApiName("aclrtLaunchHostFunc"), LaunchClass::kNone);
  EXPECT_EQ(classifyApiName("LaunchKernelV2Extra"), LaunchClass::kNone);
  EXPECT_EQ(classifyApiName("aclrtLaunchKernelWithConfig"), LaunchClass::kKernel);
  EXPECT_EQ(classifyApiName("rtLaunchKernelByFuncHandleV3"), LaunchClass::kKernel);
  EXPECT_EQ(classifyApiName(""), LaunchClass::kNone);
  EXPECT_EQ(classifyApiName("aclrtMalloc"), LaunchClass::kMemory);
  EXPECT_EQ(classifyApiName("aclrtFree"), LaunchClass::kMemory);
  EXPECT_EQ(classifyApiName("aclrtMallocHost"), LaunchClass::kNone);  // mints an id, writes no MEMORY record
}

TEST(CorrelationLedger, LaunchesArePendingPerClassUntilTheirDeviceRowArrives) {
  const std::string kernel = "LaunchKernelV2", copy = "aclrtMemcpyAsync", sync = "StreamSynchronize",
                    coll = "HcclAllReduce";
  CorrelationLedger l(0);
  Apis apis;
  EXPECT_FALSE(l.knowsLaunches());
  apis.note(l, api(1, &kernel));
  apis.note(l, api(2, &copy));
  apis.note(l, api(2, &sync));  // a call that launches nothing shares the copy's id
  apis.note(l, api(3, &coll));
  apis.note(l, api(4, &sync));  // an id seen only by a non-launch call: never pending
  EXPECT_TRUE(l.knowsLaunches());
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel)), 1u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kMemcpy)), 1u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kCommunication)), 1u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kMemset)), 0u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel) | bit(LaunchClass::kMemcpy)), 2u);
  EXPECT_EQ(l.pending(kAll), 3u);
  l.noteDevice(device(1, MSPTI_ACTIVITY_KIND_KERNEL));
  l.noteDevice(device(1, MSPTI_ACTIVITY_KIND_KERNEL));  // a second kernel of the same launch
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel)), 0u);
  l.noteDevice(device(2, MSPTI_ACTIVITY_KIND_MEMCPY));
  EXPECT_EQ(l.pending(kAll), 1u);
  EXPECT_EQ(l.apiCalls(LaunchClass::kKernel), 1u);
  EXPECT_EQ(l.apiCalls(LaunchClass::kNone), 2u);
  EXPECT_EQ(l.apiCalls(LaunchClass::kCommunication), 1u);
  const LaunchEntry* e = l.find(1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->deviceRecords, 2u);
  EXPECT_EQ(e->launchClass, LaunchClass::kKernel);
  const LaunchEntry* c = l.find(2);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->launchApi, 1);  // the copy call, not the synchronize that shares its id
  EXPECT_EQ(c->firstApi, 1);
}

// The drain's first flush has every launch made before stop(): launches noted after
// closeAdmissions() with a higher id were made after stop() and hold no wait; they are counted apart
// until their row comes. A launch noted before the close keeps holding.
TEST(CorrelationLedger, LaunchesAfterTheCloseHoldNoWaitAndAreCountedApart) {
  const std::string kernel = "LaunchKernelV2";
  CorrelationLedger l(0);
  Apis apis;
  apis.note(l, api(10, &kernel));
  l.closeAdmissions();
  apis.note(l, api(11, &kernel));
  apis.note(l, api(12, &kernel));
  EXPECT_EQ(l.pending(kAll), 1u);  // id 10 only
  EXPECT_EQ(l.launchesAfterCloseWaiting(kAll), 2u);
  l.noteDevice(device(11, MSPTI_ACTIVITY_KIND_KERNEL));
  EXPECT_EQ(l.launchesAfterCloseWaiting(kAll), 1u);
  l.noteDevice(device(10, MSPTI_ACTIVITY_KIND_KERNEL));
  EXPECT_EQ(l.pending(kAll), 0u);
  l.closeAdmissions();  // once: a second close moves nothing
  apis.note(l, api(13, &kernel));
  EXPECT_EQ(l.pending(kAll), 0u);
  EXPECT_EQ(l.launchesAfterCloseWaiting(kAll), 2u);
  EXPECT_EQ(l.maxCorrelationId(), 13u);  // later sessions still take them as stale
}

TEST(CorrelationLedger, IdsKnownOnlyFromExternalRecordsPendAsUnclassified) {
  CorrelationLedger l(0);
  Apis apis;
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 77, 5});
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 88, 5});
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 99, 5});  // only the first hint counts
  EXPECT_TRUE(l.knowsLaunches());
  EXPECT_EQ(l.pending(bit(LaunchClass::kNone)), 1u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel)), 0u);
  const LaunchEntry* e = l.find(5);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->opHint, 77u);
  EXPECT_EQ(e->userHint, 88u);
  EXPECT_TRUE(e->external);
  // Its launch call arrives later: the launch becomes a kernel launch.
  const std::string kernel = "LaunchKernelV2";
  apis.note(l, api(5, &kernel));
  EXPECT_EQ(l.pending(bit(LaunchClass::kNone)), 0u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel)), 1u);
  l.noteDevice(device(5, MSPTI_ACTIVITY_KIND_KERNEL));
  EXPECT_EQ(l.pending(kAll), 0u);
}

TEST(CorrelationLedger, EarliestLaunchCallWins) {
  const std::string kernel = "LaunchKernelV2";
  CorrelationLedger l(0);
  Apis apis;
  apis.note(l, api(9, &kernel, 500));
  apis.note(l, api(9, &kernel, 300));
  apis.note(l, api(9, &kernel, 400));
  const LaunchEntry* e = l.find(9);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->launchApi, 1);
  EXPECT_EQ(e->firstApi, 1);
}

TEST(CorrelationLedger, IdsOfEarlierSessionsNeverWait) {
  const std::string kernel = "LaunchKernelV2", sync = "StreamSynchronize";
  CorrelationLedger l(100);  // earlier sessions saw ids up to 100
  Apis apis;
  apis.note(l, api(100, &kernel));
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1, 50});
  apis.note(l, api(90, &sync));  // a call carrying its thread's id from an earlier session
  EXPECT_FALSE(l.knowsLaunches());
  EXPECT_EQ(l.pending(kAll), 0u);
  EXPECT_EQ(l.find(100), nullptr);
  EXPECT_EQ(l.find(90), nullptr);
  EXPECT_EQ(l.firstOwnId(), UINT64_MAX);
  apis.note(l, api(101, &kernel));
  apis.note(l, api(105, &kernel));
  EXPECT_EQ(l.firstOwnId(), 101u);
  EXPECT_EQ(l.maxCorrelationId(), 105u);
  EXPECT_EQ(l.staleBelow(), 100u);
  l.noteDevice(device(0, MSPTI_ACTIVITY_KIND_KERNEL));  // no id: no entry
  EXPECT_EQ(l.find(0), nullptr);
}

// An aclrtLaunchCallback record shares the id of the launch before it (or mints nothing): it must
// not leave its id pending as a kernel launch.
TEST(CorrelationLedger, LaunchCallbackLeavesNothingPending) {
  const std::string callback = "aclrtLaunchCallback";
  CorrelationLedger l(0);
  Apis apis;
  apis.note(l, api(9, &callback));
  EXPECT_EQ(l.pending(1u << static_cast<int>(LaunchClass::kKernel)), 0u);
  EXPECT_EQ(l.apiCalls(LaunchClass::kNone), 1u);
  EXPECT_FALSE(l.knowsLaunches());
}

// The watermark later sessions use comes only from ids this session saw launched, and a junk id
// (a foreign or misread record, 2^64 - 2) far above the others is counted, not trusted.
TEST(CorrelationLedger, WatermarkComesOnlyFromSaneLaunchedIds) {
  const std::string kernel = "LaunchKernelV2", sync = "StreamSynchronize";
  constexpr uint64_t kJunk = UINT64_MAX - 1;
  CorrelationLedger l(100);
  Apis apis;
  l.noteDevice(device(kJunk, MSPTI_ACTIVITY_KIND_KERNEL));  // a device record names no launch
  apis.note(l, api(5000, &sync));                           // a call that launches nothing
  EXPECT_EQ(l.maxCorrelationId(), 0u);
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1, kJunk});
  apis.note(l, api(kJunk, &kernel));
  EXPECT_EQ(l.junkIds(), 2u);
  EXPECT_EQ(l.maxCorrelationId(), 0u);
  EXPECT_FALSE(l.knowsLaunches());
  EXPECT_EQ(l.pending(kAll), 0u);  // a junk launch never holds the drain
  apis.note(l, api(101, &kernel));
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 7, 102});
  EXPECT_EQ(l.maxCorrelationId(), 102u);
  EXPECT_EQ(l.firstOwnId(), 101u);
  // Far above the sane ids, not merely above the watermark: junk.
  apis.note(l, api(102 + CorrelationLedger::kMaxIdGap + 1, &kernel));
  EXPECT_EQ(l.junkIds(), 3u);
  apis.note(l, api(102 + CorrelationLedger::kMaxIdGap, &kernel));
  EXPECT_EQ(l.maxCorrelationId(), 102 + CorrelationLedger::kMaxIdGap);
  EXPECT_EQ(l.junkIds(), 3u);
}

// Over the store's cap a device record still ends its launch's wait, but adds no entry.
TEST(CorrelationLedger, DeviceRecordsNotKeptEndWaitsWithoutEntries) {
  const std::string kernel = "LaunchKernelV2";
  CorrelationLedger l(0);
  Apis apis;
  apis.note(l, api(3, &kernel));
  EXPECT_EQ(l.pending(kAll), 1u);
  l.noteDeviceIfKnown(device(3, MSPTI_ACTIVITY_KIND_KERNEL));
  l.noteDeviceIfKnown(device(4, MSPTI_ACTIVITY_KIND_KERNEL));
  EXPECT_EQ(l.pending(kAll), 0u);
  EXPECT_EQ(l.size(), 1u);
}

// Entries live in a dense run from the first id noted, and in a map for ids below it or far past
// its end; each id has one entry wherever it lives, and the run reaching an id kept in the map
// later does not make a second one.
TEST(CorrelationLedger, IdsBelowFarBeyondAndInsideTheDenseRunEachHaveOneEntry) {
  const std::string kernel = "LaunchKernelV2";
  CorrelationLedger l(0);
  Apis apis;
  const uint64_t far = 1000 + (uint64_t{1} << 20);  // past the dense run's slack
  for (uint64_t id : {uint64_t{1000}, uint64_t{1002}, uint64_t{999}, far, uint64_t{1001}}) {
    apis.note(l, api(id, &kernel, static_cast<int64_t>(id)));
    l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id * 10, id});
  }
  // The dense run grows (by slack-sized steps) until it covers `far`, which the map holds already.
  for (uint64_t id = 1003; id <= far + 2; id += 40'000) apis.note(l, api(id, &kernel));
  l.noteDevice(device(far, MSPTI_ACTIVITY_KIND_KERNEL));
  const size_t bulk = (far + 2 - 1003) / 40'000 + 1;
  EXPECT_EQ(l.size(), 5u + bulk);
  for (uint64_t id : {uint64_t{999}, uint64_t{1000}, uint64_t{1001}, uint64_t{1002}, far}) {
    const LaunchEntry* e = l.find(id);
    ASSERT_NE(e, nullptr) << id;
    EXPECT_EQ(e->opHint, id * 10) << id;
    EXPECT_EQ(apis.records[static_cast<size_t>(e->launchApi)].correlationId, id) << id;
  }
  EXPECT_EQ(l.find(far)->deviceRecords, 1u);
  EXPECT_EQ(l.find(998), nullptr);
  EXPECT_EQ(l.find(1004), nullptr);  // a gap in the run is no entry
  EXPECT_EQ(l.find(far + 10'000'000), nullptr);
  // Every id but `far` (answered) waits for its kernel.
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel)), 4u + bulk);
  const uint64_t lastBulk = 1003 + (bulk - 1) * 40'000;
  EXPECT_EQ(l.watermark().id, std::max(far, lastBulk));
}

// Once the launch table has what it needs, the entries go; the counts stay.
TEST(CorrelationLedger, ReleasedEntriesLeaveTheCounters) {
  const std::string kernel = "LaunchKernelV2";
  CorrelationLedger l(0);
  Apis apis;
  apis.note(l, api(7, &kernel));
  apis.note(l, api(8, &kernel));
  l.noteDevice(device(7, MSPTI_ACTIVITY_KIND_KERNEL));
  l.releaseEntries();
  EXPECT_EQ(l.find(7), nullptr);
  EXPECT_EQ(l.size(), 0u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel)), 1u);
  EXPECT_EQ(l.apiCalls(LaunchClass::kKernel), 2u);
  EXPECT_EQ(l.maxCorrelationId(), 8u);
}

}  // namespace
}  // namespace torch_mspti::test
