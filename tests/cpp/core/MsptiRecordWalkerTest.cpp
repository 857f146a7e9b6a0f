// MsptiRecordWalker: walks packed records back to back by the documented sizes, copies fields,
// interns names, and never reads at or past validSize (mspti.md 3, 11).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <mspti/mspti_activity.h>

#include "MsptiRecordWalker.h"
#include "NameTable.h"
#include "RecordBuilder.h"

namespace torch_mspti::test {
namespace {

// Our declarations must agree with the documented sizes the builder writes.
static_assert(sizeof(msptiActivityKernel) == kKernelSize);
static_assert(sizeof(msptiActivityApi) == kApiSize);
static_assert(sizeof(msptiActivityExternalCorrelation) == kExternalSize);
static_assert(sizeof(msptiActivityMarker) == kMarkerSize);
static_assert(sizeof(msptiActivityHccl) == kHcclSize);
static_assert(sizeof(msptiActivityMemory) == kMemorySize);
static_assert(sizeof(msptiActivityMemset) == kMemsetSize);
static_assert(sizeof(msptiActivityMemcpy) == kMemcpySize);
static_assert(sizeof(msptiActivityCommunication) == kCommunicationSize);

TEST(MsptiRecordWalkerTest, RecordSizesFollowTheAbi) {
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_KERNEL), kKernelSize);
  for (uint32_t k : {3u, 10u, 11u, 12u}) EXPECT_EQ(recordSize(k), kApiSize) << "kind " << k;
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), kExternalSize);
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_MARKER), kMarkerSize);
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_HCCL), kHcclSize);
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_MEMORY), kMemorySize);
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_MEMSET), kMemsetSize);
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_MEMCPY), kMemcpySize);
  EXPECT_EQ(recordSize(MSPTI_ACTIVITY_KIND_COMMUNICATION), kCommunicationSize);
  EXPECT_EQ(recordSize(0), 0u);
  EXPECT_EQ(recordSize(13), 0u);
  EXPECT_EQ(recordSize(0x7fffffff), 0u);
}

TEST(MsptiRecordWalkerTest, CopiesEveryFieldOfBackToBackRecords) {
  // Values that use all 8 bytes, so a read at the wrong (aligned) offset shows.
  const uint64_t kStart = 0x1122334455667788ull, kEnd = 0x1122334455667799ull;
  RecordBuilder b;
  b.external(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 0x0A0B0C0D0E0F1011ull, 0x0102030405060708ull)
      .api(kStart - 10, kStart - 5, 4242, 777, 0x0102030405060708ull, "LaunchKernelV2")
      .kernel(kStart, kEnd, 3, 0xFFFE, 0x0102030405060708ull, "MatMul_123", "KERNEL_AIVEC")
      .api(5, 6, 1, 2, 9, "aclnnAdd", MSPTI_ACTIVITY_KIND_ACL_API)
      .external(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 55, 9);
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(b.data(), b.size(), r);

  EXPECT_FALSE(r.abandoned);
  EXPECT_EQ(r.abandonedBytes, 0u);
  EXPECT_EQ(r.records, 5u);
  EXPECT_EQ(r.recordsByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION], 2u);
  EXPECT_EQ(r.recordsByKind[MSPTI_ACTIVITY_KIND_RUNTIME_API], 1u);
  EXPECT_EQ(r.recordsByKind[MSPTI_ACTIVITY_KIND_ACL_API], 1u);
  EXPECT_EQ(r.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL], 1u);

  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelRecord& k = r.kernels[0];
  EXPECT_EQ(static_cast<uint64_t>(k.start), kStart);
  EXPECT_EQ(static_cast<uint64_t>(k.end), kEnd);
  EXPECT_EQ(k.deviceId, 3u);
  EXPECT_EQ(k.streamId, 0xFFFEu);
  EXPECT_EQ(k.correlationId, 0x0102030405060708ull);
  ASSERT_NE(k.name, nullptr);
  ASSERT_NE(k.type, nullptr);
  EXPECT_EQ(*k.name, "MatMul_123");
  EXPECT_EQ(*k.type, "KERNEL_AIVEC");

  ASSERT_EQ(r.apis.size(), 2u);
  EXPECT_EQ(static_cast<uint64_t>(r.apis[0].start), kStart - 10);
  EXPECT_EQ(static_cast<uint64_t>(r.apis[0].end), kStart - 5);
  EXPECT_EQ(r.apis[0].processId, 4242u);
  EXPECT_EQ(r.apis[0].threadId, 777u);
  EXPECT_EQ(r.apis[0].correlationId, 0x0102030405060708ull);
  EXPECT_EQ(*r.apis[0].name, "LaunchKernelV2");
  EXPECT_EQ(r.apis[1].correlationId, 9u);
  EXPECT_EQ(*r.apis[1].name, "aclnnAdd");

  ASSERT_EQ(r.externals.size(), 2u);
  EXPECT_EQ(r.externals[0].externalKind, static_cast<uint32_t>(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0));
  EXPECT_EQ(r.externals[0].externalId, 0x0A0B0C0D0E0F1011ull);
  EXPECT_EQ(r.externals[0].correlationId, 0x0102030405060708ull);
  EXPECT_EQ(r.externals[1].externalKind, static_cast<uint32_t>(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1));
  EXPECT_EQ(r.externals[1].externalId, 55u);
}

TEST(MsptiRecordWalkerTest, OtherKindsAreSizedCountedAndSkipped) {
  RecordBuilder b;
  b.raw(MSPTI_ACTIVITY_KIND_MARKER, kMarkerSize)
      .raw(MSPTI_ACTIVITY_KIND_MEMCPY, kMemcpySize)
      .raw(MSPTI_ACTIVITY_KIND_COMMUNICATION, kCommunicationSize)
      .raw(MSPTI_ACTIVITY_KIND_MEMORY, kMemorySize)
      .raw(MSPTI_ACTIVITY_KIND_HCCL, kHcclSize)
      .raw(MSPTI_ACTIVITY_KIND_MEMSET, kMemsetSize)
      .kernel(100, 200, 0, 1, 7, "after_others");
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(b.data(), b.size(), r);
  EXPECT_FALSE(r.abandoned);
  EXPECT_EQ(r.records, 7u);
  for (uint32_t k : {1u, 4u, 5u, 6u, 7u, 9u}) EXPECT_EQ(r.recordsByKind[k], 1u) << "kind " << k;
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(*r.kernels[0].name, "after_others");
  EXPECT_EQ(r.kernels[0].correlationId, 7u);
  EXPECT_TRUE(r.apis.empty());
  EXPECT_TRUE(r.externals.empty());
}

TEST(MsptiRecordWalkerTest, NamesAreCopiedAndInterned) {
  char name[] = "Softmax_7";
  char sameText[] = "Softmax_7";
  RecordBuilder b;
  b.kernel(1, 2, 0, 0, 1, name).kernel(3, 4, 0, 0, 2, name).kernel(5, 6, 0, 0, 3, sameText);
  b.kernel(7, 8, 0, 0, 4, nullptr, nullptr);
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(b.data(), b.size(), r);
  ASSERT_EQ(r.kernels.size(), 4u);
  // Same MSPTI pointer twice: one copy. Equal text from another pointer: the same interned copy.
  EXPECT_EQ(r.kernels[0].name, r.kernels[1].name);
  EXPECT_EQ(r.kernels[0].name, r.kernels[2].name);
  EXPECT_EQ(r.kernels[0].type, r.kernels[1].type);
  // NULL name and type read as "unknown".
  ASSERT_NE(r.kernels[3].name, nullptr);
  ASSERT_NE(r.kernels[3].type, nullptr);
  EXPECT_EQ(*r.kernels[3].name, "unknown");
  EXPECT_EQ(*r.kernels[3].type, "unknown");
  // The walker kept copies: MSPTI's memory may change once the buffer is handed back.
  std::memset(name, 'X', sizeof(name) - 1);
  EXPECT_EQ(*r.kernels[0].name, "Softmax_7");

  // A second buffer reusing the (now different) pointer gets the new text, not a stale cache hit.
  RecordBuilder b2;
  b2.kernel(1, 2, 0, 0, 5, name);
  WalkResult r2;
  walker.walk(b2.data(), b2.size(), r2);
  ASSERT_EQ(r2.kernels.size(), 1u);
  EXPECT_EQ(*r2.kernels[0].name, std::string(sizeof(name) - 1, 'X'));
}

TEST(MsptiRecordWalkerTest, ApiRecordWithNullNameIsUnknown) {
  RecordBuilder b;
  b.api(1, 2, 3, 4, 5, nullptr);
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(b.data(), b.size(), r);
  ASSERT_EQ(r.apis.size(), 1u);
  EXPECT_EQ(*r.apis[0].name, "unknown");
}

TEST(MsptiRecordWalkerTest, UnknownKindMidBufferAbandonsTheRest) {
  for (uint32_t bad : {0u, 13u, 99u, 0xFFFFFFFFu}) {
    RecordBuilder b;
    b.kernel(1, 2, 0, 0, 1, "before").raw(bad, 40).kernel(3, 4, 0, 0, 2, "after").external(2, 3, 4);
    MsptiRecordWalker walker;
    WalkResult r;
    walker.walk(b.data(), b.size(), r);
    EXPECT_TRUE(r.abandoned) << "kind " << bad;
    EXPECT_EQ(r.abandonedKind, bad);
    EXPECT_EQ(r.abandonedBytes, b.size() - kKernelSize);
    EXPECT_EQ(r.records, 1u);
    ASSERT_EQ(r.kernels.size(), 1u);
    EXPECT_EQ(*r.kernels[0].name, "before");
    EXPECT_TRUE(r.externals.empty());
  }
}

// The buffers below are exact-size heap copies: under ASan any read at or past validSize fails.
TEST(MsptiRecordWalkerTest, UnknownKindInAnExactSizeBufferIsNeverReadPast) {
  // The simulator's unknown_kind_every fault: a 56-byte record of kind 99 mid-buffer, and last.
  RecordBuilder mid;
  mid.kernel(1, 2, 0, 0, 1, "before").raw(99, kKernelSize).kernel(3, 4, 0, 0, 2, "after");
  RecordBuilder last;
  last.kernel(1, 2, 0, 0, 1, "before").raw(99, 4);  // only the 4-byte kind is inside validSize
  for (RecordBuilder* b : {&mid, &last}) {
    auto buf = b->exactCopy(b->size());
    MsptiRecordWalker walker;
    WalkResult r;
    walker.walk(buf.get(), b->size(), r);
    EXPECT_TRUE(r.abandoned);
    EXPECT_EQ(r.abandonedKind, 99u);
    EXPECT_EQ(r.abandonedBytes, b->size() - kKernelSize);
    ASSERT_EQ(r.kernels.size(), 1u);
    EXPECT_EQ(*r.kernels[0].name, "before");
  }
}

TEST(MsptiRecordWalkerTest, TruncatedLastRecordIsAbandonedWithoutReadingPastValidSize) {
  RecordBuilder b;
  b.external(2, 11, 1).kernel(10, 20, 0, 0, 1, "cut");
  for (size_t cut : {size_t{1}, size_t{3}, size_t{4}, size_t{8}, size_t{40}, kKernelSize - 1}) {
    const size_t valid = kExternalSize + cut;
    auto buf = b.exactCopy(valid);
    MsptiRecordWalker walker;
    WalkResult r;
    walker.walk(buf.get(), valid, r);
    EXPECT_TRUE(r.abandoned) << "cut " << cut;
    EXPECT_EQ(r.abandonedBytes, cut);
    EXPECT_EQ(r.abandonedKind, cut >= 4 ? static_cast<uint32_t>(MSPTI_ACTIVITY_KIND_KERNEL) : 0u);
    EXPECT_EQ(r.records, 1u);
    EXPECT_EQ(r.externals.size(), 1u);
    EXPECT_TRUE(r.kernels.empty());
  }
  // Exactly the full records: nothing abandoned, still nothing read past the end.
  auto full = b.exactCopy(b.size());
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(full.get(), b.size(), r);
  EXPECT_FALSE(r.abandoned);
  EXPECT_EQ(r.kernels.size(), 1u);
}

TEST(MsptiRecordWalkerTest, NullOrEmptyBufferYieldsNothing) {
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(nullptr, 4096, r);
  EXPECT_EQ(r.records, 0u);
  EXPECT_FALSE(r.abandoned);
  RecordBuilder b;
  b.kernel(1, 2, 0, 0, 1, "k");
  walker.walk(b.data(), 0, r);
  EXPECT_EQ(r.records, 0u);
  EXPECT_FALSE(r.abandoned);
}

TEST(MsptiRecordWalkerTest, ResultsAccumulateUntilCleared) {
  RecordBuilder b;
  b.kernel(1, 2, 0, 0, 1, "k").raw(77, 8);
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(b.data(), b.size(), r);
  walker.walk(b.data(), b.size(), r);
  EXPECT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.records, 2u);
  EXPECT_EQ(r.abandonedBytes, 16u);
  r.clear();
  EXPECT_EQ(r.records, 0u);
  EXPECT_TRUE(r.kernels.empty());
  EXPECT_FALSE(r.abandoned);
  EXPECT_EQ(r.abandonedBytes, 0u);
  EXPECT_EQ(r.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL], 0u);
}

TEST(MsptiRecordWalkerTest, HundredsOfDistinctNamesInOneBufferAreEachInternedCorrectly) {
  // More distinct name pointers than the walker's initial name cache holds (it grows).
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) names.push_back("aclnnKernel_" + std::to_string(i));
  RecordBuilder b;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 300; ++i) b.kernel(1, 2, 0, 0, static_cast<uint64_t>(i + 1), names[i].c_str());
  MsptiRecordWalker walker;
  WalkResult r;
  walker.walk(b.data(), b.size(), r);
  ASSERT_EQ(r.kernels.size(), 600u);
  for (int i = 0; i < 600; ++i) {
    EXPECT_EQ(*r.kernels[i].name, names[i % 300]);
    EXPECT_EQ(r.kernels[i].name, NameTable::instance().intern(names[i % 300].c_str()));
  }
}

}  // namespace
}  // namespace torch_mspti::test
