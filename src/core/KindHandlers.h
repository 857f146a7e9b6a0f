// What the plugin does with each MSPTI activity kind: one row per kind, in kKindHandlers.
//
// MSPTI's facts about a kind (its value, record size, first generation, the 26.x preload rule)
// are in ../common/ActivityKinds.h, shared with the simulator. This table holds the plugin's
// decisions and the kind's handlers:
//  * `enabledBy`: the setting that collects the kind, as a typed member of ConfigSnapshot (a
//    misspelt setting does not compile);
//  * `keptAs`: where the record walker keeps its records (device rows, API calls, external
//    correlations) or that they are only counted;
//  * `row`: the kineto row a kept device record becomes; `answers`: the launch class whose
//    pending launches its records complete (the drain waits on them); `pulledByDisable`: whether
//    MSPTI's Disable flushes the kind's driver channel (mspti.md 2.3: MARKER, KERNEL, HCCL and
//    COMMUNICATION are; copies, memsets and memory records come through the ACL hooks instead);
//  * `admit`: how the session's admission decides its records (Admission.h): which clock its
//    times are on, how it is windowed, whether it can be an earlier session's;
//  * `read`: copies one record out of a buffer; `rowName` and `describe`: the row's name and
//    facts; `rows`: the session counter of the rows built.
// Adding a kind is one row here and, if its records are kept, its read/rowName/describe functions
// beside the row in KindHandlers.cpp (src/core/README.md, "Adding a kind").
// The file needs neither torch nor kineto (the record-walker fuzzer builds it); the trace builder
// turns `RowFacts` calls into kineto metadata.
// Thread-safety: constant data; the handler functions keep no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <mspti/mspti_activity.h>

#include "ActivityKinds.h"
#include "Admission.h"
#include "Config.h"
#include "MsptiRecordWalker.h"
#include "NameTable.h"
#include "NpuRecords.h"
#include "SessionCounters.h"

namespace torch_mspti {

// Where the walk keeps a kind's records.
enum class KeptAs : uint8_t {
  kNothing,              // counted by kind, not kept
  kDeviceRow,            // WalkResult::devices: work that ran on a device stream
  kApiCall,              // WalkResult::apis: a host API call (thread, span, correlation id)
  kExternalCorrelation,  // WalkResult::externals: (external kind, external id, correlation id)
  kMemoryEvent,          // WalkResult::memory: a runtime allocation or release (trace: MemoryActivities)
  kMarker,               // WalkResult::markers: an mstx mark or range end (MarkerTable.h pairs them)
};

// The kineto activity type a kept device record becomes (the trace builder maps it to
// libkineto::ActivityType). Collectives are CONCURRENT_KERNEL rows, as NCCL kernels are on CUDA,
// so that torch credits their device time (kineto.md 2.4).
enum class TraceRow : uint8_t { kNone, kKernel, kMemcpy, kMemset };

// Receives a device row's facts in the order they are written into the trace row's args.
class RowFacts {
 public:
  virtual void text(const std::string& key, const std::string& value) = 0;  // a quoted string
  virtual void number(const std::string& key, uint64_t value) = 0;
  virtual void real(const std::string& key, double value) = 0;

 protected:
  ~RowFacts() = default;
};

// What a read function appends to, and the buffer's string cache (MSPTI's string pointers are
// only known to be stable within one buffer).
struct RecordReader {
  WalkResult& out;
  NameTable& names;
  NameCache& cache;
  const std::string* intern(const char* s) { return cache.lookup(names, s); }
};

struct KindHandler {
  msptiActivityKind kind;
  bool ConfigSnapshot::* enabledBy;  // the setting that collects the kind; nullptr: never enabled
  KeptAs keptAs;
  TraceRow row;
  LaunchClass answers;               // kNone: its records complete no launch
  bool pulledByDisable;              // MSPTI fact, mspti.md 2.3
  AdmissionRule admit;               // its clock, window and stale rule (Admission.h); kUnset for a kind never kept
  uint64_t SessionCounters::* rows;  // rows built; nullptr: none
  void (*read)(const uint8_t* record, uint32_t kind, RecordReader& out);  // nullptr: counted only
  std::string (*rowName)(const DeviceRecord& r);                          // device rows only
  void (*describe)(const DeviceRecord& r, RowFacts& facts);               // device rows only
};

// The row of `kind`; INVALID's inert row for a value outside the known kinds (any uint32_t may
// be read from a buffer).
const KindHandler& kindHandler(uint32_t kind);

// "allreduce" for "hcom_allReduce__123_0_1": the collective of an HCCL/LCCL op name, in the
// lower-case words torch's c10d ops and kineto's NCCL rows use; "" when not recognised.
std::string collectiveName(const std::string& msptiName);
// c10 scalar type name of an msptiCommunicationDataType ("Float" for FP32), and its size in
// bytes (0 when unknown). Values from mspti.md 3.3.
const char* communicationTypeName(uint32_t dataType);
uint32_t communicationTypeSize(uint32_t dataType);

}  // namespace torch_mspti
