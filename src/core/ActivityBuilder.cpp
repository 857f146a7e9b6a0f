#include "ActivityBuilder.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "CollectiveJoin.h"
#include "KindHandlers.h"
#include "LinkResolver.h"
#include "NpuActivity.h"
#include "TorchCompat.h"

namespace torch_mspti {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

// Args every device row has; each kind's own keys are with its handler (KindHandlers.cpp).
constexpr std::string_view kDevice = "device";
constexpr std::string_view kStream = "stream";
// The stream again under torch_npu's name: its MSPTI backend writes it, and its tests and tools read it.
constexpr std::string_view kStreamId = "streamId";
constexpr std::string_view kCorrelation = "correlation";
constexpr std::string_view kLink = "link";

// Room for a launch event's args (correlation, link) and a kernel row's (device, stream, streamId,
// correlation, link, type); collectives and copies have more and grow once more.
constexpr size_t kLaunchArgsBytes = 48;
constexpr size_t kRowArgsBytes = 120;

// What kineto's Chrome writer adds on each side of a GPU_USER_ANNOTATION, ns.
constexpr int64_t kAnnotationWideningNs = 1;

ActivityType rowType(TraceRow row) {
  switch (row) {
    case TraceRow::kMemcpy: return ActivityType::GPU_MEMCPY;
    case TraceRow::kMemset: return ActivityType::GPU_MEMSET;
    default: return ActivityType::CONCURRENT_KERNEL;  // kernels and collectives
  }
}

// A kind's facts (KindHandlers.h) written as the row's args: strings quoted, numbers as numbers.
class MetadataFacts final : public RowFacts {
 public:
  explicit MetadataFacts(NpuActivity& act) : act_(act) {}
  void text(const std::string& key, const std::string& value) override { act_.quotedArg(key, value); }
  void number(const std::string& key, uint64_t value) override { act_.arg(key, value); }
  void real(const std::string& key, double value) override { act_.arg(key, value); }

 private:
  NpuActivity& act_;
};

// Where a launch event goes and how long it is; false when the launch gets none.
bool placeLaunch(const Launch& l, const LinkDecision& d, const BuildContext& in, GenericTraceActivity& ev) {
  if (d.op) {
    const libkineto::ITraceActivity& op = *d.op->activity;
    int64_t start = d.op->start, end = d.op->start;
    if (l.callTrusted) {
      start = std::clamp(l.callStart, d.op->start, d.op->end);
      end = std::clamp(l.callEnd, start, d.op->end);
    }
    ev.device = op.deviceId();
    ev.resource = static_cast<int32_t>(op.resourceId());
    ev.threadId = op.getThreadId();
    ev.startTime = start;
    ev.endTime = std::max(end, start + 1);  // at least 1 ns, so viewers draw it and the arrow
    ev.linked = &op;
    return true;
  }
  if (d.state == LinkState::kNoOpOnThread) {
    ev.device = in.processId;
    ev.resource = static_cast<int32_t>(d.launchThread);
    ev.threadId = static_cast<int32_t>(d.launchThread);
    ev.startTime = l.callStart;
    ev.endTime = std::max(l.callEnd, l.callStart + 1);
    return true;
  }
  return false;
}

}  // namespace

void buildActivities(const BuildContext& in, libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes,
                     SessionCounters& c) {
  const LaunchTable& table = *in.launches;
  // (user range node, device, stream) -> [start, end] of the rows launched inside the range.
  std::map<std::tuple<const OpNode*, int32_t, int32_t>, std::pair<int64_t, int64_t>> spans;

  for (const Launch& l : table.launches) {
    const LinkDecision d = resolveLink(l, *in.ops);
    c.linkCount(d.state) += l.rowCount;
    const int32_t launchId = in.ids->next();
    const std::string_view linkName = linkStateName(d.state);

    auto ev = std::make_unique<NpuActivity>(buffer.span, ActivityType::PRIVATEUSE1_RUNTIME,
                                            l.call && l.call->name ? *l.call->name : "LaunchKernel", kLaunchArgsBytes);
    const bool hasLaunchEvent = placeLaunch(l, d, in, *ev);
    if (hasLaunchEvent) {
      ev->id = launchId;
      ev->flow.id = compat::flowIdFor(launchId);
      ev->flow.type = libkineto::kLinkAsyncCpuGpu;
      ev->flow.start = 1;
      ev->arg(kCorrelation, launchId);
      ev->quotedArg(kLink, linkName);
      ++c.launchEvents;
      if (!d.op) {
        ++c.launchThreadEvents;
        if (!in.ops->ranOps(d.launchThread)) lanes.addLaunchThread(in.processId, static_cast<int32_t>(d.launchThread));
      }
      buffer.activities.push_back(std::move(ev));
    }

    for (uint32_t k = l.firstRow; k < l.firstRow + l.rowCount; ++k) {
      const DeviceRow& row = table.rows[k];
      const DeviceRecord& r = row.record;
      const int32_t stream = static_cast<int32_t>(r.streamId);
      const KindHandler& kind = kindHandler(r.kind);
      auto owned = std::make_unique<NpuActivity>(
          buffer.span, rowType(kind.row), kind.rowName ? kind.rowName(r) : std::string("unknown"), kRowArgsBytes);
      NpuActivity& act = *owned;
      buffer.activities.push_back(std::move(owned));
      act.startTime = r.start;
      act.endTime = r.end;
      act.id = launchId;
      act.device = row.device;
      act.resource = stream;
      act.threadId = stream;
      if (hasLaunchEvent) {
        act.flow.id = compat::flowIdFor(launchId);
        act.flow.type = libkineto::kLinkAsyncCpuGpu;
        act.flow.start = 0;
      }
      if (d.op) act.linked = d.op->activity;
      act.arg(kDevice, row.device);
      act.arg(kStream, stream);
      act.arg(kStreamId, stream);
      act.arg(kCorrelation, launchId);
      act.quotedArg(kLink, linkName);
      MetadataFacts facts(act);
      if (kind.describe) kind.describe(r, facts);
      describeCollective(in.collectives, k, r, facts);
      if (kind.rows) ++(c.*kind.rows);
      lanes.addStream(row.device, stream);
      ++c.deviceRows;
      for (const OpNode* n = d.op; n; n = in.ops->parent(*n)) {
        if (!n->userRange) continue;
        auto [it, fresh] = spans.try_emplace({n, row.device, stream}, r.start, r.end);
        if (!fresh) {
          it->second.first = std::min(it->second.first, r.start);
          it->second.second = std::max(it->second.second, r.end);
        }
      }
    }
  }

  // In a deterministic order, the one of the trace: by start, then op id, device and stream (the
  // map's order follows node addresses, which change from run to run).
  struct Span {
    int64_t start, end;
    const OpNode* node;
    int32_t device, stream;
  };
  std::vector<Span> ordered;
  ordered.reserve(spans.size());
  for (const auto& [key, range] : spans)
    ordered.push_back({range.first, range.second, std::get<0>(key), std::get<1>(key), std::get<2>(key)});
  std::sort(ordered.begin(), ordered.end(), [](const Span& a, const Span& b) {
    return std::tie(a.start, a.node->id, a.device, a.stream, a.end) <
           std::tie(b.start, b.node->id, b.device, b.stream, b.end);
  });
  // Two ranges whose kernels interleave on a stream give crossing spans: each one that crosses an
  // earlier span of its stream goes to a further lane, so that every lane nests (DeviceLanes.h).
  std::vector<int32_t> level(ordered.size(), 0);
  {
    std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> byLane;
    for (size_t i = 0; i < ordered.size(); ++i) byLane[{ordered[i].device, ordered[i].stream}].push_back(i);
    for (const auto& [lane, idx] : byLane) {
      std::vector<std::pair<int64_t, int64_t>> ranges;
      // As written: kineto widens each span by 1 ns per side after our 1 ns narrowing, and a span
      // shorter than 2 ns is written 2 ns long.
      for (size_t i : idx) ranges.emplace_back(ordered[i].start, std::max(ordered[i].end, ordered[i].start + 2));
      const std::vector<int32_t> levels = nestingLevels(ranges);
      for (size_t k = 0; k < idx.size(); ++k) level[idx[k]] = levels[k];
    }
  }
  for (size_t i = 0; i < ordered.size(); ++i) {
    const Span& s = ordered[i];
    const OpNode* node = s.node;
    const int32_t device = s.device;
    const int32_t stream =
        level[i] ? lanes.rangeLane(device, RangeLane::kStreamUserRanges, s.stream, level[i]) : s.stream;
    if (level[i]) ++c.annotationsMoved;
    const std::pair<int64_t, int64_t> range{s.start, s.end};
    auto& span = *buffer.activities.emplace_back(
        std::make_unique<GenericTraceActivity>(buffer.span, ActivityType::GPU_USER_ANNOTATION, node->activity->name()));
    // Narrowed by the 1 ns kineto's writer adds on each side (see the header).
    span.startTime = range.first + kAnnotationWideningNs;
    span.endTime = std::max(span.startTime, range.second - kAnnotationWideningNs);
    span.id = static_cast<int32_t>(node->id);
    span.device = device;
    span.resource = stream;
    span.threadId = stream;
    ++c.annotations;
  }
  buffer.gpuOpCount = static_cast<int>(std::min<uint64_t>(c.deviceRows, INT32_MAX));
}

}  // namespace torch_mspti
