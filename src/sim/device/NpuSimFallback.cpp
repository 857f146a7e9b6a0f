// Boxed CPU fallback of the simulated NPU: every aten op without a native npu kernel runs its CPU
// kernel on CPU aliases of the npu arguments (same host memory, no copies), its results are mapped
// back to npu tensors, and the op's execution launches its kernel(s) on the simulated timeline
// with the measured host compute time as duration.
#include "NpuSimCall.h"
#include "NpuSimRuntime.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include <mutex>
#include <string>

namespace torch_mspti::sim {
namespace {

// True for ops whose results only alias their inputs without writing (views): no kernel runs.
// In-place view ops (transpose_, squeeze_, as_strided_, ...) only change their argument's geometry.
bool metadata_only(const c10::OperatorHandle& op) {
  if (op.hasTag(at::Tag::inplace_view)) return true;
  const c10::FunctionSchema& schema = op.schema();
  if (schema.returns().empty()) return false;
  for (const auto& r : schema.returns()) {
    if (r.alias_info() == nullptr || r.alias_info()->isWrite()) return false;
  }
  return true;
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Call call;
  const uint64_t measured = run_cpu_kernel(op, stack, call);
  if (metadata_only(op)) return;
  const std::string& name = op.schema().name();
  // _foreach_* ops run one kernel per tensor of their lists; the rest run one kernel.
  const bool per_tensor = name.rfind("aten::_foreach_", 0) == 0 && call.list_len > 0;
  launch_op_kernels(call.device, {{kernel_for_op(name), measured, per_tensor ? call.list_len : 1}});
}

// Functional and in-place variants of structured ops have a CompositeExplicitAutogradNonFunctional
// kernel that, on a backend without its own kernel, allocates the result and calls the out=
// variant: two nested records per op in a profile, and deprecated resizes of 0-dim outputs. The
// fallback is therefore also registered as the npu kernel of each such op, so that it runs the
// CPU kernel of the very op that was called. Runs once, after every native npu kernel exists.
void install_direct_fallbacks() {
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* lib =
        new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) {
      if (n.name.rfind("aten::", 0) != 0) continue;
      auto op = c10::Dispatcher::singleton().findOp(n);
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
          !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
        continue;
      }
      std::string name = n.name.substr(6);
      if (!n.overload_name.empty()) name += "." + n.overload_name;
      lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
    }
  });
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

namespace {
// torch 2.13 registers an autograd backend fallback for AutogradPrivateUse1 (in its
// VariableFallbackKernel.cpp); torch 2.7 has none, so an op without an autograd kernel of its own
// (the c10d collectives that DDP and FSDP call) fails on npu tensors with "Could not run ... from
// the 'Autogradnpu' backend". Where that fallback is missing, torch's own basic one is registered
// when this library loads (docs/kineto.md 7). A run-time check: registering a second fallback is
// a hard error.
struct AutogradFallback {
  AutogradFallback() {
    if (c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(c10::DispatchKey::AutogradPrivateUse1)) return;
    static auto* lib =
        new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__);
    lib->fallback(torch::autograd::basicAutogradNotImplementedFallback());
  }
} gAutogradFallback;
}  // namespace

}  // namespace torch_mspti::sim
