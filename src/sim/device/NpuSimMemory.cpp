// The simulated NPU allocator's bookkeeping, as torch_npu's caching allocator behaves towards the
// runtime: device memory comes in reserved segments (2 MiB steps) obtained with aclrtMalloc when
// the live bytes outgrow them, kept when tensors are freed, and given back with aclrtFree only by
// empty_cache(). So allocation runtime calls are rare, as on hardware, not one per tensor. The
// first allocation on a device, and every housekeeping_every-th, also launches a housekeeping
// kernel from a thread that runs no op. See NpuSimRuntime.h.
#include "NpuSimRuntime.h"

#include <algorithm>
#include <array>
#include <mutex>

namespace torch_mspti::sim {
namespace {

constexpr uint64_t kSegmentBytes = 2ull << 20;
constexpr int kMaxDevices = 16;

struct DevicePool {
  std::mutex mu;
  uint64_t live = 0;      // bytes of live tensors
  uint64_t reserved = 0;  // bytes of segments held from the runtime
  uint64_t allocations = 0;
};

// Never destroyed: tensors may be freed by threads still running during static destruction.
std::array<DevicePool, kMaxDevices>& pools() {
  static auto* p = new std::array<DevicePool, kMaxDevices>();
  return *p;
}

uint64_t round_to_segments(uint64_t bytes) { return (bytes + kSegmentBytes - 1) / kSegmentBytes * kSegmentBytes; }

}  // namespace

void note_allocation(c10::DeviceIndex device, uint64_t bytes) {
  if (device < 0 || device >= kMaxDevices) return;
  const int64_t every = config().housekeeping_every;
  DevicePool& pool = pools()[device];
  bool grows = false;
  uint64_t n = 0;
  {
    std::lock_guard<std::mutex> g(pool.mu);
    n = pool.allocations++;
    pool.live += bytes;
    if (pool.live > pool.reserved) {
      pool.reserved = round_to_segments(pool.live);
      grows = true;
    }
  }
  if (grows) runtime_call("aclrtMalloc");
  // The first allocation on a device initialises its memory pool; later ones clear blocks now
  // and then, as the allocator of a real device does, on its own thread.
  if (n == 0 || (every > 0 && n % static_cast<uint64_t>(every) == 0)) {
    launch_housekeeping("MemSet", "KERNEL_AIVEC", device);
  }
}

void note_free(c10::DeviceIndex device, uint64_t bytes) {
  if (device < 0 || device >= kMaxDevices) return;
  DevicePool& pool = pools()[device];
  std::lock_guard<std::mutex> g(pool.mu);
  pool.live -= std::min(bytes, pool.live);
}

void empty_cache() {
  for (DevicePool& pool : pools()) {
    bool frees = false;
    {
      std::lock_guard<std::mutex> g(pool.mu);
      const uint64_t kept = round_to_segments(pool.live);
      if (pool.reserved > kept) {
        pool.reserved = kept;
        frees = true;
      }
    }
    if (frees) runtime_call("aclrtFree");
  }
}

}  // namespace torch_mspti::sim
