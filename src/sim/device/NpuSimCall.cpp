// Running an op of the simulated NPU by its CPU implementation on CPU aliases of its npu arguments
// (NpuSimCall.h), and launching the kernels of an op execution.
#include "NpuSimCall.h"

#include "NpuSimRuntime.h"

#include <c10/core/DeviceGuard.h>

#include <algorithm>

namespace torch_mspti::sim {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

bool is_npu(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == kNpu;
}

}  // namespace

c10::IValue Call::to_cpu(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return v;
    if (t.device().type() != kNpu) {
      cpu_input_bases[t.storage().data()] = true;
      return v;
    }
    if (device < 0) device = t.device().index();
    at::Tensor a = cpu_alias(t);
    npu_storage_by_base.emplace(t.storage().data(), t.storage());
    swapped.emplace_back(t, a);
    return a;
  }
  if (v.isList()) {
    c10::List<c10::IValue> list = v.toList();
    bool any = false;
    for (const c10::IValue& e : list) any = any || is_npu(e);
    if (!any) return v;
    list_len = std::max<uint32_t>(list_len, static_cast<uint32_t>(list.size()));
    c10::List<c10::IValue> out = list.copy();
    for (size_t i = 0; i < out.size(); ++i) out.set(i, to_cpu(out.get(i)));
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == kNpu) {
    if (device < 0 && v.toDevice().has_index()) device = v.toDevice().index();
    if (device < 0) device = current_device();
    return c10::Device(c10::DeviceType::CPU);
  }
  return v;
}

void Call::fix_up_resized() {
  for (auto& [npu, alias] : swapped) {
    if (alias.data_ptr() == npu.data_ptr() && alias.sizes() == npu.sizes() && alias.strides() == npu.strides()) {
      continue;
    }
    if (alias.storage().data() == npu.storage().data()) {
      // Same memory, new geometry (in-place view ops, or a resize that fit): take it as it is.
      npu.unsafeGetTensorImpl()->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
      continue;
    }
    npu_resize(npu, alias.sizes());
    at::Tensor back = cpu_alias(npu);
    if (back.data_ptr() != alias.data_ptr()) back.copy_(alias);
  }
}

at::Tensor Call::to_npu(const at::Tensor& r) {
  if (!r.defined() || r.device().type() != c10::DeviceType::CPU) return r;
  for (auto& [npu, alias] : swapped) {
    if (alias.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) return npu;
  }
  const void* base = r.storage().data();
  if (auto it = npu_storage_by_base.find(base); it != npu_storage_by_base.end() && base != nullptr) {
    return npu_view_of(it->second, r);  // a view of an npu argument
  }
  if (base != nullptr && cpu_input_bases.count(base) != 0) {
    // Aliases a CPU argument: the npu result must own its memory.
    at::Tensor fresh = r.clone();
    return npu_view_of(adopt_storage(fresh.storage(), device), fresh);
  }
  const c10::StorageImpl* key = r.storage().unsafeGetStorageImpl();
  auto it = adopted.find(key);
  if (it == adopted.end()) it = adopted.emplace(key, adopt_storage(r.storage(), device)).first;
  return npu_view_of(it->second, r);
}

c10::IValue Call::to_npu(const c10::IValue& v) {
  if (v.isTensor()) return to_npu(v.toTensor());
  if (v.isList()) {
    c10::List<c10::IValue> out = v.toList().copy();
    for (size_t i = 0; i < out.size(); ++i) out.set(i, to_npu(out.get(i)));
    return out;
  }
  return v;
}

uint64_t elapsed_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

uint64_t run_cpu_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack, Call& call, c10::DispatchKeySet keys) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t first = stack->size() - schema.arguments().size();
  for (size_t i = first; i < stack->size(); ++i) (*stack)[i] = call.to_cpu((*stack)[i]);
  if (call.device < 0) call.device = current_device();
  check_device(call.device);

  c10::DeviceGuard guard(c10::Device(kNpu, call.device));
  const auto t0 = std::chrono::steady_clock::now();
  op.redispatchBoxed(keys, stack);
  const uint64_t measured = elapsed_since(t0);

  call.fix_up_resized();
  const size_t nret = schema.returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) (*stack)[i] = call.to_npu((*stack)[i]);
  return measured;
}

void launch_op_kernels(c10::DeviceIndex device, const std::vector<KernelRun>& runs) {
  bool any = false;
  for (const KernelRun& r : runs) any = any || r.count > 0;
  if (!any) return;
  const int64_t stream = current_stream_id(device);
  count_op();
  for (const KernelRun& r : runs) {
    if (r.count > 0) launch(r.kernel.name, r.kernel.type, device, stream, kernel_duration(r.measured_ns), r.count);
  }
}

void launch_op_kernels(c10::DeviceIndex device, std::initializer_list<KernelRun> runs) {
  launch_op_kernels(device, std::vector<KernelRun>(runs));
}

}  // namespace torch_mspti::sim
