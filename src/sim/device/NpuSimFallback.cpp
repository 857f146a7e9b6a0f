// Boxed CPU fallback of the simulated NPU: every aten op without a native npu kernel runs its CPU
// kernel on CPU aliases of the npu arguments (same host memory, no copies), its results are mapped
// back to npu tensors, and the op's execution launches its kernel(s) on the simulated timeline
// with the measured host compute time as duration.
#include "NpuSimRuntime.h"
#include "NpuSimTensor.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <chrono>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace torch_mspti::sim {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

bool is_npu(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == kNpu;
}

// State of one fallback call: the npu tensors that went in, their aliases, and the storages
// results may alias.
struct Call {
  std::vector<std::pair<at::Tensor, at::Tensor>> swapped;  // (npu original, cpu alias)
  std::unordered_map<const void*, c10::Storage> npu_storage_by_base;
  std::unordered_map<const void*, bool> cpu_input_bases;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> adopted;
  c10::DeviceIndex device = -1;
  uint32_t list_len = 0;

  c10::IValue to_cpu(const c10::IValue& v) {
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

  // A CPU kernel may have grown an out= argument into fresh memory: bring the npu tensor along.
  void fix_up_resized() {
    for (auto& [npu, alias] : swapped) {
      if (alias.data_ptr() == npu.data_ptr() && alias.sizes() == npu.sizes() && alias.strides() == npu.strides()) {
        continue;
      }
      npu_resize(npu, alias.sizes());
      at::Tensor back = cpu_alias(npu);
      if (back.data_ptr() != alias.data_ptr()) back.copy_(alias);
    }
  }

  at::Tensor to_npu(const at::Tensor& r) {
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

  c10::IValue to_npu(const c10::IValue& v) {
    if (v.isTensor()) return to_npu(v.toTensor());
    if (v.isList()) {
      c10::List<c10::IValue> out = v.toList().copy();
      for (size_t i = 0; i < out.size(); ++i) out.set(i, to_npu(out.get(i)));
      return out;
    }
    return v;
  }
};

// True for ops whose results only alias their inputs without writing (views): no kernel runs.
bool metadata_only(const c10::FunctionSchema& schema) {
  if (schema.returns().empty()) return false;
  for (const auto& r : schema.returns()) {
    if (r.alias_info() == nullptr || r.alias_info()->isWrite()) return false;
  }
  return true;
}

void npu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t first = stack->size() - nargs;
  Call call;
  for (size_t i = first; i < stack->size(); ++i) (*stack)[i] = call.to_cpu((*stack)[i]);
  if (call.device < 0) call.device = current_device();
  check_device(call.device);

  c10::DeviceGuard guard(c10::Device(kNpu, call.device));
  const auto t0 = std::chrono::steady_clock::now();
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const auto measured = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());

  call.fix_up_resized();
  const size_t nret = schema.returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) (*stack)[i] = call.to_npu((*stack)[i]);

  if (metadata_only(schema)) return;
  const std::string& name = schema.name();
  const KernelInfo k = kernel_for_op(name);
  const int64_t stream = current_stream_id(call.device);
  // _foreach_* ops run one kernel per tensor of their lists; the rest run one kernel.
  const bool per_tensor = name.rfind("aten::_foreach_", 0) == 0 && call.list_len > 0;
  count_op();
  launch(k.name, k.type, call.device, stream, kernel_duration(measured), per_tensor ? call.list_len : 1);
  if (name == "aten::_local_scalar_dense") synchronize_stream(call.device, stream);  // .item() blocks
}

}  // namespace

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
      lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&npu_cpu_fallback>());
    }
  });
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&npu_cpu_fallback>()); }

}  // namespace torch_mspti::sim
