// What the plugin does with torch's op ids (kineto's push/popCorrelationId and the user-range
// variants), on the op's own thread, for every op.
//
// Two jobs:
//  * forward: push each id onto MSPTI's external-correlation stack (CUSTOM0 for ops, CUSTOM1 for
//    user ranges) and pop it at the op's end, so MSPTI tags each launch with the op on top — a
//    hint only: the stack is process-global, not per thread (mspti.md 5.4), so threads interleave
//    on it. The plugin never pops an id it did not push there; disarm() pops whatever is still
//    outstanding so the stack is left as it was found, and later pops of those entries are
//    ignored.
//  * log: append each pushed id, in order, to a log owned by the pushing thread. At processTrace
//    kineto resolves each logged id to the op torch recorded (start, end, thread), which tells
//    which op was open on which thread at any time: what verifies and recovers each link
//    (LinkResolver.h). No clock is read here.
// Cost: push/pop take no lock and, in steady state, allocate nothing: thread-local fixed stacks,
// per-thread atomics; a thread's state is allocated at its first push while armed, and its log
// grows by one chunk of kLogChunkIds ids when a chunk fills (chunks are kept and reused by later
// sessions). kineto calls push/pop from configure() on, with no lock (kineto.md 4.1).
// Per-thread stacks hold kMaxDepth entries; deeper ops are counted (overflow) and not forwarded.
// The first push of a new session on a thread clears entries of earlier sessions (an op still
// open across sessions, or a pop that arrived on another thread than its push), so such leaks
// never accumulate across sessions.
// Thread-safety: push/pop from any thread; arm/disarm/takeLog from one profiler thread.
// One forwarder per process (PluginContext): a thread's state is reached through one thread_local
// pointer shared by every instance, so a second instance would log into the first one's states.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "MsptiLibrary.h"
#include "SessionCounters.h"

namespace torch_mspti {

// The ids one thread pushed during a session, in push order (bit kUserRangeBit marks a user range).
struct ThreadOps {
  uint32_t threadId = 0;  // OS thread id (gettid), as in MSPTI's API records
  std::vector<uint64_t> ids;
};

class CorrelationForwarder {
 public:
  enum Stack : int { kOps = 0, kUser = 1 };  // MSPTI CUSTOM0 / CUSTOM1
  static constexpr int kMaxDepth = 128;
  static constexpr uint32_t kLogChunkIds = 4096;
  static constexpr uint64_t kUserRangeBit = 1ull << 63;

  CorrelationForwarder() = default;
  CorrelationForwarder(const CorrelationForwarder&) = delete;
  CorrelationForwarder& operator=(const CorrelationForwarder&) = delete;

  // Starts a session: log every id, and forward to MSPTI through `fns` when it is non-null (it
  // must then have push and pop). Returns the session's generation (for takeLog).
  uint32_t arm(const MsptiFunctions* fns);
  // Ends the session: stops forwarding and logging, pops what is still on MSPTI's stack. Returns
  // how many ids it popped.
  uint64_t disarm();
  bool armed() const { return armedGen_.load(std::memory_order_acquire) != 0; }
  // Stop and forget what is on MSPTI's stack with atomic stores only, never calling MSPTI: in a
  // forked child (the parent's pushes are not ours to pop there) and at process exit.
  void abandon() noexcept;

  // The ids logged under `generation` (after disarm(), on the profiler thread).
  std::vector<ThreadOps> takeLog(uint32_t generation) const;

  void push(Stack s, uint64_t id) noexcept;
  void pop(Stack s) noexcept;

  // Process-wide counters since the process started, as SessionCounters fields (correlation
  // errors, overflow, interleaved, op log lost, stale stack entries); sessions take differences
  // (SessionCounters::since). Ops logged are counted from takeLog().
  SessionCounters counters() const;

  struct ThreadState;  // per-thread stacks, outstanding pushes and log (CorrelationForwarder.cpp)

 private:
  static constexpr uint32_t kForwardBit = 0x80000000u;
  ThreadState* stateFor(uint32_t gen) noexcept;
  ThreadState* newState() noexcept;
  void log(ThreadState& t, uint32_t gen, uint64_t entry) noexcept;
  void freeDeadStates();

  std::atomic<uint32_t> armedGen_{0};
  uint32_t nextGen_ = 1;
  std::atomic<const MsptiFunctions*> fns_{nullptr};
  std::atomic<ThreadState*> threads_{nullptr};  // registry: push at head, unlink by the arming thread
  std::atomic<uint64_t> errors_{0}, overflows_{0}, interleaved_{0}, logLost_{0}, staleEntries_{0};
};

}  // namespace torch_mspti
