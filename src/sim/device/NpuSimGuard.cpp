// PrivateUse1 registrations of the simulated NPU that are not ops: the host-memory allocator, the
// pinned host allocator, the DeviceGuardImpl (devices, streams, events) and the PrivateUse1 hooks.
#include "NpuSimRuntime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace torch_mspti::sim {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
void free_block(void* p) { free_device_block(p); }

// Device memory is plain host memory, 64-byte aligned, one block per allocation as torch_npu's
// caching allocator sizes it (NpuSimMemory.cpp); the DataPtr carries the device index and, as
// c10::Allocator::raw_allocate requires, the data pointer as its context. A free is accounted to
// the device the block was allocated on.
class HostBackedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex dev = current_device();
    void* p = allocate_device_block(dev, nbytes);
    return {p, p, &free_block, c10::Device(kNpu, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

HostBackedAllocator g_allocator;

// Pinned host memory (Tensor.pin_memory(), pin_memory=True): plain CPU memory whose blocks are
// remembered, so that is_pinned() answers true for them and only for them, as torch_npu's host
// allocator answers for its own blocks. FSDP2's CPU offload re-pins (copies) a parameter shard
// that is_pinned() calls unpinned on every reset, which would part the parameter from the
// optimizer's view of it.
class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = nullptr;
    TORCH_CHECK(posix_memalign(&p, 64, nbytes == 0 ? 1 : nbytes) == 0, "simulated NPU: out of pinned host memory (",
                nbytes, " bytes)");
    {
      std::lock_guard<std::mutex> g(mu());
      blocks()[reinterpret_cast<uintptr_t>(p)] = nbytes;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  // True when `data` lies in a live pinned block (its start included, its end excluded).
  static bool owns(const void* data) {
    const auto at = reinterpret_cast<uintptr_t>(data);
    std::lock_guard<std::mutex> g(mu());
    auto it = blocks().upper_bound(at);
    if (it == blocks().begin()) return false;
    --it;
    return at == it->first || at < it->first + it->second;
  }

 private:
  static void release(void* p) {
    {
      std::lock_guard<std::mutex> g(mu());
      blocks().erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
  }
  static std::mutex& mu() {
    static auto* m = new std::mutex();  // never destroyed: blocks may be freed at exit
    return *m;
  }
  static std::map<uintptr_t, size_t>& blocks() {
    static auto* b = new std::map<uintptr_t, size_t>();
    return *b;
  }
};

PinnedHostAllocator g_pinned;

class GuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kNpu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kNpu, current_device()}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNpu, "simulated NPU: expected an npu device, got ", d);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < deviceCount()) {
      try {
        set_current_device(d.index());
      } catch (...) {}
    }
  }

  // A device without an index (torch.Stream(device="npu"), index -1) means the current device,
  // as on CUDA; the stream returned always names a concrete one.
  static c10::Device concrete(c10::Device d) { return d.has_index() ? d : c10::Device(kNpu, current_device()); }

  c10::Stream getStream(c10::Device d) const override {
    d = concrete(d);
    return c10::Stream(c10::Stream::UNSAFE, d, current_stream_id(d.index()));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, concrete(d), kDefaultStreamId);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    d = concrete(d);
    return c10::Stream(c10::Stream::UNSAFE, d, pooled_stream_id(d.index()));
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    d = concrete(d);
    return c10::Stream(c10::Stream::UNSAFE, d, new_stream_id(d.index()));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    const c10::Stream old = getStream(s.device());
    set_current_stream_id(s.device_index(), s.id());
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(config().device_count);
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag /*flag*/) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "simulated NPU: event device ",
                static_cast<int>(device_index), " does not match stream device ", stream.device());
    if (*event == nullptr) *event = event_create();
    event_record(static_cast<SimEvent*>(*event), stream.device_index(), stream.id());
  }
  // Cross-stream waits are not modelled on the simulated timeline: block() orders nothing.
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* event) const override { return event == nullptr || event_query(static_cast<SimEvent*>(event)); }
  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    try {
      event_destroy(static_cast<SimEvent*>(event));
    } catch (...) {}
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) event_synchronize(static_cast<SimEvent*>(event));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "simulated NPU: both events must be recorded before elapsed_time()");
    return event_elapsed_ms(static_cast<SimEvent*>(start), static_cast<SimEvent*>(end));
  }

  bool queryStream(const c10::Stream& s) const override { return stream_idle(s.device_index(), s.id()); }
  void synchronizeStream(const c10::Stream& s) const override { synchronize_stream(s.device_index(), s.id()); }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override { synchronize_device(device_index); }
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}
};

class Hooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return configured(); }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < config().device_count;
  }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(config().device_count); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = current_device();
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  // Random numbers for npu tensors come from the CPU generator: the fallback runs CPU kernels.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex /*device_index*/) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Device getDeviceFromPtr(void* /*data*/) const override { return {kNpu, current_device()}; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned; }
  bool isPinnedPtr(const void* data) const override { return data != nullptr && PinnedHostAllocator::owns(data); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "simulated NPU: storage is not resizable");
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    const size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

Hooks* hooks() {
  static Hooks* h = new Hooks();
  return h;
}

struct Registrar {
  Registrar() { at::RegisterPrivateUse1HooksInterface(hooks()); }
};
Registrar g_registrar;

}  // namespace

c10::Allocator* device_allocator() { return &g_allocator; }

namespace {
// "1.50 GiB": a size as torch's allocators print one in their out-of-memory message.
std::string format_size(uint64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof(out), u == 0 ? "%.0f %s" : "%.2f %s", v, kUnits[u]);
  return out;
}
}  // namespace

void* allocate_device_block(c10::DeviceIndex device, size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const uint64_t block = round_block_size(nbytes);
  // The device holds its total memory (NpuSimProperties.cpp) and no more, as a real one does: the
  // room check and the accounting are one step for concurrent allocations (recursive: the profiler's
  // report inside note_allocation may allocate through an op's memory scope on this thread).
  static std::recursive_mutex room;
  std::lock_guard<std::recursive_mutex> hold(room);
  const MemoryStats stats = memory_stats(device);
  const uint64_t total = device_properties(device).total_memory;
  const bool fits = block <= total - std::min(total, stats.allocated);
  void* p = fits ? std::aligned_alloc(64, (block + 63) / 64 * 64) : nullptr;
  // The device's memory is this host's: the host can run out first, which no device tensor frees.
  TORCH_CHECK_WITH(OutOfMemoryError, !fits || p != nullptr, "simulated NPU out of memory: the host could not provide ",
                   format_size(nbytes), " for NPU ", static_cast<int>(device),
                   " (the simulated device's memory is host memory; ", format_size(stats.allocated),
                   " allocated on it of its ", format_size(total),
                   "). Allocate less, or run the simulated NPU on a host with more free memory.");
  if (p == nullptr) {
    // As torch's device allocators do: an [OutOfMemory] event in the profile, then the error
    // (torch.OutOfMemoryError) whose message says what was asked for.
    c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(block), stats.allocated, stats.reserved,
                                     c10::Device(kNpu, device));
    TORCH_CHECK_WITH(OutOfMemoryError, false, "simulated NPU out of memory. Tried to allocate ", format_size(nbytes),
                     " (NPU ", static_cast<int>(device), "; ", format_size(total), " total capacity; ",
                     format_size(stats.allocated), " already allocated; ", format_size(stats.reserved),
                     " reserved in total). Free tensors (del, torch.npu.empty_cache()) or allocate less.");
  }
  note_allocation(device, p, block);
  return p;
}

void free_device_block(void* ptr) {
  if (ptr == nullptr) return;
  note_free(ptr);
  std::free(ptr);
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_mspti::sim
