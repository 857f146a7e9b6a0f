// The "driver channel reader": writes each device record (KERNEL, COMMUNICATION, MEMCPY, MEMSET)
// once the device has reported it.
//
// Real path (mspti.md 5.3): driver channel (STARS SOC log) -> channel poll thread -> reader ->
// parser -> Record() into the current buffer, about 200 ms after the task ran. Here one thread
// holds the scheduled records ordered by due time (task end + delivery delay) and hands each to
// a sink once the wall clock reaches it. The sink runs on this thread, so the request callback is
// called from a non-launch thread, as with the real reader.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <vector>

#include "DeviceRecord.h"

namespace torch_mspti::sim {

struct PendingRecord {
  static constexpr int kMaxExternals = 4;  // CUSTOM0..CUSTOM2 and UNKNOWN
  uint64_t dueNs;                          // CLOCK_REALTIME instant at which the record reaches the parser
  uint64_t sequence;                       // FIFO among equal due times
  uint64_t epoch;                          // subscription epoch the task was launched in
  uint64_t endNs;                          // true end of the task on the device timeline (CLOCK_REALTIME)
  bool pulled = false;                     // taken by a driver flush: in the reader's hands, parsed at dueNs
  DeviceRecord record;                     // as it will be reported (device clock applied)
  // Fault injection (option reorder_external): external records held back to be written with
  // this record instead of at launch.
  int externalCount = 0;
  uint32_t externalKinds[kMaxExternals] = {};
  uint64_t externalIds[kMaxExternals] = {};
};

class DeliveryThread {
 public:
  // Called without any DeliveryThread lock held; decides whether to write or drop.
  using Sink = std::function<void(const PendingRecord&)>;

  explicit DeliveryThread(Sink sink) : sink_(std::move(sink)) {}
  DeliveryThread(const DeliveryThread&) = delete;
  DeliveryThread& operator=(const DeliveryThread&) = delete;

  // Schedules records; starts the reader thread on first use (it then lives until exit).
  void schedule(std::vector<PendingRecord> records);
  // Driver flush: every record of a kind in `kindMask` (bit 1 << kind) whose task ended (true
  // time) at or before `nowNs` and that no earlier flush took. With parseAtNs == 0 they are handed
  // to the sink on the calling thread, after any batch the reader is writing; otherwise the reader
  // thread parses them at parseAtNs (CLOCK_REALTIME), like MSPTI's channel reader, which parses
  // what it read after the flush has returned. Returns how many were taken.
  size_t pullEnded(uint64_t nowNs, uint32_t kindMask, uint64_t parseAtNs);
  // Device tasks stopped: forgets every scheduled record. Returns how many were forgotten.
  size_t discardAll();
  // Scheduled records not written or dropped yet (including a batch being written).
  size_t pending() const;
  // CLOCK_REALTIME ns of the latest hand-over of records to the parser (the driver channel's poll
  // returned with data then); 0 before the first.
  uint64_t lastHandOverNs() const { return lastHandOver_.load(std::memory_order_relaxed); }

 private:
  struct LaterFirst {
    bool operator()(const PendingRecord& a, const PendingRecord& b) const {
      return a.dueNs != b.dueNs ? a.dueNs > b.dueNs : a.sequence > b.sequence;
    }
  };

  void run();

  const Sink sink_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // new earlier record, or a batch finished
  std::priority_queue<PendingRecord, std::vector<PendingRecord>, LaterFirst> queue_;
  uint64_t nextSequence_ = 0;
  bool started_ = false;
  bool writing_ = false;  // the reader is handing a batch to the sink, outside mutex_
  // Records taken out of queue_ but not yet through the sink: still "pending" for the stats.
  std::atomic<size_t> inHand_{0};
  std::atomic<uint64_t> lastHandOver_{0};
};

}  // namespace torch_mspti::sim
