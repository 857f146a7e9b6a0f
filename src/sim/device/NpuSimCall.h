// Running an op of the simulated NPU by its CPU implementation: the npu arguments are swapped for
// CPU aliases of the same host memory, the CPU code runs, and its results are mapped back to npu
// tensors. Used by the boxed CPU fallback (NpuSimFallback.cpp) and by the npu kernels that call a
// CPU implementation themselves (convolution, attention, batch norm, recurrent layers).
// Not thread-safe: one Call belongs to one op execution on one thread.
#pragma once

#include "NpuSimRuntime.h"
#include "NpuSimTensor.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torch_mspti::sim {

// State of one op execution: the npu tensors that went in, their aliases, and the storages results
// may alias.
struct Call {
  // The op's CPU allocations on this thread are blocks of `device` while the Call lives.
  OpMemoryScope memory_scope{&device};
  std::vector<std::pair<at::Tensor, at::Tensor>> swapped;  // (npu original, cpu alias)
  std::unordered_map<const void*, c10::Storage> npu_storage_by_base;
  std::unordered_map<const void*, bool> cpu_input_bases;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> adopted;
  c10::DeviceIndex device = -1;  // first npu device seen (current device when none)
  uint32_t list_len = 0;         // longest tensor list among the arguments

  // npu tensors (also inside lists) -> CPU aliases, npu devices -> CPU; everything else as it is.
  c10::IValue to_cpu(const c10::IValue& v);
  at::Tensor to_cpu(const at::Tensor& t) { return to_cpu(c10::IValue(t)).toTensor(); }
  // A CPU kernel may have grown an out= argument into fresh memory, or (in-place view ops such as
  // transpose_) changed its geometry: bring the npu tensor along.
  void fix_up_resized();
  // A CPU result -> npu: the npu argument it is, a view of an npu argument, or adopted CPU memory.
  at::Tensor to_npu(const at::Tensor& r);
  c10::IValue to_npu(const c10::IValue& v);
};

// Runs the CPU kernel of `op` (redispatched with `keys`) on `stack`, whose npu arguments `call`
// swaps for CPU aliases and whose results it maps back to npu. Returns the host time the CPU kernel
// took, in ns. Launches nothing.
uint64_t run_cpu_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack, Call& call,
                        c10::DispatchKeySet keys = c10::DispatchKeySet(c10::DispatchKey::CPU));

// The boxed CPU fallback: run_cpu_kernel, then the op's kernel (kernel_for_op) on the timeline.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// One kernel of an op execution: `count` kernels named `kernel` share `measured_ns` of host time.
struct KernelRun {
  KernelInfo kernel;
  uint64_t measured_ns;
  uint32_t count = 1;
};
// Counts one op execution on `device` and launches `runs` in order on its current stream, each
// lasting its measured time under the configured duration model (NpuSimRuntime.h).
void launch_op_kernels(c10::DeviceIndex device, std::initializer_list<KernelRun> runs);
void launch_op_kernels(c10::DeviceIndex device, const std::vector<KernelRun>& runs);

// Host time since `t0`, in ns.
uint64_t elapsed_since(std::chrono::steady_clock::time_point t0);

}  // namespace torch_mspti::sim
