// MSPTI's activity record layouts as docs/mspti.md 3.2 and 3.4 document them, written out
// as literal numbers: kinds by value, each record's size and the offset of each field the plugin
// reads. Test code (RecordBuilder, the record-walker fuzzer's oracle) packs and checks records
// with these numbers instead of the plugin's declarations (third_party/mspti) or its kind table
// (src/common/ActivityKinds.h), so a wrong declaration or table entry cannot hide itself.
// Records are packed (8-byte fields may sit at offset 4), sizeof rounded up to 8, back to back
// (mspti.md 3.1). String fields are `const char*` (8 bytes on LP64).
// Thread-safety: constants.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torch_mspti::test::layout {

// msptiActivityKind values (mspti.md 3.2).
enum Kind : uint32_t {
  kInvalid = 0,
  kMarker = 1,
  kKernel = 2,
  kApi = 3,
  kHccl = 4,
  kMemory = 5,
  kMemset = 6,
  kMemcpy = 7,
  kExternalCorrelation = 8,
  kCommunication = 9,
  kAclApi = 10,
  kNodeApi = 11,
  kRuntimeApi = 12,
  kKindCount = 13,
};

// msptiExternalCorrelationKind CUSTOM0 / CUSTOM1 (mspti.md 3.3).
inline constexpr uint32_t kCustom0 = 2;
inline constexpr uint32_t kCustom1 = 3;

namespace kernel {  // msptiActivityKernel
inline constexpr size_t kSize = 56, kStart = 4, kEnd = 12, kDeviceId = 20, kStreamId = 24, kCorrelationId = 28,
                        kType = 36, kName = 44;
}
namespace api {  // msptiActivityApi (API, ACL_API, NODE_API, RUNTIME_API)
inline constexpr size_t kSize = 48, kStart = 4, kEnd = 12, kProcessId = 20, kThreadId = 24, kCorrelationId = 28,
                        kName = 36;
}
namespace external {  // msptiActivityExternalCorrelation
inline constexpr size_t kSize = 24, kExternalKind = 4, kExternalId = 8, kCorrelationId = 16;
}
namespace communication {  // msptiActivityCommunication
inline constexpr size_t kSize = 72, kDataType = 4, kCount = 8, kDeviceId = 16, kStreamId = 20, kStart = 24, kEnd = 32,
                        kAlgType = 40, kName = 48, kCommName = 56, kCorrelationId = 64;
}
namespace copy {  // msptiActivityMemcpy (kSubkind = copyKind) and msptiActivityMemset (kSubkind = value)
inline constexpr size_t kSize = 56, kSubkind = 4, kBytes = 8, kStart = 16, kEnd = 24, kDeviceId = 32, kStreamId = 36,
                        kCorrelationId = 40, kIsAsync = 48;
}
namespace marker {  // msptiActivityMarker
inline constexpr size_t kSize = 56, kFlag = 4, kSourceKind = 8, kTimestamp = 12, kId = 20, kObjectId = 28, kName = 36,
                        kDomain = 44;
}
namespace hccl {  // msptiActivityHccl
inline constexpr size_t kSize = 56, kStart = 4, kEnd = 12, kDeviceId = 20, kStreamId = 24, kBandWidth = 28, kName = 36,
                        kCommName = 44;
}
namespace memory {  // msptiActivityMemory
inline constexpr size_t kSize = 64, kOperationType = 4, kMemoryKind = 8, kCorrelationId = 12, kStart = 20, kEnd = 28,
                        kAddress = 36, kBytes = 44, kProcessId = 52, kDeviceId = 56, kStreamId = 60;
}

// Size of a record of `kind`, 0 for INVALID and every value MSPTI does not define.
constexpr size_t recordSize(uint32_t kind) {
  switch (kind) {
    case kMarker: return marker::kSize;
    case kKernel: return kernel::kSize;
    case kApi:
    case kAclApi:
    case kNodeApi:
    case kRuntimeApi: return api::kSize;
    case kHccl: return hccl::kSize;
    case kMemory: return memory::kSize;
    case kMemset:
    case kMemcpy: return copy::kSize;
    case kExternalCorrelation: return external::kSize;
    case kCommunication: return communication::kSize;
    default: return 0;
  }
}

}  // namespace torch_mspti::test::layout
