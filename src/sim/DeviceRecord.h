// One device-side record as MSPTI's parsers write it: KERNEL, COMMUNICATION, MEMCPY or MEMSET
// (mspti.md 3.4). The four packed layouts put the same facts (start, end, device, stream,
// correlation id) at different offsets; this union holds any of them and reaches those common
// fields through one interface, so that the launch path, the driver reader and the parser handle
// every device record alike.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ActivityKinds.h"
#include "mspti/mspti_activity.h"

namespace torch_mspti::sim {

union DeviceRecord {
  msptiActivity header;  // every layout starts with its kind
  msptiActivityKernel kernel;
  msptiActivityCommunication communication;
  msptiActivityMemcpy memoryCopy;
  msptiActivityMemset memorySet;
};

// The buffer stride the kind table gives each device kind is the size of the ABI struct this
// union writes (third_party/mspti declares and pins those sizes).
// (Indexed directly: GCC's sanitizer builds do not fold pointer tests in constant expressions.)
static_assert(kActivityKinds[MSPTI_ACTIVITY_KIND_KERNEL].recordSize == sizeof(msptiActivityKernel), "KERNEL");
static_assert(kActivityKinds[MSPTI_ACTIVITY_KIND_COMMUNICATION].recordSize == sizeof(msptiActivityCommunication),
              "COMMUNICATION");
static_assert(kActivityKinds[MSPTI_ACTIVITY_KIND_MEMCPY].recordSize == sizeof(msptiActivityMemcpy), "MEMCPY");
static_assert(kActivityKinds[MSPTI_ACTIVITY_KIND_MEMSET].recordSize == sizeof(msptiActivityMemset), "MEMSET");

// Kinds a DeviceRecord can hold.
constexpr bool isDeviceRecordKind(int kind) {
  return kind == MSPTI_ACTIVITY_KIND_KERNEL || kind == MSPTI_ACTIVITY_KIND_COMMUNICATION ||
         kind == MSPTI_ACTIVITY_KIND_MEMCPY || kind == MSPTI_ACTIVITY_KIND_MEMSET;
}

// A record of `kind` (a device record kind) with every field zero.
inline DeviceRecord makeDeviceRecord(msptiActivityKind kind) {
  DeviceRecord record{};
  record.header.kind = kind;
  return record;
}

inline int kindOf(const DeviceRecord& record) { return record.header.kind; }

// Bytes the record occupies in a buffer: the kind table's stride of its kind.
inline size_t sizeOf(const DeviceRecord& record) { return recordSize(static_cast<uint32_t>(record.header.kind)); }

// Start and end as reported (ns since the epoch).
inline void setTiming(DeviceRecord& record, uint64_t start, uint64_t end) {
  switch (record.header.kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL: record.kernel.start = start, record.kernel.end = end; break;
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: record.communication.start = start, record.communication.end = end; break;
    case MSPTI_ACTIVITY_KIND_MEMCPY: record.memoryCopy.start = start, record.memoryCopy.end = end; break;
    case MSPTI_ACTIVITY_KIND_MEMSET: record.memorySet.start = start, record.memorySet.end = end; break;
    default: break;
  }
}

// Where it ran (physical device id, stream id) and the launch's correlation id.
inline void setPlacement(DeviceRecord& record, uint32_t deviceId, uint32_t streamId, uint64_t correlationId) {
  switch (record.header.kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL:
      record.kernel.ds.deviceId = deviceId;
      record.kernel.ds.streamId = streamId;
      record.kernel.correlationId = correlationId;
      break;
    case MSPTI_ACTIVITY_KIND_COMMUNICATION:
      record.communication.ds.deviceId = deviceId;
      record.communication.ds.streamId = streamId;
      record.communication.correlationId = correlationId;
      break;
    case MSPTI_ACTIVITY_KIND_MEMCPY:
      record.memoryCopy.deviceId = deviceId;
      record.memoryCopy.streamId = streamId;
      record.memoryCopy.correlationId = correlationId;
      break;
    case MSPTI_ACTIVITY_KIND_MEMSET:
      record.memorySet.deviceId = deviceId;
      record.memorySet.streamId = streamId;
      record.memorySet.correlationId = correlationId;
      break;
    default: break;
  }
}

inline uint64_t correlationIdOf(const DeviceRecord& record) {
  switch (record.header.kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL: return record.kernel.correlationId;
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return record.communication.correlationId;
    case MSPTI_ACTIVITY_KIND_MEMCPY: return record.memoryCopy.correlationId;
    case MSPTI_ACTIVITY_KIND_MEMSET: return record.memorySet.correlationId;
    default: return MSPTI_INVALID_CORRELATION_ID;
  }
}

}  // namespace torch_mspti::sim
