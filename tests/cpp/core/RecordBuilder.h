// Packs MSPTI activity records into an 8-aligned buffer byte for byte as the documented ABI lays
// them out (DocumentedLayout.h: offsets from mspti.md 3.4, not from our declarations), so tests
// hand the plugin exactly what MSPTI would. String fields hold the pointers given; they must
// outlive the walk (string literals, or strings the test keeps).
// Thread-safety: none (one builder per test or per fake delivery).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "DocumentedLayout.h"

namespace torch_mspti::test {

// One device row of any of the four device kinds (KERNEL, COMMUNICATION, MEMCPY, MEMSET).
struct DeviceFields {
  uint64_t start = 0, end = 0;
  uint32_t deviceId = 0, streamId = 0;
  uint64_t correlationId = 0;
  const char* name = nullptr;    // KERNEL, COMMUNICATION
  const char* detail = nullptr;  // KERNEL: type; COMMUNICATION: algType
  const char* group = nullptr;   // COMMUNICATION: commName
  uint32_t subkind = 0;          // COMMUNICATION: dataType; MEMCPY: copyKind; MEMSET: value
  uint64_t count = 0;            // COMMUNICATION: elements; MEMCPY/MEMSET: bytes
  uint8_t isAsync = 0;
};

class RecordBuilder {
 public:
  RecordBuilder& kernel(uint64_t start, uint64_t end, uint32_t device, uint32_t stream, uint64_t corr, const char* name,
                        const char* type = "KERNEL_AICORE") {
    namespace k = layout::kernel;
    const size_t at = grow(layout::kKernel, k::kSize);
    put<uint64_t>(at + k::kStart, start);
    put<uint64_t>(at + k::kEnd, end);
    put<uint32_t>(at + k::kDeviceId, device);
    put<uint32_t>(at + k::kStreamId, stream);
    put<uint64_t>(at + k::kCorrelationId, corr);
    put<const char*>(at + k::kType, type);
    put<const char*>(at + k::kName, name);
    return *this;
  }

  RecordBuilder& communication(const DeviceFields& f) {
    namespace c = layout::communication;
    const size_t at = grow(layout::kCommunication, c::kSize);
    put<uint32_t>(at + c::kDataType, f.subkind);
    put<uint64_t>(at + c::kCount, f.count);
    put<uint32_t>(at + c::kDeviceId, f.deviceId);
    put<uint32_t>(at + c::kStreamId, f.streamId);
    put<uint64_t>(at + c::kStart, f.start);
    put<uint64_t>(at + c::kEnd, f.end);
    put<const char*>(at + c::kAlgType, f.detail);
    put<const char*>(at + c::kName, f.name);
    put<const char*>(at + c::kCommName, f.group);
    put<uint64_t>(at + c::kCorrelationId, f.correlationId);
    return *this;
  }

  // MEMCPY (kind 7) or MEMSET (kind 6): the same layout after the 4-byte copyKind / value.
  RecordBuilder& copy(uint32_t kind, const DeviceFields& f) {
    namespace m = layout::copy;
    const size_t at = grow(kind, m::kSize);
    put<uint32_t>(at + m::kSubkind, f.subkind);
    put<uint64_t>(at + m::kBytes, f.count);
    put<uint64_t>(at + m::kStart, f.start);
    put<uint64_t>(at + m::kEnd, f.end);
    put<uint32_t>(at + m::kDeviceId, f.deviceId);
    put<uint32_t>(at + m::kStreamId, f.streamId);
    put<uint64_t>(at + m::kCorrelationId, f.correlationId);
    put<uint8_t>(at + m::kIsAsync, f.isAsync);
    return *this;
  }

  // MEMORY (kind 5): a runtime allocation (operation 0) or release (1).
  RecordBuilder& memory(uint32_t operation, uint64_t address, uint64_t bytes, uint64_t start, uint64_t end,
                        uint64_t correlationId, uint32_t deviceId, uint32_t memoryKind = 1) {
    namespace m = layout::memory;
    const size_t at = grow(layout::kMemory, m::kSize);
    put<uint32_t>(at + m::kOperationType, operation);
    put<uint32_t>(at + m::kMemoryKind, memoryKind);
    put<uint64_t>(at + m::kCorrelationId, correlationId);
    put<uint64_t>(at + m::kStart, start);
    put<uint64_t>(at + m::kEnd, end);
    put<uint64_t>(at + m::kAddress, address);
    put<uint64_t>(at + m::kBytes, bytes);
    put<uint32_t>(at + m::kProcessId, 4242);
    put<uint32_t>(at + m::kDeviceId, deviceId);
    put<uint32_t>(at + m::kStreamId, 0xFFFFFFFFu);
    return *this;
  }

  // API, ACL_API, NODE_API or RUNTIME_API (default).
  RecordBuilder& api(uint64_t start, uint64_t end, uint32_t pid, uint32_t tid, uint64_t corr, const char* name,
                     uint32_t kind = layout::kRuntimeApi) {
    namespace a = layout::api;
    const size_t at = grow(kind, a::kSize);
    put<uint64_t>(at + a::kStart, start);
    put<uint64_t>(at + a::kEnd, end);
    put<uint32_t>(at + a::kProcessId, pid);
    put<uint32_t>(at + a::kThreadId, tid);
    put<uint64_t>(at + a::kCorrelationId, corr);
    put<const char*>(at + a::kName, name);
    return *this;
  }

  RecordBuilder& external(uint32_t externalKind, uint64_t externalId, uint64_t corr) {
    namespace e = layout::external;
    const size_t at = grow(layout::kExternalCorrelation, e::kSize);
    put<uint32_t>(at + e::kExternalKind, externalKind);
    put<uint64_t>(at + e::kExternalId, externalId);
    put<uint64_t>(at + e::kCorrelationId, corr);
    return *this;
  }

  RecordBuilder& marker(uint64_t timestamp, uint64_t id, const char* name, const char* domain) {
    namespace m = layout::marker;
    const size_t at = grow(layout::kMarker, m::kSize);
    put<uint32_t>(at + m::kFlag, 1);
    put<uint64_t>(at + m::kTimestamp, timestamp);
    put<uint64_t>(at + m::kId, id);
    put<const char*>(at + m::kName, name);
    put<const char*>(at + m::kDomain, domain);
    return *this;
  }

  // A marker with every field: `flag` (msptiActivityFlag), `sourceKind` (0 host, 1 device) and
  // objectId's two words (pid/tid or device/stream).
  RecordBuilder& marker(uint32_t flag, uint32_t sourceKind, uint64_t timestamp, uint64_t id, uint32_t first,
                        uint32_t second, const char* name, const char* domain) {
    namespace m = layout::marker;
    const size_t at = grow(layout::kMarker, m::kSize);
    put<uint32_t>(at + m::kFlag, flag);
    put<uint32_t>(at + m::kSourceKind, sourceKind);
    put<uint64_t>(at + m::kTimestamp, timestamp);
    put<uint64_t>(at + m::kId, id);
    put<uint32_t>(at + m::kObjectId, first);
    put<uint32_t>(at + m::kObjectId + 4, second);
    put<const char*>(at + m::kName, name);
    put<const char*>(at + m::kDomain, domain);
    return *this;
  }

  // Any record: `kind` in the first 4 bytes, `size` bytes in total, the rest filled with `fill`.
  RecordBuilder& raw(uint32_t kind, size_t size, uint8_t fill = 0x5A) {
    const size_t at = grow(kind, size);
    std::memset(bytes() + at + 4, fill, size - 4);
    return *this;
  }

  // Appends `other`'s records.
  RecordBuilder& append(const RecordBuilder& other) {
    if (other.size() == 0) return *this;  // memcpy from/to an empty vector's null data is UB
    const size_t at = grow(0, other.size());
    std::memcpy(bytes() + at, other.data(), other.size());
    return *this;
  }

  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words_.data()); }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    words_.clear();
    size_ = 0;
  }

  // A heap copy of exactly the first `n` bytes (no slack), so ASan flags any read at or past n.
  std::unique_ptr<uint8_t[]> exactCopy(size_t n) const {
    std::unique_ptr<uint8_t[]> out(new uint8_t[n ? n : 1]);
    std::memcpy(out.get(), data(), n);
    return out;
  }

 private:
  // Room for one record of `size` bytes, zeroed, its kind written (kind 0 with size 0: raw bytes).
  size_t grow(uint32_t kind, size_t size) {
    const size_t at = size_;
    size_ += size;
    words_.resize((size_ + 7) / 8, 0);  // uint64_t storage: the buffer start is 8-aligned
    if (size >= 4 && kind != 0) put<uint32_t>(at, kind);
    return at;
  }
  template <typename T>
  void put(size_t offset, T value) {
    std::memcpy(bytes() + offset, &value, sizeof(T));
  }

  std::vector<uint64_t> words_;
  size_t size_ = 0;
};

}  // namespace torch_mspti::test
