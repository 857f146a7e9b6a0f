// The CPU allocator while an npu op runs its CPU implementation (NpuSimRuntime.h, OpMemoryScope).
// The op's CPU kernel allocates its results and temporaries through c10::GetCPUAllocator(); its
// results become npu tensors (NpuSimCall.h, adopted storages) and its temporaries stand for device
// workspace, so on this thread, inside the scope, they are served as blocks of the op's device
// (accounted and reported to the profiler as npu memory). Everything else, and every other thread,
// gets the CPU allocator that was installed before. Thread-safe.
#include "NpuSimRuntime.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>

namespace torch_mspti::sim {
namespace {

thread_local const c10::DeviceIndex* t_scope_device = nullptr;

c10::Allocator* g_base = nullptr;  // set once by install_op_memory_allocator, never changed
c10::DeleterFnPtr g_base_raw_deleter = nullptr;

// Frees a block of the device, or hands memory the base allocator made back to it (raw_allocate
// memory can come from either, depending on the scope at allocation time).
void free_either(void* p) {
  if (p == nullptr) return;
  if (note_free(p)) {
    std::free(p);
  } else {
    g_base_raw_deleter(p);
  }
}

class OpScopedCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (t_scope_device == nullptr || nbytes == 0) return g_base->allocate(nbytes);
    const c10::DeviceIndex dev = *t_scope_device >= 0 ? *t_scope_device : current_device();
    void* p = allocate_device_block(dev, nbytes);
    return {p, p, &free_block_or_base, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return g_base_raw_deleter != nullptr ? &free_either : nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

 private:
  static void free_block_or_base(void* p) { free_either(p); }
};

}  // namespace

OpMemoryScope::OpMemoryScope(const c10::DeviceIndex* device) : previous_(t_scope_device) { t_scope_device = device; }
OpMemoryScope::~OpMemoryScope() { t_scope_device = previous_; }

void install_op_memory_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* wrapper = new OpScopedCpuAllocator();
    g_base = c10::GetCPUAllocator();
    g_base_raw_deleter = g_base->raw_deleter();
    // The default CPU allocator is registered with priority 0; a higher one keeps a CPU allocator
    // someone installed deliberately and only warns (npu ops' CPU memory then counts as CPU).
    c10::SetCPUAllocator(wrapper, /*priority=*/0);
    if (c10::GetCPUAllocator() != wrapper) {
      TORCH_WARN(
          "simulated NPU: another CPU allocator has priority; memory npu ops allocate while running "
          "their CPU implementation is reported to the profiler as CPU memory");
    }
  });
}

}  // namespace torch_mspti::sim
