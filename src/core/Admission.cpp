#include "Admission.h"

#include "KindHandlers.h"

namespace torch_mspti {

int64_t Admission::realtime(uint32_t kind, int64_t t, bool onDevice) const {
  const TimeBase base = kindHandler(kind).admit.time;
  const bool host = base == TimeBase::kHost || (base == TimeBase::kBySource && !onDevice);
  // An untrusted or undecided clock has no known offset: the time is kept as MSPTI gave it.
  return host && clock_.trusted() ? clock_.toRealtime(t) : t;
}

bool Admission::stale(uint32_t kind, uint64_t id) {
  const StaleBy rule = kindHandler(kind).admit.stale;
  if ((rule != StaleBy::kCorrelationId && rule != StaleBy::kWatermark) || id == 0) return false;
  bool earlier = id <= ledger_.staleBelow();
  if (!earlier && rule == StaleBy::kCorrelationId && ledger_.knowsLaunches() && id < ledger_.firstOwnId()) {
    const LaunchEntry* e = ledger_.find(id);
    earlier = !e || (!e->external && e->launchApi < 0);
  }
  if (earlier) {
    ++counters_.staleRecords;
    ++counters_.droppedByKind[kDropEarlierSession][kind < MSPTI_ACTIVITY_KIND_COUNT ? kind : 0];
  }
  return earlier;
}

void Admission::outside(uint32_t kind, uint64_t n) {
  counters_.outOfWindow += n;
  counters_.droppedByKind[kDropOutOfWindow][kind < MSPTI_ACTIVITY_KIND_COUNT ? kind : 0] += n;
}

bool Admission::inWindow(uint32_t kind, bool callTrusted, int64_t callStart, int64_t firstStart, uint64_t rows) {
  const bool in = callTrusted ? callStart >= window_.start && callStart <= window_.end
                              : firstStart >= window_.start && firstStart <= window_.collectionEnd;
  if (!in) outside(kind, rows);
  return in;
}

bool Admission::inWindow(uint32_t kind, int64_t t) {
  const bool in = t >= window_.start && t <= window_.collectionEnd;
  if (!in) outside(kind, 1);
  return in;
}

}  // namespace torch_mspti
