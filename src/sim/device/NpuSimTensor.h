// Tensor plumbing shared by the native ops and the CPU fallback of the simulated NPU, and the
// table that names the kernel an op execution launches.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_mspti::sim {

// A CPU tensor over the same host memory as `t` (sizes, strides, offset, conj/neg bits kept).
// CPU tensors are returned as they are.
at::Tensor cpu_alias(const at::Tensor& t);

// An npu tensor on `storage` with the geometry and dtype of the CPU tensor `like`.
at::Tensor npu_view_of(const c10::Storage& storage, const at::Tensor& like);

// Wraps the storage of a freshly computed CPU tensor as npu memory of `device` without copying
// (the npu storage keeps the CPU storage alive).
c10::Storage adopt_storage(const c10::Storage& cpu_storage, c10::DeviceIndex device);

// Resizes an npu tensor in place (storage grown through the device allocator when needed).
void npu_resize(const at::Tensor& self, c10::IntArrayRef size,
                std::optional<c10::MemoryFormat> memory_format = std::nullopt);

// The kernel an op launches: Ascend-style name and MSPTI kernel type (see README.md).
struct KernelInfo {
  const char* name;  // interned, valid for the life of the process
  const char* type;
  bool launches;  // false for ops that only build metadata (views)
};
KernelInfo kernel_for_op(const std::string& op_name);

// Kernels of the ops whose npu kernel launches more than one kernel, or a kernel that depends on
// the arguments (NpuSimKernels.cpp, README.md).
enum class ConvPart { kForward, kInputGrad, kWeightGrad, kBiasGrad };
KernelInfo conv_kernel(int64_t spatial_dims, bool transposed, ConvPart part);
std::vector<KernelInfo> batch_norm_kernels(bool backward, bool training, int64_t input_dim, bool input_grad);
KernelInfo attention_kernel(bool backward);
// `op_name` with namespace, without overload: aten::lstm, aten::gru, aten::lstm_cell, aten::gru_cell.
KernelInfo recurrent_kernel(const std::string& op_name, bool backward);
// Interns `s` (returned pointer stays valid for the life of the process).
const char* intern(const std::string& s);

}  // namespace torch_mspti::sim
