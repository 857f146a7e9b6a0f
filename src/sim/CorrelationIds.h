// Correlation ids (mspti.md 4): one process-wide counter from 1, never reset, shared by every task
// that mints one (kernel launches, communication node launches, hooked ACL memory calls), and the
// calling thread's "current" id (MSPTI's ContextManager): set by each minting launch on that
// thread, read by every API record the thread reports, never cleared, so it outlives sessions.
#pragma once

#include <atomic>
#include <cstdint>

#include "mspti/mspti_activity.h"

namespace torch_mspti::sim {

class CorrelationIds {
 public:
  CorrelationIds() = default;
  CorrelationIds(const CorrelationIds&) = delete;
  CorrelationIds& operator=(const CorrelationIds&) = delete;

  // A new id that does not become any thread's current one (a foreign tool's records).
  uint64_t mint() { return next_.fetch_add(1, std::memory_order_relaxed); }
  // A new id that becomes the calling thread's current id.
  uint64_t mintForThisThread() {
    const uint64_t id = mint();
    threadCurrent() = id;
    return id;
  }
  // The calling thread's current id; 0 (MSPTI_INVALID_CORRELATION_ID) before its first mint.
  static uint64_t currentOfThisThread() { return threadCurrent(); }

 private:
  static uint64_t& threadCurrent() {
    static thread_local uint64_t current = MSPTI_INVALID_CORRELATION_ID;
    return current;
  }

  std::atomic<uint64_t> next_{1};
};

}  // namespace torch_mspti::sim
