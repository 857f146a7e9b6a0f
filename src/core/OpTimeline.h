// Which op (or user range) was open on which thread at any moment of a session: the ids each
// thread pushed (CorrelationForwarder's log), resolved at processTrace through kineto's
// getLinkedActivity to the ops torch recorded, with their start, end and thread (kineto.md 1.4).
//
// Per thread the ops are sorted by start (outer first on ties), each with the index of its
// innermost enclosing op, so the innermost op open at a time is one binary search and a walk up
// at most the nesting depth. User ranges (record_function) are ops here too.
// Thread-safety: none; built and used on kineto's processing thread.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <IActivityProfiler.h>

#include "CorrelationForwarder.h"
#include "SessionCounters.h"

namespace torch_mspti {

struct OpNode {
  int64_t start = 0;  // ns since the epoch (torch's clock: CLOCK_REALTIME based, kineto.md 2.1)
  int64_t end = 0;
  uint64_t id = 0;  // torch's correlation id of the op / user range
  bool userRange = false;
  uint32_t threadId = 0;
  int32_t parent = -1;  // index of the innermost enclosing node on the same thread, -1 = none
  const libkineto::ITraceActivity* activity = nullptr;
};

class OpTimeline {
 public:
  // `linked` may be null (nothing resolves: an empty timeline). Ids kineto does not know are
  // counted in linkTargetMissing.
  OpTimeline(const std::vector<ThreadOps>& log, const libkineto::getLinkedActivityCallback* linked,
             SessionCounters& counters);

  // The innermost node on `threadId` open at `t`: [start, end] contains t, or, when none does,
  // the nearest within `tolerance` ns. nullptr when the thread ran no op then.
  const OpNode* innermost(uint32_t threadId, int64_t t, int64_t tolerance) const;
  // The node of torch correlation id `id` (op or user range), nullptr when unknown.
  const OpNode* byId(uint64_t id, bool userRange) const;
  const OpNode* parent(const OpNode& n) const;
  // True when some other thread had an op open at some point of [n.start, n.end].
  bool overlapsOtherThread(const OpNode& n) const;
  // Threads that pushed ops during the session.
  bool ranOps(uint32_t threadId) const { return threads_.count(threadId) != 0; }

 private:
  static const OpNode* innermostAt(const std::vector<OpNode>& nodes, int64_t t);

  struct Thread {
    std::vector<OpNode> nodes;                      // sorted by (start, -end)
    std::vector<std::pair<int64_t, int64_t>> busy;  // merged top-level intervals
  };
  std::unordered_map<uint32_t, Thread> threads_;
  std::unordered_map<uint64_t, const OpNode*> ops_, users_;
};

}  // namespace torch_mspti
