// The simulated NPU allocator's bookkeeping, modelled on torch_npu's caching allocator (its sizes,
// its statistics, its reports; docs/torch_npu.md 1):
//  * each allocation is a block of round_block_size(nbytes) bytes: nbytes plus 32 bytes of padding,
//    rounded up to 512 (at least 512);
//  * device memory comes in reserved segments (2 MiB steps) obtained with aclrtMalloc when the
//    allocated bytes outgrow them, kept when blocks are freed, and given back with aclrtFree only
//    by empty_cache(). So allocation runtime calls are rare, as on hardware, not one per tensor;
//  * every allocation and free is reported to torch's profiler (c10::reportMemoryUsageToProfiler
//    with the npu device, the device's allocated and reserved bytes after the change), so
//    profile_memory=True records npu memory; real torch_npu reports to its own profiler instead
//    (docs/torch_npu.md 1).
// The first allocation on a device, and every housekeeping_every-th, also launches a housekeeping
// kernel from a thread that runs no op. See NpuSimRuntime.h. Thread-safe.
#include "NpuSimRuntime.h"

#include <c10/core/Allocator.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace torch_mspti::sim {
namespace {

constexpr uint64_t kSegmentBytes = 2ull << 20;
constexpr uint64_t kMinBlockBytes = 512;
constexpr uint64_t kPadBytes = 32;
constexpr int kMaxDevices = 16;

// A reserved segment: what one aclrtMalloc of the pool returned.
struct Segment {
  uint64_t address;
  uint64_t bytes;
};

struct DevicePool {
  std::mutex mu;
  MemoryStats stats;
  uint64_t allocations = 0;       // ever made (housekeeping cadence)
  std::vector<Segment> segments;  // in the order obtained; their bytes add up to stats.reserved
  uint64_t nextAddress = 0;       // where the device's next segment starts (0: not yet set)
};

// Simulated device addresses: each device's segments from its own 2^36-byte window, never reused,
// so an address names one segment for the process's life.
constexpr uint64_t kAddressBase = 0x124000000000ull;
constexpr int kAddressWindowBits = 36;

struct Block {
  c10::DeviceIndex device;
  uint64_t bytes;
};

// Never destroyed: tensors may be freed by threads still running during static destruction.
std::array<DevicePool, kMaxDevices>& pools() {
  static auto* p = new std::array<DevicePool, kMaxDevices>();
  return *p;
}

std::mutex& blocks_mu() {
  static auto* m = new std::mutex();
  return *m;
}
std::unordered_map<const void*, Block>& blocks() {
  static auto* b = new std::unordered_map<const void*, Block>();
  return *b;
}

uint64_t round_to_segments(uint64_t bytes) { return (bytes + kSegmentBytes - 1) / kSegmentBytes * kSegmentBytes; }

}  // namespace

uint64_t round_block_size(uint64_t nbytes) {
  const uint64_t padded = nbytes + kPadBytes;
  return std::max(kMinBlockBytes, (padded + kMinBlockBytes - 1) / kMinBlockBytes * kMinBlockBytes);
}

void note_allocation(c10::DeviceIndex device, void* ptr, uint64_t block_bytes) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "simulated NPU: allocation on device ", static_cast<int>(device),
              " outside [0, ", kMaxDevices, ")");
  const int64_t every = config().housekeeping_every;
  DevicePool& pool = pools()[device];
  bool grows = false;
  Segment segment{};
  uint64_t n = 0;
  uint64_t allocated = 0;
  uint64_t reserved = 0;
  {
    std::lock_guard<std::mutex> g(pool.mu);
    n = pool.allocations++;
    MemoryStats& s = pool.stats;
    s.allocated += block_bytes;
    ++s.allocation_count;
    if (s.allocated > s.reserved) {
      const uint64_t reserved = round_to_segments(s.allocated);
      if (pool.nextAddress == 0)
        pool.nextAddress = kAddressBase + (static_cast<uint64_t>(device) << kAddressWindowBits);
      segment = Segment{pool.nextAddress, reserved - s.reserved};
      pool.nextAddress += segment.bytes;
      pool.segments.push_back(segment);
      s.reserved = reserved;
      grows = true;
    }
    s.peak_allocated = std::max(s.peak_allocated, s.allocated);
    s.peak_reserved = std::max(s.peak_reserved, s.reserved);
    allocated = s.allocated;
    reserved = s.reserved;
  }
  {
    std::lock_guard<std::mutex> g(blocks_mu());
    blocks()[ptr] = Block{device, block_bytes};
  }
  c10::reportMemoryUsageToProfiler(ptr, static_cast<int64_t>(block_bytes), allocated, reserved,
                                   c10::Device(c10::DeviceType::PrivateUse1, device));
  if (grows) runtime_memory(/*release=*/false, segment.address, segment.bytes, device);
  // The first allocation on a device initialises its memory pool; later ones clear blocks now
  // and then, as the allocator of a real device does, on its own thread.
  if (n == 0 || (every > 0 && n % static_cast<uint64_t>(every) == 0)) {
    launch_housekeeping("MemSet", "KERNEL_AIVEC", device);
  }
}

bool note_free(void* ptr) {
  Block block{};
  {
    std::lock_guard<std::mutex> g(blocks_mu());
    auto it = blocks().find(ptr);
    if (it == blocks().end()) return false;
    block = it->second;
    blocks().erase(it);
  }
  DevicePool& pool = pools()[block.device];
  uint64_t allocated = 0;
  uint64_t reserved = 0;
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.stats.allocated -= std::min(block.bytes, pool.stats.allocated);
    ++pool.stats.free_count;
    allocated = pool.stats.allocated;
    reserved = pool.stats.reserved;
  }
  c10::reportMemoryUsageToProfiler(ptr, -static_cast<int64_t>(block.bytes), allocated, reserved,
                                   c10::Device(c10::DeviceType::PrivateUse1, block.device));
  return true;
}

MemoryStats memory_stats(c10::DeviceIndex device) {
  check_device(device);
  DevicePool& pool = pools()[device];
  std::lock_guard<std::mutex> g(pool.mu);
  return pool.stats;
}

void reset_peak_memory_stats(c10::DeviceIndex device) {
  check_device(device);
  DevicePool& pool = pools()[device];
  std::lock_guard<std::mutex> g(pool.mu);
  pool.stats.peak_allocated = pool.stats.allocated;
  pool.stats.peak_reserved = pool.stats.reserved;
}

void empty_cache() {
  for (size_t d = 0; d < pools().size(); ++d) {
    DevicePool& pool = pools()[d];
    std::vector<Segment> freed;
    {
      // Whole segments from the newest down, while what stays reserved still holds the allocated
      // bytes (blocks are not tracked per segment: the simplification docs/torch_npu.md 1 names).
      std::lock_guard<std::mutex> g(pool.mu);
      while (!pool.segments.empty() &&
             pool.stats.reserved - pool.segments.back().bytes >= round_to_segments(pool.stats.allocated)) {
        freed.push_back(pool.segments.back());
        pool.stats.reserved -= pool.segments.back().bytes;
        pool.segments.pop_back();
      }
    }
    for (const Segment& s : freed)
      runtime_memory(/*release=*/true, s.address, s.bytes, static_cast<c10::DeviceIndex>(d));
  }
}

}  // namespace torch_mspti::sim
