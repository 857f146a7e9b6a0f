#include "KindHandlers.h"

#include <cctype>
#include <cstring>
#include <utility>

namespace torch_mspti {
namespace {

// Metadata keys, built once. The collective keys are those of kineto's NCCL rows, so tools that
// read CUDA traces find them.
const std::string kType = "type";
const std::string kCollective = "Collective name";
const std::string kAlgorithm = "algorithm";
const std::string kDtype = "dtype";
const std::string kBytes = "bytes";
const std::string kCommName = "comm name";
const std::string kCommunicationType = "COMMUNICATION";  // a collective row's "type": MSPTI's kind
const std::string kBandwidth = "memory bandwidth (GB/s)";
const std::string kCopyKind = "copy kind";
const std::string kAsync = "async";
const std::string kValue = "value";

// Enum fields are read as integers: a buffer may hold any value there, and loading an enum
// outside its range is undefined behaviour (found by tests/fuzz with UBSan).
uint32_t rawField(const uint8_t* record, size_t offset) {
  uint32_t v = 0;
  std::memcpy(&v, record + offset, sizeof(v));
  return v;
}

// Records are copied into aligned locals: packed fields (8-byte values at offset 4) are then read
// safely.
template <class Record>
Record load(const uint8_t* p) {
  Record r;
  std::memcpy(&r, p, sizeof(r));
  return r;
}

// A device row with the fields every device record has: kind, times, correlation id, and where it
// ran (`device`, `stream`: the record's own fields, which sit in a struct in some kinds).
template <class Record>
DeviceRecord& appendDeviceRow(RecordReader& in, uint32_t kind, const Record& rec, uint32_t device, uint32_t stream) {
  DeviceRecord& r = in.out.devices.emplace_back();
  r.kind = kind;
  r.start = static_cast<int64_t>(rec.start);
  r.end = static_cast<int64_t>(rec.end);
  r.correlationId = rec.correlationId;
  r.deviceId = device;
  r.streamId = stream;
  return r;
}

double gigabytesPerSecond(uint64_t bytes, int64_t durationNs) {
  return durationNs > 0 ? static_cast<double>(bytes) / static_cast<double>(durationNs) : 0.0;
}

std::string nameOf(const DeviceRecord& r) { return r.name ? *r.name : std::string("unknown"); }

// --- KERNEL: a kernel that ran on a device stream (msptiActivityKernel, mspti.md 3.2)

void readKernel(const uint8_t* p, uint32_t kind, RecordReader& in) {
  const auto k = load<msptiActivityKernel>(p);
  DeviceRecord& r = appendDeviceRow(in, kind, k, k.ds.deviceId, k.ds.streamId);
  r.name = in.intern(k.name);
  r.detail = in.intern(k.type);
}

void describeKernel(const DeviceRecord& r, RowFacts& out) {
  if (r.detail) out.text(kType, *r.detail);
}

// --- COMMUNICATION: a collective that ran on a device stream (msptiActivityCommunication,
// mspti.md 3.3)

void readCommunication(const uint8_t* p, uint32_t kind, RecordReader& in) {
  const auto c = load<msptiActivityCommunication>(p);
  DeviceRecord& r = appendDeviceRow(in, kind, c, c.ds.deviceId, c.ds.streamId);
  r.subkind = rawField(p, offsetof(msptiActivityCommunication, dataType));
  r.count = c.count;
  r.name = in.intern(c.name);
  r.detail = in.intern(c.algType);
  r.group = in.intern(c.commName);
}

void describeCommunication(const DeviceRecord& r, RowFacts& out) {
  const std::string collective = r.name ? collectiveName(*r.name) : "";
  out.text(kType, kCommunicationType);
  if (!collective.empty()) out.text(kCollective, collective);
  if (r.detail) out.text(kAlgorithm, *r.detail);
  out.text(kDtype, communicationTypeName(r.subkind));
  if (const uint32_t size = communicationTypeSize(r.subkind)) out.number(kBytes, r.count * size);
  if (r.group) out.text(kCommName, *r.group);
  // "In msg nelems", "Process Group Name" and the other group facts: describeCollective
  // (CollectiveJoin.h), which knows the row's process group when the join found it.
}

// --- MEMCPY: a copy task on a device stream (msptiActivityMemcpy, mspti.md 3.2)

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

void readMemcpy(const uint8_t* p, uint32_t kind, RecordReader& in) {
  const auto m = load<msptiActivityMemcpy>(p);
  DeviceRecord& r = appendDeviceRow(in, kind, m, m.deviceId, m.streamId);
  r.subkind = rawField(p, offsetof(msptiActivityMemcpy, copyKind));
  r.count = m.bytes;
  r.isAsync = m.isAsync != 0;
}

// kineto's CUDA form "Memcpy HtoD (Pageable -> Device)"; MSPTI does not say whether host memory
// is pinned, so the ends are named Host and Device.
std::string memcpyName(const DeviceRecord& r) {
  switch (r.subkind) {
    case MSPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH (Host -> Host)";
    case MSPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD (Host -> Device)";
    case MSPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH (Device -> Host)";
    case MSPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD (Device -> Device)";
    default: return std::string("Memcpy ") + copyKindShort(r.subkind);
  }
}

void describeMemcpy(const DeviceRecord& r, RowFacts& out) {
  out.number(kBytes, r.count);
  out.real(kBandwidth, gigabytesPerSecond(r.count, r.end - r.start));
  out.text(kCopyKind, copyKindShort(r.subkind));
  out.number(kAsync, r.isAsync ? 1 : 0);
}

// --- MEMSET: a memset task on a device stream (msptiActivityMemset, mspti.md 3.2)

void readMemset(const uint8_t* p, uint32_t kind, RecordReader& in) {
  const auto m = load<msptiActivityMemset>(p);
  DeviceRecord& r = appendDeviceRow(in, kind, m, m.deviceId, m.streamId);
  r.subkind = m.value;
  r.count = m.bytes;
  r.isAsync = m.isAsync != 0;
}

std::string memsetName(const DeviceRecord&) { return "Memset (Device)"; }

void describeMemset(const DeviceRecord& r, RowFacts& out) {
  out.number(kBytes, r.count);
  out.real(kBandwidth, gigabytesPerSecond(r.count, r.end - r.start));
  out.number(kValue, r.subkind);
  out.number(kAsync, r.isAsync ? 1 : 0);
}

// --- MEMORY: a runtime allocation or release (msptiActivityMemory, mspti.md 3.4, 5.8)

void readMemory(const uint8_t* p, uint32_t, RecordReader& in) {
  const auto m = load<msptiActivityMemory>(p);
  MemoryRecord& r = in.out.memory.emplace_back();
  r.start = static_cast<int64_t>(m.start);
  r.end = static_cast<int64_t>(m.end);
  r.correlationId = m.correlationId;
  r.address = m.address;
  r.bytes = m.bytes;
  r.deviceId = m.deviceId;
  r.streamId = m.streamId;
  r.processId = m.processId;
  r.operation = rawField(p, offsetof(msptiActivityMemory, memoryOperationType));
  r.memoryKind = rawField(p, offsetof(msptiActivityMemory, memoryKind));
}

// --- API, ACL_API, NODE_API, RUNTIME_API: a host API call (msptiActivityApi, mspti.md 3.2)

void readApi(const uint8_t* p, uint32_t kind, RecordReader& in) {
  const auto a = load<msptiActivityApi>(p);
  in.out.apis.push_back({static_cast<int64_t>(a.start), static_cast<int64_t>(a.end), a.pt.processId, a.pt.threadId,
                         a.correlationId, kind, in.intern(a.name)});
}

// --- EXTERNAL_CORRELATION: an external id bound to a launch (msptiActivityExternalCorrelation)

void readExternalCorrelation(const uint8_t* p, uint32_t, RecordReader& in) {
  const auto e = load<msptiActivityExternalCorrelation>(p);
  in.out.externals.push_back(
      {rawField(p, offsetof(msptiActivityExternalCorrelation, externalKind)), e.externalId, e.correlationId});
}

// --- MARKER: an mstx mark or one end of an mstx range (msptiActivityMarker, mspti.md 3.4, 5.9)

void readMarker(const uint8_t* p, uint32_t, RecordReader& in) {
  const auto m = load<msptiActivityMarker>(p);
  MarkerRecord& r = in.out.markers.emplace_back();
  r.timestamp = static_cast<int64_t>(m.timestamp);
  r.id = m.id;
  r.flag = rawField(p, offsetof(msptiActivityMarker, flag));
  r.sourceKind = rawField(p, offsetof(msptiActivityMarker, sourceKind));
  r.first = m.objectId.pt.processId;  // ds.deviceId for a device marker (the union's first word)
  r.second = m.objectId.pt.threadId;  // ds.streamId
  // End and device records carry "" (or NULL) for both; NULL as the domain of a start or mark is
  // the default domain, which MSPTI names "default" (mspti.md 5.9).
  r.name = m.name && *m.name ? in.intern(m.name) : nullptr;
  r.domain = !m.domain ? in.intern(kDefaultMarkerDomain) : *m.domain ? in.intern(m.domain) : nullptr;
  if (r.name && r.domain && *r.domain == kCommunicationMarkerDomain) r.message = in.names.internRaw(m.name);
}

using C = ConfigSnapshot;
using S = SessionCounters;

// The admission columns (Admission.h), by record shape.
constexpr AdmissionRule kNeverKept{};
// Kernel and collective rows: device times, windowed by their launch call, stale by id.
constexpr AdmissionRule kDeviceTimed{TimeBase::kDevice, WindowBy::kLaunchCall, StaleBy::kCorrelationId};
// Copy and memset rows: the host call's span on MSPTI's host clock (mspti.md 5.7).
constexpr AdmissionRule kHostTimedRow{TimeBase::kHost, WindowBy::kLaunchCall, StaleBy::kCorrelationId};
// MEMORY records: the allocation call's span on the host clock (mspti.md 5.8), windowed by it;
// written as the call returns (never late), stale only at or below the watermark.
constexpr AdmissionRule kHostEvent{TimeBase::kHost, WindowBy::kOwnTime, StaleBy::kWatermark};
// MARKER records: host records on the host clock, device records on the device's (mspti.md 4);
// no correlation id: a late marker of an earlier session lies before this one's start.
constexpr AdmissionRule kMarkerRule{TimeBase::kBySource, WindowBy::kOwnTime, StaleBy::kNever};
// API calls: host clock (HostClock decides it from them); evidence for the launches they make.
constexpr AdmissionRule kCall{TimeBase::kHost, WindowBy::kLaunchedRows, StaleBy::kCorrelationId};
// External correlations: no time; evidence for the launch they name.
constexpr AdmissionRule kExternal{TimeBase::kUntimed, WindowBy::kLaunchedRows, StaleBy::kCorrelationId};

// One row per kind, indexed by the kind's value. HCCL is walked and counted, not collected.
constexpr KindHandler kKindHandlers[] = {
    {MSPTI_ACTIVITY_KIND_INVALID, nullptr, KeptAs::kNothing, TraceRow::kNone, LaunchClass::kNone, true, kNeverKept,
     nullptr, nullptr, nullptr, nullptr},
    {MSPTI_ACTIVITY_KIND_MARKER, &C::enableMarkers, KeptAs::kMarker, TraceRow::kNone, LaunchClass::kNone, true,
     kMarkerRule, nullptr, &readMarker, nullptr, nullptr},
    {MSPTI_ACTIVITY_KIND_KERNEL, &C::enableKernels, KeptAs::kDeviceRow, TraceRow::kKernel, LaunchClass::kKernel, true,
     kDeviceTimed, &S::kernels, &readKernel, &nameOf, &describeKernel},
    {MSPTI_ACTIVITY_KIND_API, &C::enableApiRecords, KeptAs::kApiCall, TraceRow::kNone, LaunchClass::kNone, true, kCall,
     nullptr, &readApi, nullptr, nullptr},
    {MSPTI_ACTIVITY_KIND_HCCL, nullptr, KeptAs::kNothing, TraceRow::kNone, LaunchClass::kNone, true, kNeverKept,
     nullptr, nullptr, nullptr, nullptr},
    // Instants and a counter track per device (MemoryActivities), not rows of a launch.
    {MSPTI_ACTIVITY_KIND_MEMORY, &C::enableMemory, KeptAs::kMemoryEvent, TraceRow::kNone, LaunchClass::kMemory, false,
     kHostEvent, &S::memoryEvents, &readMemory, nullptr, nullptr},
    {MSPTI_ACTIVITY_KIND_MEMSET, &C::enableMemcpyMemset, KeptAs::kDeviceRow, TraceRow::kMemset, LaunchClass::kMemset,
     false, kHostTimedRow, &S::memsets, &readMemset, &memsetName, &describeMemset},
    {MSPTI_ACTIVITY_KIND_MEMCPY, &C::enableMemcpyMemset, KeptAs::kDeviceRow, TraceRow::kMemcpy, LaunchClass::kMemcpy,
     false, kHostTimedRow, &S::memcpys, &readMemcpy, &memcpyName, &describeMemcpy},
    {MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, &C::enableExternalCorrelation, KeptAs::kExternalCorrelation,
     TraceRow::kNone, LaunchClass::kNone, true, kExternal, nullptr, &readExternalCorrelation, nullptr, nullptr},
    {MSPTI_ACTIVITY_KIND_COMMUNICATION, &C::enableCommunication, KeptAs::kDeviceRow, TraceRow::kKernel,
     LaunchClass::kCommunication, true, kDeviceTimed, &S::communications, &readCommunication, &nameOf,
     &describeCommunication},
    // ACL_API and NODE_API are kept when a library gives them (MSPTI 26.0), never enabled: the
    // launch calls are RUNTIME_API records (mspti.md 3.2, 8).
    {MSPTI_ACTIVITY_KIND_ACL_API, nullptr, KeptAs::kApiCall, TraceRow::kNone, LaunchClass::kNone, true, kCall, nullptr,
     &readApi, nullptr, nullptr},
    {MSPTI_ACTIVITY_KIND_NODE_API, nullptr, KeptAs::kApiCall, TraceRow::kNone, LaunchClass::kNone, true, kCall, nullptr,
     &readApi, nullptr, nullptr},
    {MSPTI_ACTIVITY_KIND_RUNTIME_API, &C::enableApiRecords, KeptAs::kApiCall, TraceRow::kNone, LaunchClass::kNone, true,
     kCall, nullptr, &readApi, nullptr, nullptr},
};

static_assert(sizeof(kKindHandlers) / sizeof(kKindHandlers[0]) == kActivityKindCount, "one row per MSPTI kind");

constexpr bool handlersInOrderAndComplete() {
  for (size_t i = 0; i < kActivityKindCount; ++i) {
    const KindHandler& h = kKindHandlers[i];
    if (static_cast<size_t>(h.kind) != i) return false;
    // A kept device row has all its handlers and a row to become; nothing else has a row.
    const bool device = h.keptAs == KeptAs::kDeviceRow;
    if (device != (h.row != TraceRow::kNone)) return false;
    if (device && (!h.rowName || !h.describe || !h.rows || h.answers == LaunchClass::kNone)) return false;
    if ((h.keptAs == KeptAs::kNothing) != (h.read == nullptr)) return false;
    // A kept kind says its clock, its window and its stale rule (Admission.h).
    const AdmissionRule& a = h.admit;
    if (h.keptAs != KeptAs::kNothing &&
        (a.time == TimeBase::kUnset || a.window == WindowBy::kUnset || a.stale == StaleBy::kUnset))
      return false;
    // Rows and events are windowed on their own account; calls and externals only describe launches.
    const bool windowed = device || h.keptAs == KeptAs::kMemoryEvent || h.keptAs == KeptAs::kMarker;
    if (windowed == (a.window == WindowBy::kLaunchedRows) && h.keptAs != KeptAs::kNothing) return false;
    if (device && a.window != WindowBy::kLaunchCall) return false;
  }
  return true;
}
static_assert(handlersInOrderAndComplete(),
              "kKindHandlers: indexed by kind, each kept kind with its handlers and its admission rule");

}  // namespace

const KindHandler& kindHandler(uint32_t kind) {
  return kind < kActivityKindCount ? kKindHandlers[kind] : kKindHandlers[MSPTI_ACTIVITY_KIND_INVALID];
}

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

}  // namespace torch_mspti
