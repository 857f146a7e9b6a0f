#include "MsptiRecordWalker.h"

#include <cstddef>
#include <cstring>

namespace torch_mspti {

size_t recordSize(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_MARKER: return sizeof(msptiActivityMarker);
    case MSPTI_ACTIVITY_KIND_KERNEL: return sizeof(msptiActivityKernel);
    case MSPTI_ACTIVITY_KIND_API:
    case MSPTI_ACTIVITY_KIND_ACL_API:
    case MSPTI_ACTIVITY_KIND_NODE_API:
    case MSPTI_ACTIVITY_KIND_RUNTIME_API: return sizeof(msptiActivityApi);
    case MSPTI_ACTIVITY_KIND_HCCL: return sizeof(msptiActivityHccl);
    case MSPTI_ACTIVITY_KIND_MEMORY: return sizeof(msptiActivityMemory);
    case MSPTI_ACTIVITY_KIND_MEMSET: return sizeof(msptiActivityMemset);
    case MSPTI_ACTIVITY_KIND_MEMCPY: return sizeof(msptiActivityMemcpy);
    case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(msptiActivityExternalCorrelation);
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return sizeof(msptiActivityCommunication);
    default: return 0;
  }
}

void WalkResult::clear() {
  kernels.clear();
  apis.clear();
  externals.clear();
  std::memset(recordsByKind, 0, sizeof(recordsByKind));
  records = 0;
  abandonedBytes = 0;
  abandonedKind = 0;
  abandoned = false;
}

namespace {

// Counts the records the walk below will keep and reserves room for them: a completion's batch
// usually starts empty (MSPTI runs each completion on a new thread, mspti.md 5.2, and the batch is
// thread_local), and growing vectors of 100k records by doubling copies them about twice over.
// Stops where the walk would stop.
void reserveFor(const uint8_t* buffer, size_t validSize, WalkResult& out) {
  size_t kernels = 0, apis = 0, externals = 0, pos = 0;
  while (validSize - pos >= sizeof(uint32_t)) {
    uint32_t kind = 0;
    std::memcpy(&kind, buffer + pos, sizeof(kind));
    const size_t size = recordSize(kind);
    if (size == 0 || size > validSize - pos) break;
    switch (kind) {
      case MSPTI_ACTIVITY_KIND_KERNEL: ++kernels; break;
      case MSPTI_ACTIVITY_KIND_API:
      case MSPTI_ACTIVITY_KIND_ACL_API:
      case MSPTI_ACTIVITY_KIND_NODE_API:
      case MSPTI_ACTIVITY_KIND_RUNTIME_API: ++apis; break;
      case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: ++externals; break;
      default: break;
    }
    pos += size;
  }
  out.kernels.reserve(out.kernels.size() + kernels);
  out.apis.reserve(out.apis.size() + apis);
  out.externals.reserve(out.externals.size() + externals);
}

}  // namespace

void MsptiRecordWalker::walk(const uint8_t* buffer, size_t validSize, WalkResult& out) {
  if (!buffer) return;
  names_.clear();  // pointers are only known to be stable within one buffer
  reserveFor(buffer, validSize, out);
  size_t pos = 0;
  while (pos < validSize) {
    uint32_t kind = 0;
    if (validSize - pos < sizeof(kind)) {
      out.abandoned = true;
      out.abandonedBytes += validSize - pos;
      break;
    }
    std::memcpy(&kind, buffer + pos, sizeof(kind));
    const size_t size = recordSize(kind);
    if (size == 0 || size > validSize - pos) {
      out.abandoned = true;
      out.abandonedKind = kind;
      out.abandonedBytes += validSize - pos;
      break;
    }
    const uint8_t* p = buffer + pos;
    // Copy into an aligned local: packed fields (8-byte values at offset 4) are then read safely.
    switch (kind) {
      case MSPTI_ACTIVITY_KIND_KERNEL: {
        msptiActivityKernel k;
        std::memcpy(&k, p, sizeof(k));
        KernelRecord& r = out.kernels.emplace_back();
        r.start = static_cast<int64_t>(k.start);
        r.end = static_cast<int64_t>(k.end);
        r.correlationId = k.correlationId;
        r.deviceId = k.ds.deviceId;
        r.streamId = k.ds.streamId;
        r.name = names_.lookup(k.name);
        r.type = names_.lookup(k.type);
        break;
      }
      case MSPTI_ACTIVITY_KIND_API:
      case MSPTI_ACTIVITY_KIND_ACL_API:
      case MSPTI_ACTIVITY_KIND_NODE_API:
      case MSPTI_ACTIVITY_KIND_RUNTIME_API: {
        msptiActivityApi a;
        std::memcpy(&a, p, sizeof(a));
        out.apis.push_back({static_cast<int64_t>(a.start), static_cast<int64_t>(a.end), a.pt.processId, a.pt.threadId,
                            a.correlationId, names_.lookup(a.name)});
        break;
      }
      case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        msptiActivityExternalCorrelation e;
        std::memcpy(&e, p, sizeof(e));
        // The kind is read as an integer: a buffer may hold any value there, and loading an enum
        // outside its range is undefined behaviour (found by tests/fuzz with UBSan).
        uint32_t externalKind = 0;
        std::memcpy(&externalKind, p + offsetof(msptiActivityExternalCorrelation, externalKind), sizeof(externalKind));
        out.externals.push_back({externalKind, e.externalId, e.correlationId});
        break;
      }
      default: break;  // sized and counted, not kept
    }
    ++out.recordsByKind[kind];
    ++out.records;
    pos += size;
  }
}

}  // namespace torch_mspti
