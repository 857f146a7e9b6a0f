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
  EXPECT_EQ(classifyApiName(""), LaunchClass::kNone);
  EXPECT_EQ(classOfDeviceKind(MSPTI_ACTIVITY_KIND_KERNEL), LaunchClass::kKernel);
  EXPECT_EQ(classOfDeviceKind(MSPTI_ACTIVITY_KIND_COMMUNICATION), LaunchClass::kCommunication);
  EXPECT_EQ(classOfDeviceKind(MSPTI_ACTIVITY_KIND_MEMCPY), LaunchClass::kMemcpy);
  EXPECT_EQ(classOfDeviceKind(MSPTI_ACTIVITY_KIND_MEMSET), LaunchClass::kMemset);
  EXPECT_EQ(classOfDeviceKind(MSPTI_ACTIVITY_KIND_API), LaunchClass::kNone);
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

}  // namespace
}  // namespace torch_mspti::test
