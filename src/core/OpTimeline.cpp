#include "OpTimeline.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace torch_mspti {

OpTimeline::OpTimeline(const std::vector<ThreadOps>& log, const libkineto::getLinkedActivityCallback* linked,
                       SessionCounters& c) {
  if (!linked || !*linked) return;
  // The log may list a thread more than once (one entry per logging chunk owner): its ids are
  // gathered into one run per thread.
  std::vector<const ThreadOps*> order;
  size_t total = 0;
  for (const ThreadOps& t : log) {
    order.push_back(&t);
    total += t.ids.size();
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const ThreadOps* a, const ThreadOps* b) { return a->threadId < b->threadId; });
  nodes_.reserve(total);
  size_t users = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const ThreadOps& t = *order[k];
    if (threads_.empty() || threads_.back().threadId != t.threadId) {
      Thread& th = threads_.emplace_back();
      th.threadId = t.threadId;
      th.begin = th.end = static_cast<uint32_t>(nodes_.size());
    }
    for (uint64_t entry : t.ids) {
      const bool user = (entry & CorrelationForwarder::kUserRangeBit) != 0;
      const uint64_t id = entry & ~CorrelationForwarder::kUserRangeBit;
      // kineto keys ops by their int32 correlation id; 0 would resolve to an arbitrary event
      // (kineto.md 1.4), and ids beyond int32 cannot be torch's.
      if (id == 0 || id > static_cast<uint64_t>(INT32_MAX)) continue;
      const libkineto::ITraceActivity* act = (*linked)(static_cast<int32_t>(id));
      if (!act) {
        ++c.linkTargetMissing;
        continue;
      }
      OpNode& n = nodes_.emplace_back();
      n.start = act->timestamp();
      n.end = std::max(n.start, n.start + act->duration());
      n.id = static_cast<uint32_t>(id);
      n.userRange = user;
      n.activity = act;
      users += user;
    }
    threads_.back().end = static_cast<uint32_t>(nodes_.size());
  }
  std::vector<int32_t> open;
  busy_.reserve(nodes_.size());  // at most one interval per node: no regrowth, no copy
  for (Thread& th : threads_) {
    const auto first = nodes_.begin() + th.begin, last = nodes_.begin() + th.end;
    std::sort(first, last,
              [](const OpNode& a, const OpNode& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    open.clear();
    th.busyBegin = static_cast<uint32_t>(busy_.size());
    for (uint32_t i = th.begin; i < th.end; ++i) {
      OpNode& n = nodes_[i];
      while (!open.empty() && nodes_[static_cast<size_t>(open.back())].end < n.start) open.pop_back();
      n.parent = open.empty() ? -1 : open.back();
      open.push_back(static_cast<int32_t>(i));
      if (busy_.size() == th.busyBegin || n.start > busyEnd(busy_.back())) busy_.push_back({i, i});
      else if (n.end > busyEnd(busy_.back())) busy_.back().last = i;
    }
    th.busyEnd = static_cast<uint32_t>(busy_.size());
  }
  ops_.reserve(nodes_.size() - users);
  users_.reserve(users);
  for (uint32_t i = 0; i < nodes_.size(); ++i) (nodes_[i].userRange ? users_ : ops_).push_back({nodes_[i].id, i});
  auto byIdThenStart = [&](const IdEntry& a, const IdEntry& b) {
    return a.id != b.id ? a.id < b.id : nodes_[a.node].start < nodes_[b.node].start;
  };
  std::sort(ops_.begin(), ops_.end(), byIdThenStart);
  std::sort(users_.begin(), users_.end(), byIdThenStart);
}

const OpTimeline::Thread* OpTimeline::find(uint32_t threadId) const {
  auto it = std::lower_bound(threads_.begin(), threads_.end(), threadId,
                             [](const Thread& t, uint32_t v) { return t.threadId < v; });
  return it != threads_.end() && it->threadId == threadId ? &*it : nullptr;
}

const OpTimeline::Thread* OpTimeline::threadOf(const OpNode& n) const {
  const auto index = static_cast<uint32_t>(&n - nodes_.data());
  for (const Thread& t : threads_)
    if (index >= t.begin && index < t.end) return &t;
  return nullptr;
}

const OpNode* OpTimeline::innermostAt(const Thread& th, int64_t t) const {
  const auto first = nodes_.begin() + th.begin, last = nodes_.begin() + th.end;
  auto pos = std::upper_bound(first, last, t, [](int64_t v, const OpNode& n) { return v < n.start; });
  for (int32_t i = static_cast<int32_t>(pos - nodes_.begin()) - 1; i >= static_cast<int32_t>(th.begin);
       i = nodes_[static_cast<size_t>(i)].parent)
    if (nodes_[static_cast<size_t>(i)].end >= t) return &nodes_[static_cast<size_t>(i)];
  return nullptr;
}

const OpNode* OpTimeline::innermost(uint32_t threadId, int64_t t, int64_t tolerance) const {
  const Thread* th = find(threadId);
  if (!th) return nullptr;
  if (const OpNode* n = innermostAt(*th, t)) return n;
  if (tolerance <= 0) return nullptr;
  // No op contains t: the nearest op edge within tolerance, whichever is nearer — the first op to
  // start after t (the launch call began a moment before torch stamped the op's start) or the
  // last one to end before t. Ops shorter than the tolerance count too.
  const auto first = nodes_.begin() + th->begin, last = nodes_.begin() + th->end;
  auto next = std::upper_bound(first, last, t, [](int64_t v, const OpNode& n) { return v < n.start; });
  const auto bFirst = busy_.begin() + th->busyBegin, bLast = busy_.begin() + th->busyEnd;
  auto busy = std::upper_bound(bFirst, bLast, t, [&](int64_t v, const Busy& b) { return v < busyStart(b); });
  const int64_t gapAfter = next != last ? next->start - t : INT64_MAX;
  const int64_t gapBefore = busy != bFirst ? t - busyEnd(*std::prev(busy)) : INT64_MAX;
  if (gapAfter <= tolerance && gapAfter <= gapBefore) return innermostAt(*th, next->start);
  if (gapBefore <= tolerance) return innermostAt(*th, t - gapBefore);
  return nullptr;
}

const OpNode* OpTimeline::byId(uint64_t id, bool userRange) const {
  if (id == 0 || id > static_cast<uint64_t>(INT32_MAX)) return nullptr;
  const auto& index = userRange ? users_ : ops_;
  auto it = std::lower_bound(index.begin(), index.end(), static_cast<uint32_t>(id),
                             [](const IdEntry& e, uint32_t v) { return e.id < v; });
  return it != index.end() && it->id == id ? &nodes_[it->node] : nullptr;
}

bool OpTimeline::overlapsOtherThread(const OpNode& n) const {
  const Thread* own = threadOf(n);
  for (const Thread& th : threads_) {
    if (&th == own) continue;
    const auto bFirst = busy_.begin() + th.busyBegin, bLast = busy_.begin() + th.busyEnd;
    auto it = std::lower_bound(bFirst, bLast, n.start, [&](const Busy& b, int64_t v) { return busyEnd(b) < v; });
    if (it != bLast && busyStart(*it) <= n.end) return true;
  }
  return false;
}

}  // namespace torch_mspti
