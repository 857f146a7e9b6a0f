#include "ActivityBuilder.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>
#include <vector>

#include "LinkResolver.h"
#include "TorchCompat.h"

namespace torch_mspti {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

// Metadata keys, built once (kineto takes them as std::string). The collective keys are those of
// kineto's NCCL rows, so tools that read CUDA traces find them.
const std::string kDevice = "device";
const std::string kStream = "stream";
const std::string kCorrelation = "correlation";
const std::string kLink = "link";
const std::string kType = "type";
const std::string kCollective = "Collective name";
const std::string kAlgorithm = "algorithm";
const std::string kInNelems = "In msg nelems";
const std::string kDtype = "dtype";
const std::string kBytes = "bytes";
const std::string kGroup = "Process Group Name";
const std::string kBandwidth = "memory bandwidth (GB/s)";
const std::string kCopyKind = "copy kind";
const std::string kAsync = "async";
const std::string kValue = "value";

// What kineto's Chrome writer adds on each side of a GPU_USER_ANNOTATION, ns.
constexpr int64_t kAnnotationWideningNs = 1;

const char* copyKindShort(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case MSPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case MSPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case MSPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT: return "Default";
    default: return "Unknown";
  }
}

// kineto's CUDA form "Memcpy HtoD (Pageable -> Device)"; MSPTI does not say whether host memory
// is pinned, so the ends are named Host and Device.
std::string copyName(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH (Host -> Host)";
    case MSPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD (Host -> Device)";
    case MSPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH (Device -> Host)";
    case MSPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD (Device -> Device)";
    default: return std::string("Memcpy ") + copyKindShort(kind);
  }
}

double gigabytesPerSecond(uint64_t bytes, int64_t durationNs) {
  return durationNs > 0 ? static_cast<double>(bytes) / static_cast<double>(durationNs) : 0.0;
}

ActivityType rowType(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_MEMCPY: return ActivityType::GPU_MEMCPY;
    case MSPTI_ACTIVITY_KIND_MEMSET: return ActivityType::GPU_MEMSET;
    default: return ActivityType::CONCURRENT_KERNEL;  // kernels and collectives
  }
}

std::string rowName(const DeviceRecord& r) {
  switch (r.kind) {
    case MSPTI_ACTIVITY_KIND_MEMCPY: return copyName(r.subkind);
    case MSPTI_ACTIVITY_KIND_MEMSET: return "Memset (Device)";
    default: return r.name ? *r.name : std::string("unknown");
  }
}

void addFacts(GenericTraceActivity& act, const DeviceRecord& r, SessionCounters& c) {
  switch (r.kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL:
      if (r.detail) act.addMetadataQuoted(kType, *r.detail);
      ++c.kernels;
      break;
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: {
      const std::string collective = r.name ? collectiveName(*r.name) : "";
      if (!collective.empty()) act.addMetadataQuoted(kCollective, collective);
      if (r.detail) act.addMetadataQuoted(kAlgorithm, *r.detail);
      act.addMetadata(kInNelems, r.count);
      act.addMetadataQuoted(kDtype, communicationTypeName(r.subkind));
      if (const uint32_t size = communicationTypeSize(r.subkind)) act.addMetadata(kBytes, r.count * size);
      if (r.group) act.addMetadataQuoted(kGroup, *r.group);
      ++c.communications;
      break;
    }
    case MSPTI_ACTIVITY_KIND_MEMCPY:
    case MSPTI_ACTIVITY_KIND_MEMSET: {
      act.addMetadata(kBytes, r.count);
      act.addMetadata(kBandwidth, gigabytesPerSecond(r.count, r.end - r.start));
      if (r.kind == MSPTI_ACTIVITY_KIND_MEMCPY) {
        act.addMetadataQuoted(kCopyKind, copyKindShort(r.subkind));
        ++c.memcpys;
      } else {
        act.addMetadata(kValue, r.subkind);
        ++c.memsets;
      }
      act.addMetadata(kAsync, r.isAsync ? 1 : 0);
      break;
    }
    default: break;
  }
}

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

std::string collectiveName(const std::string& msptiName) {
  std::string s;
  for (char ch : msptiName)
    if (std::isalnum(static_cast<unsigned char>(ch)))
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // Longest first: "reducescatter" before "reduce", "allgather" before "gather".
  static const std::pair<const char*, const char*> kKnown[] = {
      {"reducescatter", "reduce_scatter"},
      {"allreduce", "allreduce"},
      {"allgather", "allgather"},
      {"alltoallv", "all_to_allv"},
      {"alltoall", "all_to_all"},
      {"broadcast", "broadcast"},
      {"barrier", "barrier"},
      {"scatter", "scatter"},
      {"gather", "gather"},
      {"reduce", "reduce"},
      {"send", "send"},
      {"recv", "recv"},
      {"receive", "recv"},
  };
  for (const auto& [needle, out] : kKnown)
    if (s.find(needle) != std::string::npos) return out;
  return "";
}

const char* communicationTypeName(uint32_t t) {
  static const char* const kNames[] = {"Char",   "Short", "Int",      "Half",          "Float",       "Long",
                                       "UInt64", "Byte",  "UInt16",   "UInt32",        "Double",      "BFloat16",
                                       "Int128", "",      "HiFloat8", "Float8_e4m3fn", "Float8_e5m2", "Float8_e8m0fnu"};
  return t < sizeof(kNames) / sizeof(kNames[0]) && *kNames[t] ? kNames[t] : "unknown";
}

uint32_t communicationTypeSize(uint32_t t) {
  static const uint32_t kSizes[] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2, 16, 0, 1, 1, 1, 1};
  return t < sizeof(kSizes) / sizeof(kSizes[0]) ? kSizes[t] : 0;
}

void buildActivities(const BuildContext& in, libkineto::CpuTraceBuffer& buffer, DeviceLanes& lanes,
                     SessionCounters& c) {
  const LaunchTable& table = *in.launches;
  // (user range node, device, stream) -> [start, end] of the rows launched inside the range.
  std::map<std::tuple<const OpNode*, int32_t, int32_t>, std::pair<int64_t, int64_t>> spans;

  for (const Launch& l : table.launches) {
    const LinkDecision d = resolveLink(l, *in.ops);
    c.linkCount(d.state) += l.rowCount;
    const int32_t launchId = in.ids->next();
    const std::string linkName = linkStateName(d.state);

    auto ev = std::make_unique<GenericTraceActivity>(buffer.span, ActivityType::PRIVATEUSE1_RUNTIME,
                                                     l.call && l.call->name ? *l.call->name : "LaunchKernel");
    const bool hasLaunchEvent = placeLaunch(l, d, in, *ev);
    if (hasLaunchEvent) {
      ev->id = launchId;
      ev->flow.id = compat::flowIdFor(launchId);
      ev->flow.type = libkineto::kLinkAsyncCpuGpu;
      ev->flow.start = 1;
      ev->addMetadata(kCorrelation, launchId);
      ev->addMetadataQuoted(kLink, linkName);
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
      auto& act = *buffer.activities.emplace_back(
          std::make_unique<GenericTraceActivity>(buffer.span, rowType(r.kind), rowName(r)));
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
      act.addMetadata(kDevice, row.device);
      act.addMetadata(kStream, stream);
      act.addMetadata(kCorrelation, launchId);
      act.addMetadataQuoted(kLink, linkName);
      addFacts(act, r, c);
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
  for (const Span& s : ordered) {
    const OpNode* node = s.node;
    const int32_t device = s.device, stream = s.stream;
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
