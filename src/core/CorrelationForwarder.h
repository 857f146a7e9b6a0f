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
#pragma once

#include <atomic>
#include <cstdint>

#include "MsptiLibrary.h"

namespace torch_mspti {

class CorrelationForwarder {
 public:
  enum Stack : int { kOps = 0, kUser = 1 };  // MSPTI CUSTOM0 / CUSTOM1
  static constexpr int kMaxDepth = 128;

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

  void push(Stack s, uint64_t id) noexcept;
  void pop(Stack s) noexcept;

  // Counters since the process started (sessions take deltas).
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  uint64_t overflows() const { return overflows_.load(std::memory_order_relaxed); }
  // Pops whose returned id differed from what this thread pushed: another thread's push was on
  // top of the process-global stack, so launches in between were tagged with a foreign op.
  uint64_t interleaved() const { return interleaved_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> armedGen_{0};
  uint32_t nextGen_ = 1;
  std::atomic<const MsptiFunctions*> fns_{nullptr};
  std::atomic<int64_t> outstanding_[2] = {0, 0};
  std::atomic<uint64_t> errors_{0}, overflows_{0}, interleaved_{0};
};

}  // namespace torch_mspti
