#include "MsptiRecordWalker.h"

#include <cstddef>
#include <cstring>

#include "ActivityKinds.h"
#include "KindHandlers.h"

namespace torch_mspti {

void WalkResult::clear() {
  devices.clear();
  apis.clear();
  externals.clear();
  memory.clear();
  markers.clear();
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
  size_t devices = 0, apis = 0, externals = 0, memory = 0, markers = 0, pos = 0;
  while (validSize - pos >= sizeof(uint32_t)) {
    uint32_t kind = 0;
    std::memcpy(&kind, buffer + pos, sizeof(kind));
    const size_t size = recordSize(kind);
    if (size == 0 || size > validSize - pos) break;
    switch (kindHandler(kind).keptAs) {
      case KeptAs::kDeviceRow: ++devices; break;
      case KeptAs::kApiCall: ++apis; break;
      case KeptAs::kExternalCorrelation: ++externals; break;
      case KeptAs::kMemoryEvent: ++memory; break;
      case KeptAs::kMarker: ++markers; break;
      case KeptAs::kNothing: break;
    }
    pos += size;
  }
  out.devices.reserve(out.devices.size() + devices);
  out.apis.reserve(out.apis.size() + apis);
  out.externals.reserve(out.externals.size() + externals);
  out.memory.reserve(out.memory.size() + memory);
  out.markers.reserve(out.markers.size() + markers);
}

}  // namespace

void MsptiRecordWalker::walk(const uint8_t* buffer, size_t validSize, NameTable* names, WalkResult& out) {
  if (!buffer) return;
  cache_.clear();  // MSPTI's string pointers are only known to be stable within one buffer
  if (names) reserveFor(buffer, validSize, out);
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
    // Each kind's read function copies out what the plugin keeps (KindHandlers.cpp).
    if (names) {
      if (auto read = kindHandler(kind).read) {
        RecordReader reader{out, *names, cache_};
        read(buffer + pos, kind, reader);
      }
    }
    ++out.recordsByKind[kind];
    ++out.records;
    pos += size;
  }
}

}  // namespace torch_mspti
