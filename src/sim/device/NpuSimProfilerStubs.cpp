// The legacy autograd profiler's device hooks for the simulated NPU: what
// torch.autograd.profiler.profile(use_device="npu") (use_kineto=False) calls around each op to time
// it on the device. torch asks torch::profiler::impl::privateuse1Stubs() for them, and without a
// registration its default stubs throw in every RecordFunction callback; torch_npu registers its
// own (torch_npu/csrc/profiler), so the simulated device does too.
//
// Each record() records a simulated event on the current stream of the current device (as CUDA's
// stubs record a cudaEvent), elapsed() is the device time between two such events in µs (the unit
// torch's LegacyEvent::deviceElapsedUs expects; torch/csrc/profiler/stubs/base.h, torch 2.7-2.14).
// mark and ranges have no device-side tool here and do nothing. Thread-safe.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <functional>
#include <memory>

#include "NpuSimRuntime.h"

namespace torch_mspti::sim {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

class NpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex d = current_device();
    if (device) *device = d;
    SimEvent* ev = event_create();
    *event = ProfilerVoidEventStub(ev, [](void* p) { event_destroy(static_cast<SimEvent*>(p)); });
    if (cpu_ns) *cpu_ns = c10::getTime();
    event_record(ev, d, current_stream_id(d));
  }
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    const double ms = event_elapsed_ms(static_cast<SimEvent*>(start->get()), static_cast<SimEvent*>(end->get()));
    return static_cast<float>(ms * 1000.0);
  }
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    struct Restore {
      c10::DeviceIndex device;
      ~Restore() {
        try {
          set_current_device(device);
        } catch (...) {}
      }
    } restore{current_device()};
    const int count = config().device_count;
    for (int d = 0; d < count; ++d) {
      set_current_device(static_cast<c10::DeviceIndex>(d));
      op(d);
    }
  }
  void synchronize() const override { synchronize_device(-1); }
};

struct Registrar {
  Registrar() {
    static NpuProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
const Registrar g_registrar;

}  // namespace
}  // namespace torch_mspti::sim
