// Owned, plain copies of the MSPTI records the plugin keeps after a buffer is recycled.
// Times are ns since the Unix epoch (CLOCK_REALTIME) as MSPTI reports them (mspti.md 4); API
// records may be on another clock in some builds (HostClock.h decides). Strings are interned in
// the session's NameTable and stay valid for the session.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include <mspti/mspti_activity.h>

namespace torch_mspti {

// The device work a launch call starts (the kind table, KindHandlers.h, says which kind's records
// complete which class).
// kMemory: a runtime allocation or release call, answered by its MEMORY record.
enum class LaunchClass : uint8_t { kNone = 0, kKernel, kCommunication, kMemcpy, kMemset, kMemory, kCount };

// Work that ran on a device stream: a KERNEL, COMMUNICATION, MEMCPY or MEMSET record.
struct DeviceRecord {
  int64_t start = 0;  // ns since the epoch (device clock converted by MSPTI)
  int64_t end = 0;
  uint64_t correlationId = 0;           // MSPTI correlation id, shared with the launch's API/external records
  uint64_t count = 0;                   // COMMUNICATION: element count; MEMCPY/MEMSET: bytes
  const std::string* name = nullptr;    // kernel / collective name as MSPTI gives it; "" for copies
  const std::string* detail = nullptr;  // KERNEL: type ("KERNEL_AICORE"); COMMUNICATION: algorithm
  const std::string* group = nullptr;   // COMMUNICATION: communicator name
  uint32_t deviceId = 0;                // physical device id as MSPTI reports it (mspti.md 4)
  uint32_t streamId = 0;
  uint32_t kind = 0;     // msptiActivityKind
  uint32_t subkind = 0;  // COMMUNICATION: msptiCommunicationDataType; MEMCPY: msptiActivityMemcpyKind;
                         // MEMSET: the value written
  bool isAsync = false;  // MEMCPY/MEMSET
};

// A device memory allocation or release by the runtime (a MEMORY record): written by MSPTI's
// interposed ACL allocation calls as they return, so start/end are the host call's span
// (mspti.md 5.8). Real libraries give no stream (MSPTI_INVALID_STREAM_ID) and no thread.
struct MemoryRecord {
  int64_t start = 0;  // ns since the epoch, host clock
  int64_t end = 0;
  uint64_t correlationId = 0;  // minted by the allocation call (its API record carries it too)
  uint64_t address = 0;        // device address
  uint64_t bytes = 0;          // a release: the allocation's bytes, 0 when MSPTI did not record it
  uint32_t deviceId = 0;       // physical device id
  uint32_t streamId = 0;       // MSPTI_INVALID_STREAM_ID in every record of the real library
  uint32_t processId = 0;
  uint32_t operation = 0;   // msptiActivityMemoryOperationType: 0 allocation, 1 release
  uint32_t memoryKind = 0;  // msptiActivityMemoryKind: 0 unknown, 1 device
};

struct ApiRecord {
  int64_t start = 0;  // host time of the call, ns (clock: see HostClock.h)
  int64_t end = 0;
  uint32_t processId = 0;
  uint32_t threadId = 0;              // OS thread id of the calling thread
  uint64_t correlationId = 0;         // the calling thread's current id: its most recent launch (mspti.md 4)
  uint32_t kind = 0;                  // API, ACL_API, NODE_API or RUNTIME_API
  const std::string* name = nullptr;  // e.g. "LaunchKernelV2"
};

// The default mstx domain's name, as MSPTI writes it (mspti.md 5.9); also the name the trace, the
// report and the marker_domains setting use.
inline constexpr const char* kDefaultMarkerDomain = "default";
// The domain of torch_npu's ProcessGroupHCCL ranges around each HCCL call (torch_npu.md 5).
inline constexpr const char* kCommunicationMarkerDomain = "communication";
// The domain written for a marker whose records name none (an unpaired range end).
inline constexpr const char* kUnknownMarkerDomain = "unknown";

// An mstx marker (msptiActivityMarker, mspti.md 3.4, 5.9): one mark, or one end of a range.
struct MarkerRecord {
  int64_t timestamp = 0;                // ns since the epoch
  uint64_t id = 0;                      // the range's id, shared by its start and end
  uint32_t flag = 0;                    // msptiActivityFlag (one MARKER_* bit)
  uint32_t sourceKind = 0;              // msptiActivitySourceKind: HOST (0) or DEVICE (1)
  uint32_t first = 0;                   // HOST: processId; DEVICE: deviceId (physical)
  uint32_t second = 0;                  // HOST: threadId; DEVICE: streamId
  const std::string* name = nullptr;    // the message; nullptr when the record has none (ends, device records)
  const std::string* domain = nullptr;  // the domain ("default" for MSPTI's NULL); nullptr when none is given
  // The message as written, for the "communication" domain only (the collective join parses it,
  // CollectiveJoin.h; `name` is its kineto-safe copy, whose quotes are rewritten); else nullptr.
  const std::string* message = nullptr;
};

// The store's sequences of device and API records: deques, so that N records take N records'
// bytes plus one 512-byte block at most (a vector grown by appends holds up to twice that, and
// copies everything at each growth), and appending never moves what is held (the launch table
// points into the API records).
using DeviceRecords = std::deque<DeviceRecord>;
using ApiRecords = std::deque<ApiRecord>;

struct ExternalCorrelationRecord {
  uint32_t externalKind = 0;  // msptiExternalCorrelationKind
  uint64_t externalId = 0;    // torch op id (CUSTOM0) or user range id (CUSTOM1)
  uint64_t correlationId = 0;
};

}  // namespace torch_mspti
