// Packs MSPTI activity records into an 8-aligned buffer, byte for byte as the ABI lays them out
// (shared/docs/mspti.md 3.1, 3.4): packed members (8-byte fields at offset 4), sizeof rounded up
// to 8, records back to back. Offsets are written out here from the documentation rather than
// taken from our own header, so a wrong declaration in third_party/mspti cannot hide itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace torch_mspti::test {

// Documented record sizes (mspti.md 3.4).
inline constexpr size_t kKernelSize = 56;
inline constexpr size_t kApiSize = 48;
inline constexpr size_t kExternalSize = 24;
inline constexpr size_t kMarkerSize = 56;
inline constexpr size_t kHcclSize = 56;
inline constexpr size_t kMemorySize = 64;
inline constexpr size_t kMemsetSize = 56;
inline constexpr size_t kMemcpySize = 56;
inline constexpr size_t kCommunicationSize = 72;

class RecordBuilder {
 public:
  // msptiActivityKernel: 0 kind, 4 start, 12 end, 20 deviceId, 24 streamId, 28 correlationId,
  // 36 type, 44 name; 56 bytes.
  RecordBuilder& kernel(uint64_t start, uint64_t end, uint32_t device, uint32_t stream, uint64_t corr, const char* name,
                        const char* type = "KERNEL_AICORE") {
    const size_t at = grow(kKernelSize);
    put<uint32_t>(at + 0, 2);
    put<uint64_t>(at + 4, start);
    put<uint64_t>(at + 12, end);
    put<uint32_t>(at + 20, device);
    put<uint32_t>(at + 24, stream);
    put<uint64_t>(at + 28, corr);
    put<const char*>(at + 36, type);
    put<const char*>(at + 44, name);
    return *this;
  }

  // msptiActivityApi (kinds API=3, ACL_API=10, NODE_API=11, RUNTIME_API=12): 0 kind, 4 start,
  // 12 end, 20 processId, 24 threadId, 28 correlationId, 36 name; 48 bytes.
  RecordBuilder& api(uint64_t start, uint64_t end, uint32_t pid, uint32_t tid, uint64_t corr, const char* name,
                     uint32_t kind = 12) {
    const size_t at = grow(kApiSize);
    put<uint32_t>(at + 0, kind);
    put<uint64_t>(at + 4, start);
    put<uint64_t>(at + 12, end);
    put<uint32_t>(at + 20, pid);
    put<uint32_t>(at + 24, tid);
    put<uint64_t>(at + 28, corr);
    put<const char*>(at + 36, name);
    return *this;
  }

  // msptiActivityExternalCorrelation: 0 kind, 4 externalKind, 8 externalId, 16 correlationId; 24.
  RecordBuilder& external(uint32_t externalKind, uint64_t externalId, uint64_t corr) {
    const size_t at = grow(kExternalSize);
    put<uint32_t>(at + 0, 8);
    put<uint32_t>(at + 4, externalKind);
    put<uint64_t>(at + 8, externalId);
    put<uint64_t>(at + 16, corr);
    return *this;
  }

  // Any record: `kind` in the first 4 bytes, `size` bytes in total, the rest filled with `fill`.
  RecordBuilder& raw(uint32_t kind, size_t size, uint8_t fill = 0x5A) {
    const size_t at = grow(size);
    std::memset(bytes() + at, fill, size);
    put<uint32_t>(at, kind);
    return *this;
  }

  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words_.data()); }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
  size_t size() const { return size_; }

  // A heap copy of exactly the first `n` bytes (no slack), so ASan flags any read at or past n.
  std::unique_ptr<uint8_t[]> exactCopy(size_t n) const {
    std::unique_ptr<uint8_t[]> out(new uint8_t[n]);
    std::memcpy(out.get(), data(), n);
    return out;
  }

 private:
  size_t grow(size_t n) {
    const size_t at = size_;
    size_ += n;
    words_.resize((size_ + 7) / 8, 0);  // uint64_t storage: the buffer start is 8-aligned
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
