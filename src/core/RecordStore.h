// The records of one profiling session, appended by MSPTI completion threads, with the
// correlation ledger (CorrelationLedger.h) kept up to date as they arrive, and the session's
// interned strings.
//
// The store is bounded (max_session_records): records beyond the cap are counted per kind, not
// kept. The cap keeps room for the answer of every launch it kept, for the classes the session
// waits for, and never keeps a row whose launch call it refused (CapRoom.h), so over the cap a
// session holds whole launches: each kept launch call keeps its kernel.
//
// Collection ends with seal(): records completed after it (a completion that was still running
// when a FlushAll failed, or a library that keeps delivering) are counted, not kept, so readers
// after seal() see a store that no longer changes.
// Thread-safety: append(), seal() and the ledger queries are thread-safe (one lock per buffer,
// never per record); the record accessors are valid after seal() only.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "CapRoom.h"
#include "CorrelationLedger.h"
#include "MsptiRecordWalker.h"
#include "NameTable.h"
#include "NpuRecords.h"

namespace torch_mspti {

class RecordStore {
 public:
  // Correlation ids at or below `staleBelow` (the highest id earlier sessions saw) are theirs.
  // At most `maxRecords` records (device, API, external, memory and marker records together; the
  // setting max_session_records) are kept; the ledger grows only with kept records.
  // Until waitFor() names them, no launch class holds room (a store without a cap needs none).
  explicit RecordStore(uint64_t staleBelow, uint64_t maxRecords = UINT64_MAX)
      : room_(maxRecords), ledger_(staleBelow) {}

  // The launch classes whose answers the session waits for (bit 1 << LaunchClass, the drain's
  // waitFor) and whether launch calls are collected: the cap holds room only for those answers
  // and calls (CapRoom.h). Called as the kinds are enabled, before their records come.
  void waitFor(uint32_t classes, bool launchCalls);

  NameTable& names() { return names_; }

  // Moves the batch's records in (the batch is left empty but keeps its capacity).
  void append(WalkResult& batch);
  // Ends collection; waits for an append in progress.
  void seal();

  uint64_t records() const { return records_.load(std::memory_order_acquire); }
  // Drain queries (see CorrelationLedger::pending).
  uint64_t pendingLaunches(uint32_t waitFor) const;
  bool knowsLaunches() const;
  // CorrelationLedger::closeAdmissions and launchesAfterCloseWaiting, under the store's lock.
  void closeLaunchAdmissions();
  uint64_t launchesAfterCloseWaiting(uint32_t waitFor) const;
  // Records of `kind` appended so far (thread-safe, unlike recordsByKind()).
  uint64_t recordsOfKind(uint32_t kind) const;
  // The earliest end (ns since the epoch) among the device records appended since the previous
  // call, INT64_MAX when none: the drain bounds MSPTI's delivery delay with it (a row that came
  // with the flush at time t was delayed by at most t - end).
  int64_t takeEarliestNewEnd();
  uint64_t maxCorrelationId() const;
  // Records that arrived after seal().
  uint64_t afterCollection() const;
  // Records not kept because the store held `maxRecords` already, and the same per
  // msptiActivityKind (MSPTI_ACTIVITY_KIND_COUNT entries).
  uint64_t overCap() const;
  std::vector<uint64_t> overCapByKind() const;
  // Physical devices named by the device records so far.
  std::vector<uint32_t> devicesSeen() const;

  // Valid after seal().
  const DeviceRecords& devices() const { return devices_; }
  // Frees what the session's LaunchTable (and MemoryTimeline) took over once they are built: the
  // device records (copied into the table's rows) and the ledger's entries (their hints and calls
  // copied into its launches). After seal(); the counts by kind and the ledger's counters stay.
  void releaseConsumed() {
    DeviceRecords().swap(devices_);
    ledger_.releaseEntries();
  }
  // API records stay: the table's launches point into them.
  const ApiRecords& apis() const { return apis_; }
  const std::vector<MemoryRecord>& memory() const { return memory_; }
  const std::vector<MarkerRecord>& markers() const { return markers_; }
  const CorrelationLedger& ledger() const { return ledger_; }
  const uint64_t* recordsByKind() const { return recordsByKind_; }
  uint64_t abandonedBuffers() const { return abandonedBuffers_; }
  uint64_t abandonedBytes() const { return abandonedBytes_; }

  // The fork guard holds the store's and its name table's locks across fork() (through the
  // buffer pool's sink), so no completion is inside them at that moment.
  void lockForFork() {
    mutex_.lock();
    names_.lockForFork();
  }
  void unlockAfterFork() {
    names_.unlockAfterFork();
    mutex_.unlock();
  }

 private:
  bool fits(uint64_t need) const;
  void keepAll(WalkResult& batch);
  void keepWithinCap(WalkResult& batch);
  bool callToCome(uint64_t id, LaunchClass c) const;
  bool keepAnswer(uint64_t id, LaunchClass c);
  void countOverCap(uint32_t kind);
  void noteKeptDevice(const DeviceRecord& d);

  NameTable names_;
  mutable std::mutex mutex_;
  bool sealed_ = false;
  CapRoom room_;
  uint64_t overCap_ = 0;
  uint64_t overCapByKind_[MSPTI_ACTIVITY_KIND_COUNT] = {};
  std::atomic<uint64_t> records_{0};
  uint64_t afterCollection_ = 0;
  DeviceRecords devices_;
  ApiRecords apis_;
  std::vector<MemoryRecord> memory_;
  std::vector<MarkerRecord> markers_;
  CorrelationLedger ledger_;
  uint64_t recordsByKind_[MSPTI_ACTIVITY_KIND_COUNT] = {};
  uint64_t abandonedBuffers_ = 0;
  uint64_t abandonedBytes_ = 0;
  std::vector<uint32_t> devicesSeen_;
  int64_t earliestNewEnd_ = INT64_MAX;
};

}  // namespace torch_mspti
