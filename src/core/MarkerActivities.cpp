#include "MarkerActivities.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "NpuActivity.h"

namespace torch_mspti {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

const std::string kDomain = "domain";
const std::string kMarkerId = "marker id";
const std::string kUnpaired = "unpaired";
const std::string kFlag = "flag";
const std::string kUnknownName = "unknown";
const std::string kRangeEndName = "mstx range end";  // MSPTI gives an end record no message

// What kineto's Chrome writer adds on each side of a GPU_USER_ANNOTATION, ns (ActivityBuilder.h).
constexpr int64_t kAnnotationWideningNs = 1;

// Host markers are PRIVATEUSE1_DRIVER: torch drops a USER_ANNOTATION or CPU_INSTANT_EVENT that
// it did not record itself, with a warning (kineto.md 1.6), and gives other types a device
// (kineto.md 2.4); a host-side privateuse1 type keeps the marker on its thread's lane as a CPU event.
ActivityType typeOf(const Marker& m) {
  return m.onDevice ? ActivityType::GPU_USER_ANNOTATION : ActivityType::PRIVATEUSE1_DRIVER;
}

// The lane level of each range (MarkerActivities.h), per recorded lane (nestingLevels); -1 for
// instants.
std::vector<int32_t> rangeLevels(const std::vector<Marker>& markers, SessionCounters& c) {
  std::vector<int32_t> level(markers.size(), -1);
  std::map<std::tuple<bool, int32_t, int32_t>, std::vector<size_t>> byLane;
  for (size_t i = 0; i < markers.size(); ++i)
    if (markers[i].kind == MarkerKind::kRange)
      byLane[{markers[i].onDevice, markers[i].lane, markers[i].row}].push_back(i);
  for (const auto& [lane, idx] : byLane) {
    std::vector<std::pair<int64_t, int64_t>> spans;
    spans.reserve(idx.size());
    // As written: a device span shorter than 2 ns is written 2 ns long (kineto's widening).
    for (size_t i : idx)
      spans.emplace_back(markers[i].start,
                         markers[i].onDevice ? std::max(markers[i].end, markers[i].start + 2) : markers[i].end);
    const std::vector<int32_t> levels = nestingLevels(spans);
    for (size_t k = 0; k < idx.size(); ++k) {
      level[idx[k]] = levels[k];
      if (levels[k] > 0) ++c.markerRangesMoved;
    }
  }
  return level;
}

}  // namespace

void buildMarkerActivities(const MarkerTable& table, const OpTimeline& ops, CorrelationIds& ids,
                           libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes, SessionCounters& c) {
  const std::vector<int32_t> levels = rangeLevels(table.markers, c);
  for (size_t i = 0; i < table.markers.size(); ++i) {
    const Marker& m = table.markers[i];
    auto owned = std::make_unique<NpuActivity>(buffer.span, typeOf(m),
                                               m.name                               ? *m.name
                                               : m.kind == MarkerKind::kUnpairedEnd ? kRangeEndName
                                                                                    : kUnknownName);
    NpuActivity& act = *owned;
    buffer.activities.push_back(std::move(owned));
    act.id = ids.next();
    act.device = m.lane;
    act.resource = m.row;
    act.threadId = m.row;
    if (levels[i] >= 0) {  // a range: on its own lane beside the one it was recorded on
      const int32_t lane =
          lanes.rangeLane(m.lane, m.onDevice ? RangeLane::kStreamMstx : RangeLane::kHostMstx, m.row, levels[i]);
      act.resource = lane;
      act.threadId = lane;
    }
    if (m.onDevice) {
      act.startTime = m.start + kAnnotationWideningNs;
      act.endTime = std::max(act.startTime, m.end - kAnnotationWideningNs);
      if (levels[i] < 0) lanes.addStream(m.lane, m.row);
    } else {
      act.startTime = m.start;
      act.endTime = m.end;
      if (levels[i] < 0 && !ops.ranOps(static_cast<uint32_t>(m.row))) lanes.addLaunchThread(m.lane, m.row);
    }
    act.quotedArg(kDomain, m.domain ? std::string_view(*m.domain) : std::string_view(kUnknownMarkerDomain));
    act.arg(kMarkerId, m.id);
    if (m.kind == MarkerKind::kUnpairedStart) act.quotedArg(kUnpaired, "start");
    if (m.kind == MarkerKind::kUnpairedEnd) act.quotedArg(kUnpaired, "end");
    if (m.kind == MarkerKind::kUnknownFlag) act.arg(kFlag, m.flag);
    ++c.markerRows;
  }
}

}  // namespace torch_mspti
