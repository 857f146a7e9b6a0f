// The records of one profiling session, appended by MSPTI completion threads, plus the launch
// ledger the drain consults.
//
// Ledger: a launch (MSPTI correlation id) is "known" once an EXTERNAL_CORRELATION or API record
// names it, and "satisfied" once one KERNEL record with that id arrived (one launch may cover
// several kernels; the first satisfies it). pendingLaunches() = known and not satisfied.
// API records also carry the id of their thread's most recent launch, which may predate the
// session; ids at or below `staleBelow` (the highest id of earlier sessions) never become pending.
// Thread-safety: append() and the ledger queries are thread-safe (one lock per buffer, never per
// record); the record vectors are read only after collection has stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "MsptiRecordWalker.h"
#include "NpuRecords.h"

namespace torch_mspti {

class RecordStore {
 public:
  explicit RecordStore(uint64_t staleBelow) : staleBelow_(staleBelow) {}

  // Moves the batch's records in (the batch is left empty but keeps its capacity).
  void append(WalkResult& batch);

  uint64_t records() const { return records_.load(std::memory_order_acquire); }
  uint64_t pendingLaunches() const;
  bool knowsLaunches() const;  // any external/API record seen, so pendingLaunches() is meaningful
  uint64_t maxCorrelationId() const;

  // Read after collection stopped (no concurrent append).
  const std::vector<KernelRecord>& kernels() const { return kernels_; }
  const std::vector<ApiRecord>& apis() const { return apis_; }
  const std::vector<ExternalCorrelationRecord>& externals() const { return externals_; }
  const uint64_t* recordsByKind() const { return recordsByKind_; }
  uint64_t abandonedBuffers() const { return abandonedBuffers_; }
  uint64_t abandonedBytes() const { return abandonedBytes_; }

 private:
  void noteLaunch(uint64_t correlationId);  // caller holds mutex_

  const uint64_t staleBelow_;
  mutable std::mutex mutex_;
  std::atomic<uint64_t> records_{0};
  std::vector<KernelRecord> kernels_;
  std::vector<ApiRecord> apis_;
  std::vector<ExternalCorrelationRecord> externals_;
  uint64_t recordsByKind_[MSPTI_ACTIVITY_KIND_COUNT] = {};
  uint64_t abandonedBuffers_ = 0;
  uint64_t abandonedBytes_ = 0;
  // correlation id -> bit 0: launch known, bit 1: kernel seen
  std::unordered_map<uint64_t, uint8_t> ledger_;
  uint64_t pending_ = 0;
  bool knowsLaunches_ = false;
  uint64_t maxCorrelationId_ = 0;
};

}  // namespace torch_mspti
