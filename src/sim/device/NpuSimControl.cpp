// Control surface of the simulated NPU for Python: torch.ops.npu_sim.* (the library is loaded with
// torch.ops.load_library, so plain ops are its only entry points).
#include "NpuSimCall.h"
#include "NpuSimCann.h"
#include "NpuSimRuntime.h"

#include <ATen/core/dispatch/ObservedOperators.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

namespace torch_mspti::sim {
namespace {

// The npu_sim ops stand in for runtime calls that torch_npu makes outside the dispatcher (device
// selection, synchronize, HCCL's device launch, ...): on hardware they are no ops in a profile, so
// RecordFunction must not observe them here either, or a collective's COMMUNICATION record would
// be attributed to "npu_sim::launch_communication" instead of the c10d op that launched it.
// c10 decides whether an operator is observed when its schema is registered, so the names are
// listed before any static initializer of this library runs (priority constructors run first).
__attribute__((constructor(101))) void register_unobserved_ops() {
  auto& unobserved = c10::ObservedOperators::getUnobservedOperatorList();
  for (const char* op : {"configure",
                         "is_configured",
                         "launch_mode",
                         "device_count",
                         "current_device",
                         "set_device",
                         "current_stream",
                         "set_stream",
                         "synchronize",
                         "drain",
                         "counters",
                         "launch_communication",
                         "communication_stream",
                         "device_properties",
                         "empty_cache",
                         "cpu_alias",
                         "memory_stats",
                         "reset_peak_memory_stats",
                         "block_size",
                         "event_elapsed_ms",
                         "launch_kernel",
                         "bind_cann",
                         "cann_root"})
    unobserved.insert(std::string("npu_sim::") + op);
}

void configure_op(const std::string& simulator, int64_t device_count, const std::string& launch_mode,
                  double duration_scale, int64_t min_duration_ns, int64_t fixed_duration_ns, int64_t queue_pickup_ns,
                  int64_t housekeeping_every) {
  Config cfg;
  cfg.device_count = static_cast<int>(device_count);
  TORCH_CHECK(launch_mode == "direct" || launch_mode == "queued",
              "simulated NPU: launch_mode must be 'direct' or 'queued', got '", launch_mode, "'");
  cfg.mode = launch_mode == "direct" ? LaunchMode::kDirect : LaunchMode::kQueued;
  TORCH_CHECK(duration_scale >= 0.0, "simulated NPU: duration_scale must be >= 0");
  cfg.duration_scale = duration_scale;
  cfg.min_duration_ns = std::max<int64_t>(0, min_duration_ns);
  cfg.fixed_duration_ns = std::max<int64_t>(0, fixed_duration_ns);
  cfg.queue_pickup_ns = std::max<int64_t>(0, queue_pickup_ns);
  cfg.housekeeping_every = std::max<int64_t>(0, housekeeping_every);
  configure(simulator, cfg);
}

// Real-MSPTI mode (NpuSimCann.h), after configure: the fake CANN layer has one device.
void bind_cann_op(const std::string& root) {
  TORCH_CHECK(configured(), "simulated NPU: bind_cann needs a configured device (torch_mspti.sim.enable())");
  TORCH_CHECK(config().device_count == 1, "simulated NPU: bind_cann needs device_count 1 (the fake CANN layer has ",
              "one device), got ", config().device_count);
  TORCH_CHECK(!root.empty(), "simulated NPU: bind_cann needs a CANN root directory");
  bind_cann(root);
}
std::string cann_root_op() { return cann_root(); }

bool is_configured_op() { return configured(); }

std::string launch_mode_op() { return config().mode == LaunchMode::kDirect ? "direct" : "queued"; }

int64_t device_count_op() { return config().device_count; }
int64_t current_device_op() { return current_device(); }
void set_device_op(int64_t index) { set_current_device(static_cast<c10::DeviceIndex>(index)); }
int64_t current_stream_op(int64_t device) {
  check_device(static_cast<c10::DeviceIndex>(device));
  return current_stream_id(static_cast<c10::DeviceIndex>(device));
}
void set_stream_op(int64_t device, int64_t id) {
  check_device(static_cast<c10::DeviceIndex>(device));
  set_current_stream_id(static_cast<c10::DeviceIndex>(device), id);
}
void synchronize_op(int64_t device) {
  check_device(
      static_cast<c10::DeviceIndex>(device));  // torch.npu.synchronize(5) on 2 devices: an error, as set_device
  synchronize_device(static_cast<int>(device));
}
void drain_op() { drain_queue(); }

int64_t launch_communication_op(const std::string& name, const std::string& alg, const std::string& comm_name,
                                int64_t data_type, int64_t count, int64_t device, int64_t stream, int64_t duration_ns,
                                const std::string& api_name, const std::string& mstx_message) {
  TORCH_CHECK(data_type >= 0 && data_type <= 0xFFFF, "simulated NPU: launch_communication: data_type ", data_type,
              " is not a msptiCommunicationDataType (0..17, 0xFFFF invalid)");
  TORCH_CHECK(count >= 0, "simulated NPU: launch_communication: count must be >= 0, got ", count);
  TORCH_CHECK(duration_ns >= 0, "simulated NPU: launch_communication: duration_ns must be >= 0, got ", duration_ns);
  return static_cast<int64_t>(launch_communication(name, alg, comm_name, static_cast<uint32_t>(data_type),
                                                   static_cast<uint64_t>(count), static_cast<c10::DeviceIndex>(device),
                                                   stream, static_cast<uint64_t>(duration_ns), api_name, mstx_message));
}

int64_t communication_stream_op(int64_t device) {
  return communication_stream_id(static_cast<c10::DeviceIndex>(device));
}

// (name, total_memory, cube_core_num, vector_core_num, L2_cache_size)
std::tuple<std::string, int64_t, int64_t, int64_t, int64_t> device_properties_op(int64_t device) {
  const DeviceProperties p = device_properties(static_cast<c10::DeviceIndex>(device));
  return {p.name, static_cast<int64_t>(p.total_memory), p.cube_core_num, p.vector_core_num,
          static_cast<int64_t>(p.l2_cache_size)};
}

void empty_cache_op() { empty_cache(); }

// [allocated, reserved, peak_allocated, peak_reserved, allocation_count, free_count] in bytes/counts
std::vector<int64_t> memory_stats_op(int64_t device) {
  const MemoryStats s = memory_stats(static_cast<c10::DeviceIndex>(device));
  return {static_cast<int64_t>(s.allocated),        static_cast<int64_t>(s.reserved),
          static_cast<int64_t>(s.peak_allocated),   static_cast<int64_t>(s.peak_reserved),
          static_cast<int64_t>(s.allocation_count), static_cast<int64_t>(s.free_count)};
}
void reset_peak_memory_stats_op(int64_t device) { reset_peak_memory_stats(static_cast<c10::DeviceIndex>(device)); }
// Elapsed ms between two recorded events given by torch.Event.event_id (the DeviceGuardImpl's event
// pointer): torch.Event.elapsed_time accepts only an exact torch.Event as its peer, not torch.npu.Event.
double event_elapsed_ms_op(int64_t start_id, int64_t end_id) {
  TORCH_CHECK(start_id != 0 && end_id != 0, "simulated NPU: both events must be recorded before elapsed_time()");
  return event_elapsed_ms(reinterpret_cast<SimEvent*>(start_id), reinterpret_cast<SimEvent*>(end_id));
}
// A kernel of a torch.compile'd graph that ran on the host (torch_mspti.sim.inductor): one kernel
// `name` (AIVEC, as inductor's fused pointwise/reduction kernels are vector work) on the current
// stream of `device`, lasting `measured_ns` under the duration model, launched inside a
// RecordFunction named after it (the op the trace links the kernel to). The op itself is unobserved.
void launch_kernel_op(const std::string& name, int64_t device, int64_t measured_ns) {
  TORCH_CHECK(!name.empty(), "simulated NPU: launch_kernel needs a kernel name");
  TORCH_CHECK(measured_ns >= 0, "simulated NPU: launch_kernel measured_ns must be >= 0, got ", measured_ns);
  const auto index = static_cast<c10::DeviceIndex>(device);
  check_device(index);
  const char* interned = intern(name);
  RECORD_FUNCTION(interned, std::vector<c10::IValue>{});
  launch_op_kernels(index, {KernelRun{KernelInfo{interned, "KERNEL_AIVEC", true}, static_cast<uint64_t>(measured_ns)}});
}
int64_t block_size_op(int64_t nbytes) {
  TORCH_CHECK(nbytes >= 0, "simulated NPU: block_size of a negative size ", nbytes);
  return static_cast<int64_t>(round_block_size(static_cast<uint64_t>(nbytes)));
}

// [ops, launches, kernels, housekeeping, queued_max_depth]
std::vector<int64_t> counters_op() {
  const DeviceCounters c = counters();
  return {static_cast<int64_t>(c.ops), static_cast<int64_t>(c.launches), static_cast<int64_t>(c.kernels),
          static_cast<int64_t>(c.housekeeping), static_cast<int64_t>(c.queued_max_depth)};
}

}  // namespace

TORCH_LIBRARY(npu_sim, m) {
  m.def(
      "configure(str simulator, int device_count, str launch_mode, float duration_scale, "
      "int min_duration_ns, int fixed_duration_ns, int queue_pickup_ns, int housekeeping_every) -> ()",
      &configure_op);
  m.def("bind_cann(str root) -> ()", &bind_cann_op);
  m.def("cann_root() -> str", &cann_root_op);
  m.def("is_configured() -> bool", &is_configured_op);
  m.def("launch_mode() -> str", &launch_mode_op);
  m.def("device_count() -> int", &device_count_op);
  m.def("current_device() -> int", &current_device_op);
  m.def("set_device(int index) -> ()", &set_device_op);
  m.def("current_stream(int device) -> int", &current_stream_op);
  m.def("set_stream(int device, int stream_id) -> ()", &set_stream_op);
  m.def("synchronize(int device) -> ()", &synchronize_op);
  m.def("drain() -> ()", &drain_op);
  m.def("counters() -> int[]", &counters_op);
  m.def(
      "launch_communication(str name, str alg, str comm_name, int data_type, int count, int device, int stream, "
      "int duration_ns, str api_name, str mstx_message=\"\") -> int",
      &launch_communication_op);
  m.def("communication_stream(int device) -> int", &communication_stream_op);
  m.def("device_properties(int device) -> (str, int, int, int, int)", &device_properties_op);
  m.def("empty_cache() -> ()", &empty_cache_op);
  m.def("memory_stats(int device) -> int[]", &memory_stats_op);
  m.def("reset_peak_memory_stats(int device) -> ()", &reset_peak_memory_stats_op);
  m.def("block_size(int nbytes) -> int", &block_size_op);
  m.def("event_elapsed_ms(int start_id, int end_id) -> float", &event_elapsed_ms_op);
  m.def("launch_kernel(str name, int device, int measured_ns) -> ()", &launch_kernel_op);
}

}  // namespace torch_mspti::sim
