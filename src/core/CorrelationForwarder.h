// Forwards torch's op ids (kineto push/popCorrelationId) to MSPTI's external-correlation stack.
//
// kineto calls push/pop on the op's own thread for every op, with no lock, from configure() on
// (kineto.md 4.1); ranges can straddle start and stop. MSPTI's stack is process-global, not per
// thread (mspti.md 5.4), so the plugin must never pop an id it did not push there. Each thread
// keeps a small fixed stack remembering, per push, the arming generation it was forwarded under
// (0 = not forwarded); a pop reaches MSPTI only for an entry forwarded under the current, still
// armed generation. disarm() pops whatever is still outstanding so the global stack is left as
// it was found, and later pops of those entries are ignored.
// Cost: push/pop take no lock and allocate nothing (thread_local fixed arrays, relaxed atomics).
//
// Interval mode (libraries without push/pop, i.e. CANN 8.0.RC3, mspti.md 8): nothing reaches
// MSPTI; instead each op pop records (op id, start ns, end ns) of a kOps entry into a log owned
// by the thread (CLOCK_REALTIME, the clock of MSPTI's API records, mspti.md 4). processTrace
// then links a launch to the innermost op of the API record's thread whose interval contains the
// API record's start. A thread's log is a chain of fixed chunks (kIntervalChunkSize intervals):
// the first is allocated at the thread's first recorded op, a further one only when a chunk
// fills (one allocation per kIntervalChunkSize ops and thread, and only until the thread's
// busiest session is covered: chunks are reused by later sessions). Writes take no lock: the
// owner publishes each interval with a release store of its count; the reader (stop(), on the
// profiler thread) reads up to that count. Logs of exited threads are freed at the next arming.
// The push/pop path of the normal (forwarding) mode is unchanged apart from one branch on a
// bit of the generation it already loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "MsptiLibrary.h"

namespace torch_mspti {

// One op as seen at push/pop on its thread (interval mode).
struct OpInterval {
  uint32_t threadId = 0;  // OS thread id (gettid), as in MSPTI's API records
  uint64_t opId = 0;      // the id kineto pushed (torch's op correlation id)
  int64_t start = 0;      // ns since the epoch, CLOCK_REALTIME
  int64_t end = 0;
};

class CorrelationForwarder {
 public:
  enum Stack : int { kOps = 0, kUser = 1 };  // MSPTI CUSTOM0 / CUSTOM1
  static constexpr int kMaxDepth = 128;
  static constexpr uint32_t kIntervalChunkSize = 2048;

  static CorrelationForwarder& instance();

  // Starts forwarding through `fns` (must have push and pop). Thread-safe w.r.t. push/pop.
  void arm(const MsptiFunctions* fns);
  // Stops forwarding and pops what is still outstanding. Returns how many were popped.
  uint64_t disarm();
  bool armed() const { return armedGen_.load(std::memory_order_acquire) != 0; }
  // In a forked child (ForkGuard): stop forwarding and forget what the parent had pushed, with
  // atomic stores only; MSPTI is never called. Entries still on this thread's stack then belong
  // to no armed generation, so their pops are ignored.
  void disarmAfterFork() noexcept;

  // Interval mode: records op intervals instead of forwarding (see above). Returns the arming's
  // generation, to be passed to takeIntervals() after disarm().
  uint32_t armIntervals();
  // The intervals recorded under `generation` (call after disarm(), on the arming thread).
  std::vector<OpInterval> takeIntervals(uint32_t generation) const;
  // Interval chunks allocated since the process started (each kIntervalChunkSize intervals).
  uint64_t intervalChunks() const { return intervalChunks_.load(std::memory_order_relaxed); }

  void push(Stack s, uint64_t id) noexcept;
  void pop(Stack s) noexcept;

  // Counters since the process started (sessions take deltas).
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  uint64_t overflows() const { return overflows_.load(std::memory_order_relaxed); }
  // Pops whose returned id differed from what this thread pushed: another thread's push was on
  // top of the process-global stack, so launches in between were tagged with a foreign op.
  uint64_t interleaved() const { return interleaved_.load(std::memory_order_relaxed); }

 private:
  // Takes one outstanding push of stack `s`; false when none is left (disarm() took them).
  bool claimOutstanding(int s) noexcept;
  std::atomic<uint32_t> armedGen_{0};
  uint32_t nextGen_ = 1;
  std::atomic<const MsptiFunctions*> fns_{nullptr};
  std::atomic<int64_t> outstanding_[2] = {0, 0};
  std::atomic<uint64_t> errors_{0}, overflows_{0}, interleaved_{0};
  std::atomic<uint64_t> intervalChunks_{0}, intervalsLost_{0};

 public:
  // Intervals not recorded because a chunk could not be allocated (since the process started).
  uint64_t intervalsLost() const { return intervalsLost_.load(std::memory_order_relaxed); }
  // Internal (CorrelationForwarder.cpp): bit set in the generation of an interval-mode arming.
  static constexpr uint32_t kIntervalBit = 0x80000000u;
  void noteIntervalChunk() { intervalChunks_.fetch_add(1, std::memory_order_relaxed); }
  void noteIntervalLost() { intervalsLost_.fetch_add(1, std::memory_order_relaxed); }
};

}  // namespace torch_mspti
