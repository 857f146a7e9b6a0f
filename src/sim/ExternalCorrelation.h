// External-correlation stacks (msptiActivityPush/PopExternalCorrelationId).
//
// MSPTI keeps ONE stack per kind for the whole process behind one mutex, although its header and
// docs say "per thread" (mspti.md 5.4, 6 item 1): pushes from several threads interleave and a
// launch on thread B is tagged with thread A's top. That is the default here. The per-thread mode
// (option per_thread_stacks=1) exists only to show what a plugin relying on the documented,
// not the real, behaviour would see.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "mspti/mspti_activity.h"

namespace torch_mspti::sim {

class ExternalCorrelation {
 public:
  // (kind, top of that kind's stack) for every non-empty stack, in ascending kind order.
  using Tops = std::vector<std::pair<uint32_t, uint64_t>>;

  ExternalCorrelation() = default;
  ExternalCorrelation(const ExternalCorrelation&) = delete;
  ExternalCorrelation& operator=(const ExternalCorrelation&) = delete;

  // Never validates `kind` and always succeeds (mspti.md 2.3, 6 item 8).
  msptiResult push(uint32_t kind, uint64_t id, bool perThread);
  // NULL lastId: INVALID_PARAMETER and nothing is popped; empty stack: QUEUE_EMPTY (mspti.md 2.3).
  msptiResult pop(uint32_t kind, uint64_t* lastId, bool perThread);
  // Stacks seen by a launch on the calling thread.
  Tops tops(bool perThread) const;
  // Depth of `kind`'s process-global stack.
  uint64_t globalDepth(uint32_t kind) const;

 private:
  using Stacks = std::map<uint32_t, std::vector<uint64_t>>;
  static Stacks& threadStacks();
  static Tops topsOf(const Stacks& stacks);

  mutable std::mutex mutex_;
  Stacks global_;
};

}  // namespace torch_mspti::sim
