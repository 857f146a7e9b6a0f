// Walks one completed MSPTI activity buffer and copies out what the plugin keeps.
//
// The walk is our own, by the kind tables (ActivityKinds.h: record sizes; KindHandlers.h: what is
// kept and how each kind is read), rather than
// msptiActivityGetNextRecord: that function keeps a thread-local cursor, ignores its `record`
// argument and leaves the cursor stale after an unknown kind (mspti.md 2.3, 6 item 2), so one odd
// record could corrupt the walk of the next buffer on the same thread. Layout rules are the
// documented ABI: records lie back to back, each the size of its kind's packed struct
// (mspti.md 3.1, 11). Nothing is read at or beyond `validSize`: a record that would cross it, or
// a kind whose size is unknown, abandons the rest of the buffer and counts the bytes.
// Thread-safety: a walker is used by one thread at a time (one per completion callback).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <mspti/mspti_activity.h>

#include "NameTable.h"
#include "NpuRecords.h"

namespace torch_mspti {

struct WalkResult {
  std::vector<DeviceRecord> devices;  // KERNEL, COMMUNICATION, MEMCPY, MEMSET
  std::vector<ApiRecord> apis;        // API, ACL_API, NODE_API, RUNTIME_API
  std::vector<ExternalCorrelationRecord> externals;
  std::vector<MemoryRecord> memory;   // MEMORY
  std::vector<MarkerRecord> markers;  // MARKER
  uint64_t recordsByKind[MSPTI_ACTIVITY_KIND_COUNT] = {};
  uint64_t records = 0;         // records walked (all kinds)
  uint64_t abandonedBytes = 0;  // bytes not walked after an unknown kind or truncated record
  uint32_t abandonedKind = 0;   // the kind value that stopped the walk (0 if none)
  bool abandoned = false;

  void clear();
};

class MsptiRecordWalker {
 public:
  // Appends the records of buffer[0, validSize) to `out`, interning strings in `names`; with
  // `names` null the records are only counted. `buffer` may be NULL (then nothing).
  void walk(const uint8_t* buffer, size_t validSize, NameTable* names, WalkResult& out);

 private:
  NameCache cache_;
};

}  // namespace torch_mspti
