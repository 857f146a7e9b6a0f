// Convolutions of the simulated NPU. torch routes every convolution of a PrivateUse1 tensor
// (conv1d/2d/3d, transposed ones) to convolution_overrideable, and its backward to
// convolution_backward_overrideable, neither of which has a CPU kernel: these npu kernels run
// at::convolution / at::convolution_backward on CPU aliases of the arguments and launch the
// Conv2D / Conv2DBackpropInput / Conv2DBackpropFilter / ... kernels (conv_kernel).
#include "NpuSimCall.h"

#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <vector>

namespace torch_mspti::sim {
namespace {

// From the weight (out, in / groups, *kernel): the input may lack its batch dimension.
int64_t spatial_dims(const at::Tensor& weight) { return weight.dim() - 2; }

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  Call call;
  const at::Tensor in = call.to_cpu(input);
  const at::Tensor w = call.to_cpu(weight);
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = call.to_cpu(*bias);
  const auto t0 = std::chrono::steady_clock::now();
  const at::Tensor out = at::convolution(in, w, b, stride, padding, dilation, transposed, output_padding, groups);
  const uint64_t measured = elapsed_since(t0);
  at::Tensor result = call.to_npu(out);
  launch_op_kernels(call.device, {{conv_kernel(spatial_dims(weight), transposed, ConvPart::kForward), measured}});
  return result;
}

// Each requested gradient is computed (and timed) on its own, as the separate kernels that compute
// them on the device.
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  Call call;
  const at::Tensor g = call.to_cpu(grad_output);
  const at::Tensor in = call.to_cpu(input);
  const at::Tensor w = call.to_cpu(weight);
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  const std::vector<int64_t> bias_sizes{out_channels};
  constexpr std::array<ConvPart, 3> kParts{ConvPart::kInputGrad, ConvPart::kWeightGrad, ConvPart::kBiasGrad};

  std::array<at::Tensor, 3> grads;
  std::vector<KernelRun> runs;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!output_mask[i]) continue;
    const std::array<bool, 3> only{i == 0, i == 1, i == 2};
    const auto t0 = std::chrono::steady_clock::now();
    auto parts = at::convolution_backward(g, in, w, i == 2 ? std::optional<c10::IntArrayRef>(bias_sizes) : std::nullopt,
                                          stride, padding, dilation, transposed, output_padding, groups, only);
    const uint64_t measured = elapsed_since(t0);
    const at::Tensor& part = i == 0 ? std::get<0>(parts) : i == 1 ? std::get<1>(parts) : std::get<2>(parts);
    grads[i] = call.to_npu(part);
    runs.push_back({conv_kernel(spatial_dims(weight), transposed, kParts[i]), measured});
  }
  launch_op_kernels(call.device, runs);
  return {grads[0], grads[1], grads[2]};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", &convolution_overrideable);
  m.impl("convolution_backward_overrideable", &convolution_backward_overrideable);
}

}  // namespace torch_mspti::sim
