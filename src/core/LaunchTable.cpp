#include "LaunchTable.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

namespace torch_mspti {
namespace {

auto rowKey(const DeviceRecord* r) {
  return std::make_tuple(r->correlationId == 0, r->correlationId, r->start, r->end, r->deviceId, r->streamId, r->kind,
                         r->name);
}

bool sameLane(const DeviceRow& a, const DeviceRow& b) {
  return a.device == b.device && a.record.streamId == b.record.streamId;
}

// Copies and memsets carry the host call's span, not the task's device time (mspti.md 5.7): they
// give way to the lane's device-timed rows instead of moving them (rule 5 in the header).
bool yieldsOnLane(const DeviceRecord& r) {
  return r.kind == MSPTI_ACTIVITY_KIND_MEMCPY || r.kind == MSPTI_ACTIVITY_KIND_MEMSET;
}

void countShift(int64_t shift, SessionCounters& c) {
  ++c.overlapRepairs;
  c.maxOverlapShiftNs = std::max(c.maxOverlapShiftNs, static_cast<uint64_t>(shift));
}

// Rule 5 for one lane's device-timed rows, `order` sorted by end: a row that starts before the
// previous one's end starts at that end.
void repairInOrderOfEnds(std::vector<DeviceRow>& rows, const std::vector<uint32_t>& order, SessionCounters& c) {
  int64_t prevEnd = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    DeviceRecord& r = rows[order[k]].record;
    if (k > 0 && r.start < prevEnd) {
      countShift(prevEnd - r.start, c);
      r.start = prevEnd;
      if (r.end < r.start) r.end = r.start;
    }
    prevEnd = k == 0 ? r.end : std::max(prevEnd, r.end);
  }
}

// Rule 5 for one lane's copies, `order` sorted by start: each keeps its length and moves, when it
// overlaps a row already placed (`placed`: start -> end, no two overlapping), to the end of that
// row, until it fits.
void placeYielding(std::vector<DeviceRow>& rows, const std::vector<uint32_t>& order, std::map<int64_t, int64_t>& placed,
                   SessionCounters& c) {
  for (uint32_t i : order) {
    DeviceRecord& r = rows[i].record;
    const int64_t length = r.end - r.start;
    int64_t start = r.start;
    for (;;) {
      auto next = placed.upper_bound(start);
      if (next != placed.begin()) {
        auto prev = std::prev(next);
        if (prev->second > start) {
          start = prev->second;
          continue;
        }
      }
      if (next != placed.end() && next->first < start + length) {
        start = next->second;
        continue;
      }
      break;
    }
    if (start != r.start) {
      countShift(start - r.start, c);
      r.start = start;
      r.end = start + length;
    }
    placed.emplace(r.start, r.end);
  }
}

// Moves rows so that no two rows of a (device, stream) lane overlap (rule 5 in the header).
void repairLanes(std::vector<DeviceRow>& rows, SessionCounters& c) {
  // Row indices grouped by lane, lanes in (device, stream) order, each lane in row order (a
  // counting sort: a session has few lanes), then each lane ordered by (end, start) — rows mostly
  // arrive in that order already, so a lane is sorted only when it is not.
  auto laneKey = [&](const DeviceRow& r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(r.device)) << 32) | r.record.streamId;
  };
  std::vector<uint64_t> keys;
  std::unordered_map<uint64_t, uint32_t> laneOf;
  uint64_t lastKey = UINT64_MAX;
  uint32_t lastLane = 0;
  auto lane = [&](const DeviceRow& r) {
    const uint64_t k = laneKey(r);
    if (k != lastKey) {
      lastKey = k;
      lastLane = laneOf.try_emplace(k, static_cast<uint32_t>(laneOf.size())).first->second;
    }
    return lastLane;
  };
  std::vector<uint32_t> counts;
  for (const DeviceRow& r : rows) {
    const uint32_t l = lane(r);
    if (l == counts.size()) counts.push_back(0);
    ++counts[l];
  }
  keys.resize(laneOf.size());
  for (const auto& [k, l] : laneOf) keys[l] = k;
  std::vector<uint32_t> lanes(keys.size());
  std::iota(lanes.begin(), lanes.end(), 0u);
  std::sort(lanes.begin(), lanes.end(), [&](uint32_t a, uint32_t b) {
    const auto da = static_cast<int32_t>(keys[a] >> 32), db = static_cast<int32_t>(keys[b] >> 32);
    return std::make_pair(da, static_cast<uint32_t>(keys[a])) < std::make_pair(db, static_cast<uint32_t>(keys[b]));
  });
  std::vector<uint32_t> firstOf(keys.size());
  uint32_t next = 0;
  for (uint32_t l : lanes) {
    firstOf[l] = next;
    next += counts[l];
  }
  std::vector<uint32_t> order(rows.size());
  {
    std::vector<uint32_t> fill = firstOf;
    for (uint32_t i = 0; i < rows.size(); ++i) order[fill[lane(rows[i])]++] = i;
  }
  auto byEnd = [&](uint32_t a, uint32_t b) {
    return std::tie(rows[a].record.end, rows[a].record.start) < std::tie(rows[b].record.end, rows[b].record.start);
  };
  for (uint32_t l : lanes) {
    const auto first = order.begin() + firstOf[l], last = first + counts[l];
    if (!std::is_sorted(first, last, byEnd)) std::sort(first, last, byEnd);
  }
  std::vector<uint32_t> timed, yielding;
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    while (last < order.size() && sameLane(rows[order[first]], rows[order[last]])) ++last;
    timed.clear();
    yielding.clear();
    for (size_t k = first; k < last; ++k) (yieldsOnLane(rows[order[k]].record) ? yielding : timed).push_back(order[k]);
    repairInOrderOfEnds(rows, timed, c);
    if (!yielding.empty()) {
      std::map<int64_t, int64_t> placed;
      for (uint32_t i : timed) {
        const DeviceRecord& r = rows[i].record;
        if (r.end > r.start) placed.emplace(r.start, r.end);
      }
      std::sort(yielding.begin(), yielding.end(), [&](uint32_t a, uint32_t b) {
        return std::tie(rows[a].record.start, rows[a].record.end) < std::tie(rows[b].record.start, rows[b].record.end);
      });
      placeYielding(rows, yielding, placed, c);
    }
    first = last;
  }
}

}  // namespace

int32_t logicalDevice(uint32_t physical, const std::vector<uint32_t>& visible) {
  for (size_t i = 0; i < visible.size(); ++i)
    if (visible[i] == physical) return static_cast<int32_t>(i);
  return static_cast<int32_t>(physical);
}

Launch launchCall(uint64_t id, const CorrelationLedger& ledger, const ApiRecords& apis, const HostClock& clock) {
  Launch launch;
  launch.correlationId = id;
  if (const LaunchEntry* e = id ? ledger.find(id) : nullptr) {
    launch.opHint = e->opHint;
    launch.userHint = e->userHint;
    const int64_t call = e->launchApi >= 0 ? e->launchApi : e->firstApi;
    if (call >= 0) launch.call = &apis[static_cast<size_t>(call)];
  }
  if (launch.call && clock.trusted()) {
    launch.callTrusted = true;
    launch.callStart = clock.toRealtime(launch.call->start);
    launch.callEnd = std::max(launch.callStart, clock.toRealtime(launch.call->end));
  }
  return launch;
}

LaunchTable LaunchTable::build(const RecordStore& store, Admission& admission,
                               const std::vector<uint32_t>& visibleDevices, SessionCounters& c) {
  const CorrelationLedger& ledger = store.ledger();
  const HostClock& clock = admission.clock();
  std::vector<const DeviceRecord*> valid;
  valid.reserve(store.devices().size());
  for (const DeviceRecord& r : store.devices()) {
    if ((r.start == 0 && r.end == 0) || r.start <= 0 || r.end < r.start) {
      ++c.invalidTiming;
      continue;
    }
    if (admission.stale(r.kind, r.correlationId)) continue;
    valid.push_back(&r);
  }
  // Sorted by id (rows without one last), then by content: records mostly arrive in id order.
  auto less = [](const DeviceRecord* a, const DeviceRecord* b) { return rowKey(a) < rowKey(b); };
  if (!std::is_sorted(valid.begin(), valid.end(), less)) std::sort(valid.begin(), valid.end(), less);
  auto last = std::unique(valid.begin(), valid.end(),
                          [](const DeviceRecord* a, const DeviceRecord* b) { return rowKey(a) == rowKey(b); });
  c.duplicates += static_cast<uint64_t>(valid.end() - last);
  valid.erase(last, valid.end());

  LaunchTable t;
  t.rows.reserve(valid.size());
  size_t ids = 0;  // launches at most: one per distinct id, one per row without an id
  for (size_t i = 0; i < valid.size(); ++i)
    ids += i == 0 || valid[i]->correlationId == 0 || valid[i]->correlationId != valid[i - 1]->correlationId;
  t.launches.reserve(ids);
  const auto& apis = store.apis();
  for (size_t i = 0; i < valid.size();) {
    const uint64_t id = valid[i]->correlationId;
    size_t j = i;
    auto startOf = [&](const DeviceRecord* r) { return admission.realtime(r->kind, r->start); };
    int64_t firstStart = startOf(valid[i]);
    // Rows without a correlation id (0) share no launch: each is windowed by its own start and
    // becomes a launch of its own (its own trace id).
    if (id == 0) ++j;
    else
      while (j < valid.size() && valid[j]->correlationId == id) firstStart = std::min(firstStart, startOf(valid[j++]));
    const uint32_t rows = static_cast<uint32_t>(j - i);

    Launch launch = launchCall(id, ledger, apis, clock);
    if (!admission.inWindow(valid[i]->kind, launch.callTrusted, launch.callStart, firstStart, rows)) {
      i = j;
      continue;
    }
    if (launch.callTrusted && firstStart < launch.callStart) c.deviceBeforeLaunch += rows;
    launch.firstRow = static_cast<uint32_t>(t.rows.size());
    launch.rowCount = rows;
    for (; i < j; ++i) {
      DeviceRow& row = t.rows.emplace_back();
      row.record = *valid[i];
      row.record.start = admission.realtime(row.record.kind, row.record.start);
      row.record.end = admission.realtime(row.record.kind, row.record.end);
      row.device = logicalDevice(valid[i]->deviceId, visibleDevices);
      if (row.record.start == row.record.end) ++c.zeroDuration;
    }
    t.launches.push_back(launch);
  }
  repairLanes(t.rows, c);
  for (const DeviceRow& r : t.rows) t.devices.push_back(r.device);
  std::sort(t.devices.begin(), t.devices.end());
  t.devices.erase(std::unique(t.devices.begin(), t.devices.end()), t.devices.end());
  return t;
}

}  // namespace torch_mspti
