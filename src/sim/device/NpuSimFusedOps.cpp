// Ops that the device runs as fused kernels but torch decomposes for a backend without a kernel of
// its own. Layer norm, group norm and BCE-with-logits have a CompositeExplicitAutograd kernel that
// would run them on the npu as a handful of small ops: their npu kernel is the CPU fallback, which
// runs the CPU kernel and launches one LayerNormV3 / GroupNorm / SigmoidCrossEntropyWithLogitsV2.
// Batch norm runs its CPU kernel (running statistics updated in place, as on CPU) and launches the
// kernel sequence the device runs for it (batch_norm_kernels).
#include "NpuSimCall.h"

#include <torch/library.h>

#include <string>
#include <vector>

namespace torch_mspti::sim {
namespace {

const c10::IValue& argument(const c10::OperatorHandle& op, const torch::jit::Stack& stack, const char* name) {
  const auto index = op.schema().argumentIndexWithName(name);
  TORCH_INTERNAL_ASSERT(index.has_value(), op.schema().name(), " has no argument ", name);
  return stack[stack.size() - op.schema().arguments().size() + *index];
}

// native_batch_norm(input, ..., bool training, ...) and
// native_batch_norm_backward(grad_out, input, ..., bool train, float eps, bool[3] output_mask).
void batch_norm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const bool backward = op.schema().name() == "aten::native_batch_norm_backward";
  const int64_t dim = argument(op, *stack, "input").toTensor().dim();
  const bool training = argument(op, *stack, backward ? "train" : "training").toBool();
  const bool input_grad = !backward || argument(op, *stack, "output_mask").toBoolList().get(0);
  Call call;
  const uint64_t measured = run_cpu_kernel(op, stack, call);
  const std::vector<KernelInfo> kernels = batch_norm_kernels(backward, training, dim, input_grad);
  std::vector<KernelRun> runs;
  for (const KernelInfo& k : kernels) runs.push_back({k, measured / kernels.size()});
  launch_op_kernels(call.device, runs);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", torch::CppFunction::makeFromBoxedFunction<&batch_norm>());
  m.impl("native_batch_norm_backward", torch::CppFunction::makeFromBoxedFunction<&batch_norm>());
  m.impl("native_layer_norm", torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  m.impl("native_group_norm", torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  m.impl("binary_cross_entropy_with_logits", torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace torch_mspti::sim
