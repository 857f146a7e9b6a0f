#include "SessionCounters.h"

#include <algorithm>
#include <iterator>

namespace torch_mspti {

const CounterInfo kCounterInfo[] = {
#define TORCH_MSPTI_COUNTER_INFO(group, field, key, phase, merge, doc) \
  {group, key, &SessionCounters::field, CounterPhase::phase, CounterMerge::merge, doc},
    TORCH_MSPTI_SESSION_COUNTERS(TORCH_MSPTI_COUNTER_INFO)
#undef TORCH_MSPTI_COUNTER_INFO
};
const int kCounterCount = static_cast<int>(sizeof(kCounterInfo) / sizeof(kCounterInfo[0]));

uint64_t SessionCounters::records() const {
  uint64_t n = 0;
  for (uint64_t v : recordsByKind) n += v;
  return n;
}

namespace {

// The counter of each link state, in enum order.
constexpr uint64_t SessionCounters::* kLinkCounters[] = {
#define TORCH_MSPTI_LINK_FIELD(A, e, name, linked, field, meaning) &SessionCounters::field,
    TORCH_MSPTI_LINK_STATES(TORCH_MSPTI_LINK_FIELD, _)
#undef TORCH_MSPTI_LINK_FIELD
};
static_assert(std::size(kLinkCounters) == kLinkStateCount);

}  // namespace

uint64_t& SessionCounters::linkCount(LinkState s) { return this->*kLinkCounters[static_cast<size_t>(s)]; }

uint64_t SessionCounters::linkedRows() const {
  uint64_t n = 0;
  for (const LinkStateInfo& s : kLinkStates)
    if (s.linked) n += this->*kLinkCounters[static_cast<size_t>(s.state)];
  return n;
}

const char* dropReasonName(int reason) {
  switch (reason) {
    case kDropOverCap: return "over_cap";
    case kDropOutOfWindow: return "out_of_window";
    case kDropEarlierSession: return "earlier_session";
    default: return "unknown";
  }
}

void SessionCounters::add(const SessionCounters& o) {
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& c = kCounterInfo[i];
    uint64_t& mine = this->*(c.field);
    mine = c.merge == CounterMerge::kMax ? std::max(mine, o.*(c.field)) : mine + o.*(c.field);
  }
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k) recordsByKind[k] += o.recordsByKind[k];
  for (int r = 0; r < kDropReasonCount; ++r)
    for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k) droppedByKind[r][k] += o.droppedByKind[r][k];
  for (const auto& [domain, n] : o.markersByDomain) markersByDomain[domain] += n;
}

SessionCounters SessionCounters::since(const SessionCounters& earlier) const {
  SessionCounters d = *this;
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& c = kCounterInfo[i];
    // Process-wide sources only grow; a saturated counter stays at its ceiling.
    if (c.merge == CounterMerge::kSum) d.*(c.field) = this->*(c.field) - std::min(this->*(c.field), earlier.*(c.field));
  }
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k)
    d.recordsByKind[k] = recordsByKind[k] - std::min(recordsByKind[k], earlier.recordsByKind[k]);
  for (int r = 0; r < kDropReasonCount; ++r)
    for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k)
      d.droppedByKind[r][k] = droppedByKind[r][k] - std::min(droppedByKind[r][k], earlier.droppedByKind[r][k]);
  for (auto& [domain, n] : d.markersByDomain) {
    const auto it = earlier.markersByDomain.find(domain);
    if (it != earlier.markersByDomain.end()) n -= std::min(n, it->second);
  }
  return d;
}

}  // namespace torch_mspti
