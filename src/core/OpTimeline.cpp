#include "OpTimeline.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace torch_mspti {

OpTimeline::OpTimeline(const std::vector<ThreadOps>& log, const libkineto::getLinkedActivityCallback* linked,
                       SessionCounters& c) {
  if (!linked || !*linked) return;
  for (const ThreadOps& t : log) {
    Thread& thread = threads_[t.threadId];
    thread.nodes.reserve(thread.nodes.size() + t.ids.size());
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
      OpNode n;
      n.start = act->timestamp();
      n.end = std::max(n.start, n.start + act->duration());
      n.id = id;
      n.userRange = user;
      n.threadId = t.threadId;
      n.activity = act;
      thread.nodes.push_back(n);
    }
  }
  for (auto& [tid, thread] : threads_) {
    auto& nodes = thread.nodes;
    std::sort(nodes.begin(), nodes.end(),
              [](const OpNode& a, const OpNode& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    std::vector<int32_t> open;
    for (size_t i = 0; i < nodes.size(); ++i) {
      while (!open.empty() && nodes[open.back()].end < nodes[i].start) open.pop_back();
      nodes[i].parent = open.empty() ? -1 : open.back();
      open.push_back(static_cast<int32_t>(i));
      if (thread.busy.empty() || nodes[i].start > thread.busy.back().second)
        thread.busy.emplace_back(nodes[i].start, nodes[i].end);
      else thread.busy.back().second = std::max(thread.busy.back().second, nodes[i].end);
    }
  }
  for (const auto& [tid, thread] : threads_)
    for (const OpNode& n : thread.nodes) (n.userRange ? users_ : ops_).emplace(n.id, &n);
}

const OpNode* OpTimeline::innermostAt(const std::vector<OpNode>& nodes, int64_t t) {
  auto pos = std::upper_bound(nodes.begin(), nodes.end(), t, [](int64_t v, const OpNode& n) { return v < n.start; });
  for (int32_t i = static_cast<int32_t>(pos - nodes.begin()) - 1; i >= 0; i = nodes[i].parent)
    if (nodes[i].end >= t) return &nodes[i];
  return nullptr;
}

const OpNode* OpTimeline::innermost(uint32_t threadId, int64_t t, int64_t tolerance) const {
  auto it = threads_.find(threadId);
  if (it == threads_.end()) return nullptr;
  const Thread& thread = it->second;
  const auto& nodes = thread.nodes;
  if (const OpNode* n = innermostAt(nodes, t)) return n;
  if (tolerance <= 0) return nullptr;
  // No op contains t: the nearest op edge within tolerance, whichever is nearer — the first op to
  // start after t (the launch call began a moment before torch stamped the op's start) or the
  // last one to end before t. Ops shorter than the tolerance count too.
  auto next = std::upper_bound(nodes.begin(), nodes.end(), t, [](int64_t v, const OpNode& n) { return v < n.start; });
  auto busy = std::upper_bound(thread.busy.begin(), thread.busy.end(), t,
                               [](int64_t v, const std::pair<int64_t, int64_t>& b) { return v < b.first; });
  const int64_t gapAfter = next != nodes.end() ? next->start - t : INT64_MAX;
  const int64_t gapBefore = busy != thread.busy.begin() ? t - std::prev(busy)->second : INT64_MAX;
  if (gapAfter <= tolerance && gapAfter <= gapBefore) return innermostAt(nodes, next->start);
  if (gapBefore <= tolerance) return innermostAt(nodes, t - gapBefore);
  return nullptr;
}

const OpNode* OpTimeline::byId(uint64_t id, bool userRange) const {
  const auto& map = userRange ? users_ : ops_;
  auto it = map.find(id);
  return it == map.end() ? nullptr : it->second;
}

const OpNode* OpTimeline::parent(const OpNode& n) const {
  if (n.parent < 0) return nullptr;
  auto it = threads_.find(n.threadId);
  return it == threads_.end() ? nullptr : &it->second.nodes[static_cast<size_t>(n.parent)];
}

bool OpTimeline::overlapsOtherThread(const OpNode& n) const {
  for (const auto& [tid, thread] : threads_) {
    if (tid == n.threadId) continue;
    const auto& busy = thread.busy;
    auto it = std::lower_bound(busy.begin(), busy.end(), n.start,
                               [](const std::pair<int64_t, int64_t>& b, int64_t v) { return b.second < v; });
    if (it != busy.end() && it->first <= n.end) return true;
  }
  return false;
}

}  // namespace torch_mspti
