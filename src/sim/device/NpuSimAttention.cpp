// Scaled dot-product attention on the simulated NPU. torch asks a PrivateUse1 backend which SDPA
// backend to use through _fused_sdp_choice_stub; without an answer it decomposes attention into
// matmuls and a softmax. The npu answers what the CPU would for the same tensors: where the CPU
// picks its flash kernel, the npu picks the "overrideable" backend, whose two ops
// (_scaled_dot_product_fused_attention_overrideable and its backward) run the CPU flash kernel on
// CPU aliases and launch FlashAttentionScore / FlashAttentionScoreGrad, as torch_npu's fused
// attention does. Everywhere else (dropout, 3-d inputs, ...) it stays on the math path, as the CPU.
#include "NpuSimCall.h"

#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>

namespace torch_mspti::sim {
namespace {

std::optional<at::Tensor> optional_cpu(Call& call, const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return call.to_cpu(*t);
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  constexpr auto kMath = static_cast<int64_t>(at::SDPBackend::math);
  if (query.is_nested() || key.is_nested() || value.is_nested() || enable_gqa) return kMath;
  Call call;
  const int64_t cpu = at::_fused_sdp_choice(call.to_cpu(query), call.to_cpu(key), call.to_cpu(value),
                                            optional_cpu(call, attn_mask), dropout_p, is_causal, scale, enable_gqa);
  return cpu == static_cast<int64_t>(at::SDPBackend::flash_attention)
             ? static_cast<int64_t>(at::SDPBackend::overrideable)
             : kMath;
}

using Fused = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                         at::Tensor, at::Tensor>;

// Returns (output, logsumexp) of the CPU flash kernel; the sequence offsets, RNG state and debug
// mask that other backends return are empty (no nested tensors, no dropout on this path).
Fused fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                      const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                      bool /*return_debug_mask*/, std::optional<double> scale) {
  Call call;
  const at::Tensor q = call.to_cpu(query);
  const at::Tensor k = call.to_cpu(key);
  const at::Tensor v = call.to_cpu(value);
  const std::optional<at::Tensor> mask = optional_cpu(call, attn_bias);
  const auto t0 = std::chrono::steady_clock::now();
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, mask, scale);
  const uint64_t measured = elapsed_since(t0);
  at::Tensor output = call.to_npu(out);
  at::Tensor logsumexp = call.to_npu(lse);
  const at::Tensor none = at::empty({0}, query.options().dtype(at::kLong));
  launch_op_kernels(call.device, {{attention_kernel(false), measured}});
  return {output,
          logsumexp,
          none,
          none,
          c10::SymInt(query.size(-2)),
          c10::SymInt(key.size(-2)),
          none,
          none,
          at::empty({0}, query.options())};
}

// The CPU flash kernel gives no gradient for the attention mask, so neither does the npu.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/, int64_t /*max_q*/,
    int64_t /*max_k*/, double dropout_p, bool is_causal, const at::Tensor& /*philox_seed*/,
    const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  if (!grad_input_mask[0] && !grad_input_mask[1] && !grad_input_mask[2]) return {};
  Call call;
  const at::Tensor g = call.to_cpu(grad_out);
  const at::Tensor q = call.to_cpu(query);
  const at::Tensor k = call.to_cpu(key);
  const at::Tensor v = call.to_cpu(value);
  const at::Tensor o = call.to_cpu(out);
  const at::Tensor l = call.to_cpu(logsumexp);
  const std::optional<at::Tensor> mask = optional_cpu(call, attn_bias);
  const auto t0 = std::chrono::steady_clock::now();
  auto [gq, gk, gv] =
      at::_scaled_dot_product_flash_attention_for_cpu_backward(g, q, k, v, o, l, dropout_p, is_causal, mask, scale);
  const uint64_t measured = elapsed_since(t0);
  std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> grads{
      grad_input_mask[0] ? call.to_npu(gq) : at::Tensor(), grad_input_mask[1] ? call.to_npu(gk) : at::Tensor(),
      grad_input_mask[2] ? call.to_npu(gv) : at::Tensor(), at::Tensor()};
  launch_op_kernels(call.device, {{attention_kernel(true), measured}});
  return grads;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", &fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", &fused_attention_backward);
}

}  // namespace torch_mspti::sim

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_mspti::sim::fused_sdp_choice)
}  // namespace at::native
