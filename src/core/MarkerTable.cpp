#include "MarkerTable.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include <mspti/mspti_activity.h>

#include "LaunchTable.h"

namespace torch_mspti {

namespace {

enum class Role { kInstant, kStart, kEnd, kUnknown };

Role roleOf(uint32_t flag) {
  switch (flag) {
    case MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS:
    case MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE: return Role::kInstant;
    case MSPTI_ACTIVITY_FLAG_MARKER_START:
    case MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE: return Role::kStart;
    case MSPTI_ACTIVITY_FLAG_MARKER_END:
    case MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE: return Role::kEnd;
    default: return Role::kUnknown;
  }
}

Marker single(const MarkerRecord& r, MarkerKind kind, const std::vector<uint32_t>& visible) {
  Marker m;
  m.start = m.end = r.timestamp;
  m.kind = kind;
  m.onDevice = r.sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE;
  m.lane = m.onDevice ? logicalDevice(r.first, visible) : static_cast<int32_t>(r.first);
  m.row = static_cast<int32_t>(r.second);
  m.id = r.id;
  m.flag = r.flag;
  m.name = r.name;
  m.domain = r.domain;
  m.message = r.message;
  return m;
}

}  // namespace

MarkerTable MarkerTable::build(const std::vector<MarkerRecord>& all, Admission& admission,
                               const std::vector<uint32_t>& visible, const MarkerDomainFilter* keep,
                               SessionCounters& c) {
  MarkerTable t;
  // The session's admission first (Admission.h): times on CLOCK_REALTIME (host records on MSPTI's
  // host clock), then the window, before any pairing: an end whose start fell outside the window
  // is an unpaired end, as it is when the range began before the session.
  std::vector<MarkerRecord> records;
  records.reserve(all.size());
  for (const MarkerRecord& r : all) {
    const bool onDevice = r.sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE;
    const auto at = admission.realtime(MSPTI_ACTIVITY_KIND_MARKER, static_cast<int64_t>(r.timestamp), onDevice);
    if (!admission.inWindow(MSPTI_ACTIVITY_KIND_MARKER, at)) continue;
    records.push_back(r);
    records.back().timestamp = at;
  }
  std::vector<const MarkerRecord*> byTime;
  byTime.reserve(records.size());
  // The message and domain of each id, from the host records that have them.
  std::unordered_map<uint64_t, const MarkerRecord*> hostNamed;
  for (const MarkerRecord& r : records) {
    byTime.push_back(&r);
    if (r.sourceKind != MSPTI_ACTIVITY_SOURCE_KIND_DEVICE && r.name) hostNamed.try_emplace(r.id, &r);
  }
  // Start before end at equal times, so a zero-length range pairs.
  auto order = [](const MarkerRecord* a, const MarkerRecord* b) {
    const bool aEnd = roleOf(a->flag) == Role::kEnd, bEnd = roleOf(b->flag) == Role::kEnd;
    return std::tie(a->timestamp, aEnd, a->id) < std::tie(b->timestamp, bEnd, b->id);
  };
  std::stable_sort(byTime.begin(), byTime.end(), order);

  // (sourceKind, id) -> the open start.
  std::unordered_map<uint64_t, const MarkerRecord*> open[2];
  auto openOf = [&open](const MarkerRecord& r) -> std::unordered_map<uint64_t, const MarkerRecord*>& {
    return open[r.sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE ? 1 : 0];
  };
  for (const MarkerRecord* r : byTime) {
    switch (roleOf(r->flag)) {
      case Role::kInstant: t.markers.push_back(single(*r, MarkerKind::kMark, visible)); break;
      case Role::kUnknown: t.markers.push_back(single(*r, MarkerKind::kUnknownFlag, visible)); break;
      case Role::kStart: {
        auto [it, fresh] = openOf(*r).try_emplace(r->id, r);
        if (!fresh) {  // a second start with this id: the first can no longer be paired
          t.markers.push_back(single(*it->second, MarkerKind::kUnpairedStart, visible));
          it->second = r;
        }
        break;
      }
      case Role::kEnd: {
        auto& starts = openOf(*r);
        auto it = starts.find(r->id);
        if (it == starts.end()) {
          t.markers.push_back(single(*r, MarkerKind::kUnpairedEnd, visible));
          break;
        }
        Marker m = single(*it->second, MarkerKind::kRange, visible);
        m.end = r->timestamp;
        if (!m.name) m.name = r->name;
        if (!m.domain) m.domain = r->domain;
        if (!m.message) m.message = r->message;
        t.markers.push_back(m);
        starts.erase(it);
        break;
      }
    }
  }
  for (auto& starts : open)
    for (const auto& [id, r] : starts) {
      t.markers.push_back(single(*r, MarkerKind::kUnpairedStart, visible));
    }
  for (Marker& m : t.markers) {
    if (m.onDevice && (!m.name || !m.domain)) {
      const auto it = hostNamed.find(m.id);
      if (it != hostNamed.end()) {
        if (!m.name) m.name = it->second->name;
        if (!m.domain) m.domain = it->second->domain;
        if (!m.message) m.message = it->second->message;
      }
    }
  }
  if (keep) {
    const auto dropped = std::remove_if(t.markers.begin(), t.markers.end(),
                                        [keep](const Marker& m) { return m.domain && !keep->admits(*m.domain); });
    c.markerNotIncluded += static_cast<uint64_t>(t.markers.end() - dropped);
    t.markers.erase(dropped, t.markers.end());
  }
  // Counted once kept, so that the counts by kind add up to those by domain.
  for (const Marker& m : t.markers) {
    ++c.markersByDomain[m.domain ? *m.domain : kUnknownMarkerDomain];
    switch (m.kind) {
      case MarkerKind::kMark: ++c.markerMarks; break;
      case MarkerKind::kRange: ++c.markerRanges; break;
      case MarkerKind::kUnpairedStart: ++c.markerUnpairedStarts; break;
      case MarkerKind::kUnpairedEnd: ++c.markerUnpairedEnds; break;
      case MarkerKind::kUnknownFlag: ++c.markerUnknownFlag; break;
    }
  }
  std::sort(t.markers.begin(), t.markers.end(), [](const Marker& a, const Marker& b) {
    return std::tie(a.start, a.id, a.onDevice, a.end) < std::tie(b.start, b.id, b.onDevice, b.end);
  });
  return t;
}

}  // namespace torch_mspti
