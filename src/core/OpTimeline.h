// Which op (or user range) was open on which thread at any moment of a session: the ids each
// thread pushed (CorrelationForwarder's log), resolved at processTrace through kineto's
// getLinkedActivity to the ops torch recorded, with their start, end and thread (kineto.md 1.4).
//
// Per thread the ops are sorted by start (outer first on ties), each with the index of its
// innermost enclosing op, so the innermost op open at a time is one binary search and a walk up
// at most the nesting depth. User ranges (record_function) are ops here too.
// Memory: a transient of processTrace, ~48 bytes per op: the node (32), its entry in the id
// index (8) and at most one busy interval (8).
// Thread-safety: none; built and used on kineto's processing thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <IActivityProfiler.h>

#include "CorrelationForwarder.h"
#include "SessionCounters.h"

namespace torch_mspti {

struct OpNode {
  int64_t start = 0;  // ns since the epoch (torch's clock: CLOCK_REALTIME based, kineto.md 2.1)
  int64_t end = 0;
  const libkineto::ITraceActivity* activity = nullptr;
  // torch's correlation id of the op / user range: kineto keys ops by int32 ids (kineto.md 1.4),
  // so 31 bits hold every id the timeline takes.
  uint32_t id : 31 = 0;
  uint32_t userRange : 1 = 0;
  int32_t parent = -1;  // index (in the timeline) of the innermost enclosing node on the same thread, -1 = none
};
static_assert(sizeof(OpNode) == 32, "OpNode is sized for 1M ops per session");

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
  const OpNode* parent(const OpNode& n) const {
    return n.parent < 0 ? nullptr : &nodes_[static_cast<size_t>(n.parent)];
  }
  // True when some other thread had an op open at some point of [n.start, n.end].
  bool overlapsOtherThread(const OpNode& n) const;
  // Threads that pushed ops during the session.
  bool ranOps(uint32_t threadId) const { return find(threadId) != nullptr; }

 private:
  // One thread's nodes are nodes_[begin, end), sorted by (start, -end); its busy intervals (the
  // merged spans of its top-level ops, in order) are busy_[busyBegin, busyEnd).
  struct Thread {
    uint32_t threadId = 0;
    uint32_t begin = 0, end = 0;
    uint32_t busyBegin = 0, busyEnd = 0;
  };
  // A busy interval by the nodes that give its start and its end.
  struct Busy {
    uint32_t first = 0, last = 0;
  };
  struct IdEntry {
    uint32_t id = 0;
    uint32_t node = 0;
  };
  const Thread* find(uint32_t threadId) const;
  const Thread* threadOf(const OpNode& n) const;
  const OpNode* innermostAt(const Thread& t, int64_t time) const;
  int64_t busyStart(const Busy& b) const { return nodes_[b.first].start; }
  int64_t busyEnd(const Busy& b) const { return nodes_[b.last].end; }

  std::vector<OpNode> nodes_;
  std::vector<Busy> busy_;
  std::vector<Thread> threads_;       // ascending threadId
  std::vector<IdEntry> ops_, users_;  // ascending id
};

}  // namespace torch_mspti
