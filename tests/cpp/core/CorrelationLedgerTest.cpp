// CorrelationLedger: which launch class each correlation id is (by its launch call's name, or
// only known from an external record), which launches still wait for their device row, per
// class, and that ids of earlier sessions never wait.
#include <gtest/gtest.h>

#include <string>

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
  EXPECT_FALSE(l.knowsLaunches());
  l.noteApi(api(1, &kernel), 0);
  l.noteApi(api(2, &copy), 1);
  l.noteApi(api(2, &sync), 2);  // a call that launches nothing shares the copy's id
  l.noteApi(api(3, &coll), 3);
  l.noteApi(api(4, &sync), 4);  // an id seen only by a non-launch call: never pending
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

TEST(CorrelationLedger, IdsKnownOnlyFromExternalRecordsPendAsUnclassified) {
  CorrelationLedger l(0);
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
  l.noteApi(api(5, &kernel), 0);
  EXPECT_EQ(l.pending(bit(LaunchClass::kNone)), 0u);
  EXPECT_EQ(l.pending(bit(LaunchClass::kKernel)), 1u);
  l.noteDevice(device(5, MSPTI_ACTIVITY_KIND_KERNEL));
  EXPECT_EQ(l.pending(kAll), 0u);
}

TEST(CorrelationLedger, EarliestLaunchCallWins) {
  const std::string kernel = "LaunchKernelV2";
  CorrelationLedger l(0);
  l.noteApi(api(9, &kernel, 500), 0);
  l.noteApi(api(9, &kernel, 300), 1);
  l.noteApi(api(9, &kernel, 400), 2);
  const LaunchEntry* e = l.find(9);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->launchApi, 1);
  EXPECT_EQ(e->launchApiStart, 300);
}

TEST(CorrelationLedger, IdsOfEarlierSessionsNeverWait) {
  const std::string kernel = "LaunchKernelV2", sync = "StreamSynchronize";
  CorrelationLedger l(100);  // earlier sessions saw ids up to 100
  l.noteApi(api(100, &kernel), 0);
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1, 50});
  l.noteApi(api(90, &sync), 1);  // a call carrying its thread's id from an earlier session
  EXPECT_FALSE(l.knowsLaunches());
  EXPECT_EQ(l.pending(kAll), 0u);
  EXPECT_EQ(l.find(100), nullptr);
  EXPECT_EQ(l.find(90), nullptr);
  EXPECT_EQ(l.firstOwnId(), UINT64_MAX);
  l.noteApi(api(101, &kernel), 2);
  l.noteApi(api(105, &kernel), 3);
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
  l.noteApi(api(9, &callback), 0);
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
  l.noteDevice(device(kJunk, MSPTI_ACTIVITY_KIND_KERNEL));  // a device record names no launch
  l.noteApi(api(5000, &sync), 0);                           // a call that launches nothing
  EXPECT_EQ(l.maxCorrelationId(), 0u);
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1, kJunk});
  l.noteApi(api(kJunk, &kernel), 1);
  EXPECT_EQ(l.junkIds(), 2u);
  EXPECT_EQ(l.maxCorrelationId(), 0u);
  EXPECT_FALSE(l.knowsLaunches());
  EXPECT_EQ(l.pending(kAll), 0u);  // a junk launch never holds the drain
  l.noteApi(api(101, &kernel), 2);
  l.noteExternal({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 7, 102});
  EXPECT_EQ(l.maxCorrelationId(), 102u);
  EXPECT_EQ(l.firstOwnId(), 101u);
  // Far above the sane ids, not merely above the watermark: junk.
  l.noteApi(api(102 + CorrelationLedger::kMaxIdGap + 1, &kernel), 3);
  EXPECT_EQ(l.junkIds(), 3u);
  l.noteApi(api(102 + CorrelationLedger::kMaxIdGap, &kernel), 4);
  EXPECT_EQ(l.maxCorrelationId(), 102 + CorrelationLedger::kMaxIdGap);
  EXPECT_EQ(l.junkIds(), 3u);
}

// Over the store's cap a device record still ends its launch's wait, but adds no entry.
TEST(CorrelationLedger, DeviceRecordsNotKeptEndWaitsWithoutEntries) {
  const std::string kernel = "LaunchKernelV2";
  CorrelationLedger l(0);
  l.noteApi(api(3, &kernel), 0);
  EXPECT_EQ(l.pending(kAll), 1u);
  l.noteDeviceIfKnown(device(3, MSPTI_ACTIVITY_KIND_KERNEL));
  l.noteDeviceIfKnown(device(4, MSPTI_ACTIVITY_KIND_KERNEL));
  EXPECT_EQ(l.pending(kAll), 0u);
  EXPECT_EQ(l.size(), 1u);
}

}  // namespace
}  // namespace torch_mspti::test
