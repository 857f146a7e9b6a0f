#include "MsptiRecordWalker.h"

#include <cstddef>
#include <cstring>

#include "ActivityKinds.h"

namespace torch_mspti {

void WalkResult::clear() {
  devices.clear();
  apis.clear();
  externals.clear();
  std::memset(recordsByKind, 0, sizeof(recordsByKind));
  records = 0;
  abandonedBytes = 0;
  abandonedKind = 0;
  abandoned = false;
}

namespace {

// Reserves room for the records the walk will keep: a completion's batch usually starts empty
// (MSPTI runs each completion on a new thread, mspti.md 5.2), and growing vectors of 100k records
// by doubling copies them about twice over. Stops where the walk would stop.
void reserveFor(const uint8_t* buffer, size_t validSize, WalkResult& out) {
  size_t devices = 0, apis = 0, externals = 0, pos = 0;
  while (validSize - pos >= sizeof(uint32_t)) {
    uint32_t kind = 0;
    std::memcpy(&kind, buffer + pos, sizeof(kind));
    const size_t size = recordSize(kind);
    if (size == 0 || size > validSize - pos) break;
    switch (recordRole(kind)) {
      case RecordRole::kKernel:
      case RecordRole::kCommunication:
      case RecordRole::kMemcpy:
      case RecordRole::kMemset: ++devices; break;
      case RecordRole::kApi: ++apis; break;
      case RecordRole::kExternalCorrelation: ++externals; break;
      default: break;
    }
    pos += size;
  }
  out.devices.reserve(out.devices.size() + devices);
  out.apis.reserve(out.apis.size() + apis);
  out.externals.reserve(out.externals.size() + externals);
}

// Enum fields are read as integers: a buffer may hold any value there, and loading an enum
// outside its range is undefined behaviour (found by tests/fuzz with UBSan).
uint32_t rawField(const uint8_t* record, size_t offset) {
  uint32_t v = 0;
  std::memcpy(&v, record + offset, sizeof(v));
  return v;
}

// A device row with the fields every device record has: kind, times, correlation id, and where it
// ran (`device`, `stream`: the record's own fields, which sit in a struct in some kinds).
template <class Record>
DeviceRecord& appendDeviceRow(WalkResult& out, uint32_t kind, const Record& rec, uint32_t device, uint32_t stream) {
  DeviceRecord& r = out.devices.emplace_back();
  r.kind = kind;
  r.start = static_cast<int64_t>(rec.start);
  r.end = static_cast<int64_t>(rec.end);
  r.correlationId = rec.correlationId;
  r.deviceId = device;
  r.streamId = stream;
  return r;
}

}  // namespace

void MsptiRecordWalker::walk(const uint8_t* buffer, size_t validSize, NameTable* names, WalkResult& out) {
  if (!buffer) return;
  cache_.clear();  // MSPTI's string pointers are only known to be stable within one buffer
  if (names) reserveFor(buffer, validSize, out);
  auto intern = [&](const char* s) { return cache_.lookup(*names, s); };
  size_t pos = 0;
  while (pos < validSize) {
    uint32_t kind = 0;
    if (validSize - pos < sizeof(kind)) {
      out.abandoned = true;
      out.abandonedBytes += validSize - pos;
      break;
    }
    std::memcpy(&kind, buffer + pos, sizeof(kind));
    const size_t size = recordSize(kind);
    if (size == 0 || size > validSize - pos) {
      out.abandoned = true;
      out.abandonedKind = kind;
      out.abandonedBytes += validSize - pos;
      break;
    }
    const uint8_t* p = buffer + pos;
    // Copied into aligned locals: packed fields (8-byte values at offset 4) are then read safely.
    if (names) {
      switch (recordRole(kind)) {
        case RecordRole::kKernel: {
          msptiActivityKernel k;
          std::memcpy(&k, p, sizeof(k));
          DeviceRecord& r = appendDeviceRow(out, kind, k, k.ds.deviceId, k.ds.streamId);
          r.name = intern(k.name);
          r.detail = intern(k.type);
          break;
        }
        case RecordRole::kCommunication: {
          msptiActivityCommunication c;
          std::memcpy(&c, p, sizeof(c));
          DeviceRecord& r = appendDeviceRow(out, kind, c, c.ds.deviceId, c.ds.streamId);
          r.subkind = rawField(p, offsetof(msptiActivityCommunication, dataType));
          r.count = c.count;
          r.name = intern(c.name);
          r.detail = intern(c.algType);
          r.group = intern(c.commName);
          break;
        }
        case RecordRole::kMemcpy: {
          msptiActivityMemcpy m;
          std::memcpy(&m, p, sizeof(m));
          DeviceRecord& r = appendDeviceRow(out, kind, m, m.deviceId, m.streamId);
          r.subkind = rawField(p, offsetof(msptiActivityMemcpy, copyKind));
          r.count = m.bytes;
          r.isAsync = m.isAsync != 0;
          break;
        }
        case RecordRole::kMemset: {
          msptiActivityMemset m;
          std::memcpy(&m, p, sizeof(m));
          DeviceRecord& r = appendDeviceRow(out, kind, m, m.deviceId, m.streamId);
          r.subkind = m.value;
          r.count = m.bytes;
          r.isAsync = m.isAsync != 0;
          break;
        }
        case RecordRole::kApi: {
          msptiActivityApi a;
          std::memcpy(&a, p, sizeof(a));
          out.apis.push_back({static_cast<int64_t>(a.start), static_cast<int64_t>(a.end), a.pt.processId, a.pt.threadId,
                              a.correlationId, kind, intern(a.name)});
          break;
        }
        case RecordRole::kExternalCorrelation: {
          msptiActivityExternalCorrelation e;
          std::memcpy(&e, p, sizeof(e));
          out.externals.push_back(
              {rawField(p, offsetof(msptiActivityExternalCorrelation, externalKind)), e.externalId, e.correlationId});
          break;
        }
        default: break;  // sized and counted, not kept
      }
    }
    ++out.recordsByKind[kind];
    ++out.records;
    pos += size;
  }
}

}  // namespace torch_mspti
