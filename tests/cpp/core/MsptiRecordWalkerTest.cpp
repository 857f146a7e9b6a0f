// MsptiRecordWalker: every activity kind MSPTI defines is sized and counted; the four device
// kinds, the four API kinds and EXTERNAL_CORRELATION are copied out field by field; an unknown
// kind or a truncated record stops the walk with every byte accounted for. Records are packed by
// RecordBuilder from the documented offsets (mspti.md 3.4), not from our declarations.
#include <gtest/gtest.h>

#include <string>

#include "MsptiRecordWalker.h"
#include "RecordBuilder.h"

namespace torch_mspti::test {
namespace {

namespace L = layout;

WalkResult walk(const RecordBuilder& b, size_t valid, NameTable* names) {
  MsptiRecordWalker walker;
  WalkResult out;
  auto copy = b.exactCopy(valid);  // nothing readable past validSize
  walker.walk(copy.get(), valid, names, out);
  return out;
}

TEST(MsptiRecordWalker, EveryKindIsSizedAndCounted) {
  RecordBuilder b;
  b.marker(100, 7, "m", nullptr)
      .kernel(10, 20, 0, 1, 5, "k")
      .api(1, 2, 3, 4, 5, "a", L::kApi)
      .raw(L::kHccl, L::hccl::kSize)
      .raw(L::kMemory, L::memory::kSize)
      .copy(L::kMemset, {.start = 30, .end = 40, .correlationId = 6})
      .copy(L::kMemcpy, {.start = 50, .end = 60, .correlationId = 7})
      .external(L::kCustom0, 11, 5)
      .communication({.start = 70, .end = 80, .correlationId = 8})
      .api(1, 2, 3, 4, 9, "acl", L::kAclApi)
      .api(1, 2, 3, 4, 9, "node", L::kNodeApi)
      .api(1, 2, 3, 4, 9, "rt", L::kRuntimeApi);
  size_t expectedBytes = 0;
  for (uint32_t k = 1; k < L::kKindCount; ++k) expectedBytes += L::recordSize(k);
  ASSERT_EQ(b.size(), expectedBytes);
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  EXPECT_FALSE(out.abandoned);
  EXPECT_EQ(out.abandonedBytes, 0u);
  EXPECT_EQ(out.records, 12u);
  EXPECT_EQ(out.recordsByKind[0], 0u);
  for (uint32_t k = 1; k < L::kKindCount; ++k) EXPECT_EQ(out.recordsByKind[k], 1u) << "kind " << k;
  EXPECT_EQ(out.devices.size(), 4u);  // kernel, memset, memcpy, communication
  EXPECT_EQ(out.apis.size(), 4u);
  EXPECT_EQ(out.externals.size(), 1u);
  EXPECT_EQ(out.memory.size(), 1u);
}

TEST(MsptiRecordWalker, MemoryFields) {
  RecordBuilder b;
  b.memory(1, 0x124000200000ull, 2u << 20, 1000, 1500, 77, 3, 7);  // memoryKind outside the enum
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  ASSERT_EQ(out.memory.size(), 1u);
  const MemoryRecord& m = out.memory[0];
  EXPECT_EQ(m.operation, 1u);
  EXPECT_EQ(m.memoryKind, 7u);  // read as an integer: any value may sit in a buffer
  EXPECT_EQ(m.address, 0x124000200000ull);
  EXPECT_EQ(m.bytes, 2u << 20);
  EXPECT_EQ(m.start, 1000);
  EXPECT_EQ(m.end, 1500);
  EXPECT_EQ(m.correlationId, 77u);
  EXPECT_EQ(m.deviceId, 3u);
  EXPECT_EQ(m.processId, 4242u);
  EXPECT_EQ(m.streamId, 0xFFFFFFFFu);
}

TEST(MsptiRecordWalker, KernelFields) {
  RecordBuilder b;
  b.kernel(1'780'000'000'000'000'000, 1'780'000'000'000'001'000, 3, 17, 4242, "MatMul", "KERNEL_AIVEC");
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  ASSERT_EQ(out.devices.size(), 1u);
  const DeviceRecord& r = out.devices[0];
  EXPECT_EQ(r.kind, L::kKernel);
  EXPECT_EQ(r.start, 1'780'000'000'000'000'000);
  EXPECT_EQ(r.end, 1'780'000'000'000'001'000);
  EXPECT_EQ(r.deviceId, 3u);
  EXPECT_EQ(r.streamId, 17u);
  EXPECT_EQ(r.correlationId, 4242u);
  ASSERT_TRUE(r.name && r.detail);
  EXPECT_EQ(*r.name, "MatMul");
  EXPECT_EQ(*r.detail, "KERNEL_AIVEC");
}

TEST(MsptiRecordWalker, CommunicationFields) {
  RecordBuilder b;
  b.communication({.start = 1000,
                   .end = 3000,
                   .deviceId = 2,
                   .streamId = 9,
                   .correlationId = 77,
                   .name = "hcom_allReduce__1_0_1",
                   .detail = "RING",
                   .group = "world",
                   .subkind = 4,
                   .count = 1 << 20});
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  ASSERT_EQ(out.devices.size(), 1u);
  const DeviceRecord& r = out.devices[0];
  EXPECT_EQ(r.kind, L::kCommunication);
  EXPECT_EQ(r.start, 1000);
  EXPECT_EQ(r.end, 3000);
  EXPECT_EQ(r.deviceId, 2u);
  EXPECT_EQ(r.streamId, 9u);
  EXPECT_EQ(r.correlationId, 77u);
  EXPECT_EQ(r.subkind, 4u);
  EXPECT_EQ(r.count, uint64_t{1} << 20);
  EXPECT_EQ(*r.name, "hcom_allReduce__1_0_1");
  EXPECT_EQ(*r.detail, "RING");
  EXPECT_EQ(*r.group, "world");
}

TEST(MsptiRecordWalker, MemcpyAndMemsetFields) {
  RecordBuilder b;
  b.copy(L::kMemcpy, {.start = 10,
                      .end = 20,
                      .deviceId = 1,
                      .streamId = 5,
                      .correlationId = 31,
                      .subkind = 2,
                      .count = 4096,
                      .isAsync = 1})
      .copy(L::kMemset, {.start = 30,
                         .end = 45,
                         .deviceId = 1,
                         .streamId = 6,
                         .correlationId = 32,
                         .subkind = 0xAB,
                         .count = 512,
                         .isAsync = 0});
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  ASSERT_EQ(out.devices.size(), 2u);
  const DeviceRecord& c = out.devices[0];
  EXPECT_EQ(c.kind, L::kMemcpy);
  EXPECT_EQ(c.subkind, 2u);  // HTOD
  EXPECT_EQ(c.count, 4096u);
  EXPECT_EQ(c.start, 10);
  EXPECT_EQ(c.end, 20);
  EXPECT_EQ(c.deviceId, 1u);
  EXPECT_EQ(c.streamId, 5u);
  EXPECT_EQ(c.correlationId, 31u);
  EXPECT_TRUE(c.isAsync);
  const DeviceRecord& s = out.devices[1];
  EXPECT_EQ(s.kind, L::kMemset);
  EXPECT_EQ(s.subkind, 0xABu);  // the value written
  EXPECT_EQ(s.count, 512u);
  EXPECT_EQ(s.start, 30);
  EXPECT_EQ(s.end, 45);
  EXPECT_EQ(s.streamId, 6u);
  EXPECT_EQ(s.correlationId, 32u);
  EXPECT_FALSE(s.isAsync);
}

TEST(MsptiRecordWalker, ApiKindsAndExternalCorrelationFields) {
  RecordBuilder b;
  const uint32_t kinds[] = {L::kApi, L::kAclApi, L::kNodeApi, L::kRuntimeApi};
  for (uint32_t i = 0; i < 4; ++i) b.api(100 + i, 200 + i, 4000 + i, 5000 + i, 60 + i, "LaunchKernelV2", kinds[i]);
  b.external(L::kCustom0, 123456789012ull, 61).external(L::kCustom1, 42, 62).external(0x7777, 1, 63);
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  ASSERT_EQ(out.apis.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    const ApiRecord& a = out.apis[i];
    EXPECT_EQ(a.kind, kinds[i]);
    EXPECT_EQ(a.start, static_cast<int64_t>(100 + i));
    EXPECT_EQ(a.end, static_cast<int64_t>(200 + i));
    EXPECT_EQ(a.processId, 4000 + i);
    EXPECT_EQ(a.threadId, 5000 + i);
    EXPECT_EQ(a.correlationId, 60 + i);
    EXPECT_EQ(*a.name, "LaunchKernelV2");
  }
  ASSERT_EQ(out.externals.size(), 3u);
  EXPECT_EQ(out.externals[0].externalKind, L::kCustom0);
  EXPECT_EQ(out.externals[0].externalId, 123456789012ull);
  EXPECT_EQ(out.externals[0].correlationId, 61u);
  EXPECT_EQ(out.externals[1].externalKind, L::kCustom1);
  EXPECT_EQ(out.externals[2].externalKind, 0x7777u);  // any value survives (read as an integer)
}

TEST(MsptiRecordWalker, UnknownKindStopsTheWalkAndIsCounted) {
  RecordBuilder b;
  b.kernel(1, 2, 0, 1, 1, "before").raw(99, 56).kernel(3, 4, 0, 1, 2, "after");
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  EXPECT_TRUE(out.abandoned);
  EXPECT_EQ(out.abandonedKind, 99u);
  EXPECT_EQ(out.abandonedBytes, b.size() - L::kernel::kSize);  // the unknown record and all after it
  EXPECT_EQ(out.records, 1u);
  ASSERT_EQ(out.devices.size(), 1u);
  EXPECT_EQ(*out.devices[0].name, "before");
}

TEST(MsptiRecordWalker, InvalidAndOutOfRangeKindsStopTheWalk) {
  for (uint32_t kind : {0u, 13u, 0x7fffffffu, 0xffffffffu}) {
    RecordBuilder b;
    b.api(1, 2, 3, 4, 5, "a").raw(kind, 64);
    const WalkResult out = walk(b, b.size(), nullptr);
    EXPECT_TRUE(out.abandoned) << kind;
    EXPECT_EQ(out.abandonedKind, kind);
    EXPECT_EQ(out.abandonedBytes, 64u) << kind;
    EXPECT_EQ(out.records, 1u) << kind;
  }
}

TEST(MsptiRecordWalker, TruncatedRecordIsNotReadAndIsCounted) {
  RecordBuilder b;
  b.external(L::kCustom0, 1, 1).kernel(10, 20, 0, 1, 1, "cut");
  // validSize ends 13 bytes into the kernel's name pointer: the kernel must not be read (ASan
  // would flag a read of the missing bytes: the copy holds exactly validSize bytes).
  const size_t valid = b.size() - 13;
  NameTable names;
  const WalkResult out = walk(b, valid, &names);
  EXPECT_TRUE(out.abandoned);
  EXPECT_EQ(out.abandonedKind, L::kKernel);
  EXPECT_EQ(out.abandonedBytes, L::kernel::kSize - 13);
  EXPECT_EQ(out.externals.size(), 1u);
  EXPECT_TRUE(out.devices.empty());
  // A tail too short to hold a kind: counted, kind 0.
  const WalkResult tail = walk(b, L::external::kSize + 3, &names);
  EXPECT_TRUE(tail.abandoned);
  EXPECT_EQ(tail.abandonedKind, 0u);
  EXPECT_EQ(tail.abandonedBytes, 3u);
}

TEST(MsptiRecordWalker, NullBufferAndCountOnlyWalks) {
  MsptiRecordWalker walker;
  WalkResult out;
  walker.walk(nullptr, 4096, nullptr, out);
  EXPECT_EQ(out.records, 0u);
  EXPECT_FALSE(out.abandoned);
  RecordBuilder b;
  b.kernel(1, 2, 0, 1, 1, "k").api(1, 2, 3, 4, 1, "a");
  const WalkResult counted = walk(b, b.size(), nullptr);  // no name table: counted, not kept
  EXPECT_EQ(counted.records, 2u);
  EXPECT_EQ(counted.recordsByKind[L::kKernel], 1u);
  EXPECT_TRUE(counted.devices.empty());
  EXPECT_TRUE(counted.apis.empty());
}

TEST(MsptiRecordWalker, NamesAreInternedSafeAndNullIsUnknown) {
  RecordBuilder b;
  const std::string bad = "q\"uote\\ctl\x01 \xff";
  b.kernel(1, 2, 0, 1, 1, bad.c_str(), nullptr).kernel(3, 4, 0, 1, 2, bad.c_str(), nullptr);
  NameTable names;
  const WalkResult out = walk(b, b.size(), &names);
  ASSERT_EQ(out.devices.size(), 2u);
  EXPECT_EQ(*out.devices[0].name, "q'uote/ctl  ?");
  EXPECT_EQ(out.devices[0].name, out.devices[1].name);  // one copy per distinct string
  EXPECT_EQ(*out.devices[0].detail, "unknown");
  EXPECT_EQ(names.size(), 2u);
}

}  // namespace
}  // namespace torch_mspti::test

namespace torch_mspti::test {
namespace {

TEST(MsptiRecordWalker, MarkerFields) {
  RecordBuilder b;
  b.marker(/*flag START_WITH_DEVICE*/ 1u << 4, /*device*/ 1, 1'780'000'000'000'000'500, 99, 3, 17, "step", "train")
      .marker(/*flag END*/ 1u << 2, /*host*/ 0, 1'780'000'000'000'000'900, 98, 4242, 4243, nullptr, nullptr)
      .marker(/*flag END*/ 1u << 2, /*host*/ 0, 1'780'000'000'000'000'950, 97, 4242, 4243, "", "");
  NameTable names;
  WalkResult out;
  MsptiRecordWalker().walk(b.data(), b.size(), &names, out);
  ASSERT_EQ(out.markers.size(), 3u);
  const MarkerRecord& d = out.markers[0];
  EXPECT_EQ(d.flag, 1u << 4);
  EXPECT_EQ(d.sourceKind, 1u);
  EXPECT_EQ(d.timestamp, 1'780'000'000'000'000'500);
  EXPECT_EQ(d.id, 99u);
  EXPECT_EQ(d.first, 3u);
  EXPECT_EQ(d.second, 17u);
  ASSERT_TRUE(d.name && d.domain);
  EXPECT_EQ(*d.name, "step");
  EXPECT_EQ(*d.domain, "train");
  const MarkerRecord& h = out.markers[1];
  EXPECT_EQ(h.flag, 1u << 2);
  EXPECT_EQ(h.sourceKind, 0u);
  EXPECT_EQ(h.first, 4242u);
  EXPECT_EQ(h.second, 4243u);
  EXPECT_EQ(h.name, nullptr);  // no message
  ASSERT_TRUE(h.domain);
  EXPECT_EQ(*h.domain, "default");  // a NULL domain is the default domain
  const MarkerRecord& e = out.markers[2];
  EXPECT_EQ(e.name, nullptr);  // "" (MSPTI's end records): neither message nor domain given
  EXPECT_EQ(e.domain, nullptr);
  EXPECT_EQ(out.recordsByKind[1], 3u);
}

}  // namespace
}  // namespace torch_mspti::test
