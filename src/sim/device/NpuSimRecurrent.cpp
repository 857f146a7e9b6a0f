// LSTM and GRU layers (and cells) of the simulated NPU. Their CompositeImplicitAutograd kernels run
// the fused cell ops _thnn_fused_lstm_cell / _thnn_fused_gru_cell for every device but CPU, and
// those have CUDA kernels only. The device instead runs each of these ops whole, as torch_npu does
// (one DynamicRNN / DynamicGRUV2 kernel per layer and direction): its npu kernel runs the CPU
// implementation on CPU aliases of the arguments, recording a CPU autograd graph, and hangs a node
// on the npu results whose backward differentiates that graph (DynamicRNNGrad / DynamicGRUV2Grad).
// Registered for AutogradPrivateUse1 (training) and PrivateUse1 (inference mode).
#include "NpuSimCall.h"
#include "NpuSimRuntime.h"
#include "TorchCompat.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace torch_mspti::sim {
namespace {

using torch::autograd::variable_list;

// Backward of one op execution that ran as a CPU autograd graph.
struct CpuGraphBackward final : torch::autograd::Node {
  std::string op;         // aten::lstm, ...
  uint32_t kernels = 1;   // layers x directions
  variable_list outputs;  // CPU results with history, in the order of this node's inputs
  variable_list leaves;   // CPU aliases of the npu inputs that require grad, one per next edge
  variable_list keep;     // every npu argument: the CPU graph saved aliases of their memory

  std::string name() const override { return kernel_for_op(op).name + std::string("Backward"); }

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!leaves.empty(), "simulated NPU: the backward graph of ", op,
                " was already freed; pass retain_graph=True to the first backward to run it again");
    TORCH_CHECK(!at::GradMode::is_enabled(), "simulated NPU: double backward (create_graph=True) through ", op,
                " is not supported: its backward runs as one CPU graph");
    Call call;
    variable_list outs, gouts;
    for (size_t i = 0; i < grads.size() && i < outputs.size(); ++i) {
      if (!grads[i].defined()) continue;
      outs.push_back(outputs[i]);
      gouts.push_back(call.to_cpu(grads[i]));
    }
    variable_list result(leaves.size());
    if (outs.empty()) return result;
    const auto t0 = std::chrono::steady_clock::now();
    // The graph stays until release_variables(): the engine frees it unless the caller retains it.
    const variable_list cpu_grads = torch::autograd::grad(outs, leaves, gouts, /*retain_graph=*/true,
                                                          /*create_graph=*/false, /*allow_unused=*/true);
    const uint64_t measured = elapsed_since(t0);
    for (size_t i = 0; i < cpu_grads.size(); ++i) result[i] = call.to_npu(cpu_grads[i]);
    launch_op_kernels(call.device, {{recurrent_kernel(op, true), measured, kernels}});
    return result;
  }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    outputs.clear();
    leaves.clear();
    keep.clear();
  }
};

// Kernels per execution: num_layers x (2 if bidirectional), 1 for the cells.
uint32_t kernel_count(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t first = stack.size() - schema.arguments().size();
  const auto layers = schema.argumentIndexWithName("num_layers");
  const auto bidirectional = schema.argumentIndexWithName("bidirectional");
  int64_t n = layers ? stack[first + *layers].toInt() : 1;
  if (bidirectional && stack[first + *bidirectional].toBool()) n *= 2;
  return static_cast<uint32_t>(std::max<int64_t>(1, n));
}

// with_graph: the AutogradPrivateUse1 kernel, which records the CPU graph when a gradient is
// needed; the PrivateUse1 kernel (below autograd) never does.
template <bool with_graph>
void cpu_graph_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const uint32_t kernels = kernel_count(op, *stack);
  Call call;
  const size_t first = stack->size() - schema.arguments().size();
  for (size_t i = first; i < stack->size(); ++i) (*stack)[i] = call.to_cpu((*stack)[i]);
  if (call.device < 0) call.device = current_device();
  check_device(call.device);

  variable_list needs_grad;  // npu inputs that require grad
  if (with_graph && at::GradMode::is_enabled()) {
    for (auto& [npu, alias] : call.swapped) {
      if (npu.requires_grad()) needs_grad.push_back(npu);
    }
  }
  // Created before the CPU ops run, so that it takes the sequence number of this op.
  decltype(compat::makeNode<CpuGraphBackward, torch::autograd::Edge>()) node;
  if (!needs_grad.empty()) {
    node = compat::makeNode<CpuGraphBackward, torch::autograd::Edge>();
    node->op = schema.name();
    node->kernels = kernels;
    node->set_next_edges(torch::autograd::collect_next_edges(needs_grad));
    for (auto& [npu, alias] : call.swapped) {
      node->keep.push_back(npu);
      if (!npu.requires_grad()) continue;
      // In-place changes of the npu input then invalidate the CPU graph, as they would the npu one.
      alias.unsafeGetTensorImpl()->set_version_counter(npu.unsafeGetTensorImpl()->version_counter());
      alias.set_requires_grad(true);
      node->leaves.push_back(alias);
    }
  }

  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, call.device));
  c10::DispatchKeySet keys(c10::DispatchKey::CPU);
  if (node) keys = keys.add(c10::DispatchKey::AutogradCPU);
  const auto t0 = std::chrono::steady_clock::now();
  {
    at::AutoGradMode grad_mode(static_cast<bool>(node));
    op.redispatchBoxed(keys, stack);
  }
  const uint64_t measured = elapsed_since(t0);

  call.fix_up_resized();
  for (size_t i = stack->size() - schema.returns().size(); i < stack->size(); ++i) {
    if (!(*stack)[i].isTensor()) continue;
    const at::Tensor cpu = (*stack)[i].toTensor();
    at::Tensor npu = call.to_npu(cpu);
    if (node && cpu.requires_grad()) {
      npu.unsafeGetTensorImpl()->set_version_counter(cpu.unsafeGetTensorImpl()->version_counter());
      torch::autograd::set_history(npu, node);
      node->outputs.push_back(cpu);
    }
    (*stack)[i] = npu;
  }
  launch_op_kernels(call.device, {{recurrent_kernel(schema.name(), false), measured, kernels}});
}

constexpr const char* kOps[] = {"lstm.input", "lstm.data", "gru.input", "gru.data", "lstm_cell", "gru_cell"};

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  for (const char* name : kOps) m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_graph_op<true>>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : kOps) m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_graph_op<false>>());
}

}  // namespace torch_mspti::sim
