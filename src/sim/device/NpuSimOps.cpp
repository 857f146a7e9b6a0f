// Native PrivateUse1 ops of the simulated NPU: allocation, copies, views and resizing. Everything
// else goes through the CPU fallback (NpuSimFallback.cpp).
#include "NpuSimRuntime.h"
#include "NpuSimTensor.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <chrono>

namespace torch_mspti::sim {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kNpu) return t;
  const c10::Storage& st = t.storage();
  // Non-owning and resizable through the CPU allocator: a CPU kernel that grows an out= argument
  // gets fresh memory, which the fallback notices and copies back.
  c10::Storage alias(c10::Storage::use_byte_size_t(), st.nbytes(),
                     c10::DataPtr(st.mutable_data(), c10::Device(c10::DeviceType::CPU)), c10::GetCPUAllocator(),
                     /*resizable=*/true);
  auto a =
      at::detail::make_tensor<c10::TensorImpl>(std::move(alias), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  a.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) a._set_conj(true);
  if (t.is_neg()) a._set_neg(true);
  return a;
}

at::Tensor npu_view_of(const c10::Storage& storage, const at::Tensor& like) {
  auto v = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), like.dtype());
  v.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) v._set_conj(true);
  if (like.is_neg()) v._set_neg(true);
  return v;
}

namespace {
void release_adopted(void* ctx) { delete static_cast<c10::Storage*>(ctx); }
}  // namespace

c10::Storage adopt_storage(const c10::Storage& cpu_storage, c10::DeviceIndex device) {
  auto* keep = new c10::Storage(cpu_storage);
  c10::DataPtr dp(keep->mutable_data(), keep, &release_adopted, c10::Device(kNpu, device));
  return c10::Storage(c10::Storage::use_byte_size_t(), keep->nbytes(), std::move(dp), device_allocator(),
                      /*resizable=*/true);
}

void npu_resize(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, /*stride=*/std::nullopt);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
}

namespace {

uint64_t elapsed_ns(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> /*pin_memory*/, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "simulated NPU: only strided tensors");
  const c10::Device dev = device.value_or(c10::Device(kNpu, current_device()));
  const c10::DeviceIndex index = dev.has_index() ? dev.index() : current_device();
  check_device(index);
  c10::DeviceGuard guard(c10::Device(kNpu, index));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "simulated NPU: only strided tensors");
  const c10::Device dev = device.value_or(c10::Device(kNpu, current_device()));
  const c10::DeviceIndex index = dev.has_index() ? dev.index() : current_device();
  check_device(index);
  c10::DeviceGuard guard(c10::Device(kNpu, index));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

// Copies between host and npu, or within the npu. The data moves at once (synchronously); what
// the device does for it goes on the simulated timeline as torch_npu does it:
//   host -> npu   aclrtMemcpyAsync HtoD of the source bytes (a DMA task, MEMCPY record), then a
//                 Cast kernel when the dtype changes and a ViewCopy into a strided destination;
//   npu -> host   a TransData kernel for a non-contiguous source and a Cast when the dtype
//                 changes, then the DtoH copy of the destination's bytes;
//   npu -> npu    Cast (dtype change), TransData (non-contiguous -> contiguous) or ViewCopy (into
//                 a strided destination) kernels when something is computed, else a DtoD copy.
// A blocking host <-> npu copy then synchronizes its stream (aclrtSynchronizeStream).
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.numel() == 0) return self;
  at::Tensor dst_a = cpu_alias(self);
  const at::Tensor src_a = cpu_alias(src);
  const auto t0 = std::chrono::steady_clock::now();
  at::native::copy_(dst_a, src_a, non_blocking);
  const uint64_t measured = elapsed_ns(t0);

  const bool dst_npu = self.device().type() == kNpu;
  const bool src_npu = src.device().type() == kNpu;
  const c10::DeviceIndex dev = dst_npu ? self.device().index() : src.device().index();
  const int64_t stream = current_stream_id(dev);
  const uint64_t dur = kernel_duration(measured);
  const bool cast = self.scalar_type() != src.scalar_type();
  const auto kernel = [&](const char* name) { launch(name, "KERNEL_AIVEC", dev, stream, dur); };
  const uint64_t src_bytes = static_cast<uint64_t>(src.numel()) * src.element_size();
  const uint64_t dst_bytes = static_cast<uint64_t>(self.numel()) * self.element_size();
  bool kernels = true;
  if (dst_npu && src_npu) {
    if (cast) {
      kernel("Cast");
    } else if (!src.is_contiguous() && self.is_contiguous()) {
      kernel("TransData");
    } else if (!self.is_contiguous()) {
      kernel("ViewCopy");
    } else {
      memcpy_async(CopyKind::kDeviceToDevice, dst_bytes, dev, stream, dur);
      kernels = false;
    }
  } else if (dst_npu) {
    memcpy_async(CopyKind::kHostToDevice, src_bytes, dev, stream, dur);
    if (cast) kernel("Cast");
    if (!self.is_contiguous()) kernel("ViewCopy");
    kernels = cast || !self.is_contiguous();
  } else {
    if (!src.is_contiguous()) kernel("TransData");
    if (cast) kernel("Cast");
    kernels = cast || !src.is_contiguous();
    memcpy_async(CopyKind::kDeviceToHost, dst_bytes, dev, stream, dur);
  }
  if (kernels) count_op();
  if (dst_npu != src_npu && !non_blocking) synchronize_stream(dev, stream);
  return self;
}

// .item(): a DtoH copy of one element, then the stream is synchronized (the value is needed now).
at::Scalar local_scalar_dense(const at::Tensor& self) {
  const c10::DeviceIndex dev = self.device().index();
  const int64_t stream = current_stream_id(dev);
  memcpy_async(CopyKind::kDeviceToHost, static_cast<uint64_t>(self.element_size()), dev, stream, kernel_duration(0));
  synchronize_stream(dev, stream);
  return at::_local_scalar_dense(cpu_alias(self));
}

void release_kept_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

// torch.ops.npu_sim.cpu_alias: a CPU tensor over the same host memory as an npu tensor (same
// sizes, strides, offset, dtype), keeping the npu storage alive as long as the alias lives; so a
// collective can move the data through a CPU backend (gloo) in place. CPU tensors come back as
// they are.
at::Tensor cpu_alias_op(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kNpu) return t;
  auto* keep = new c10::Storage(t.storage());
  c10::Storage alias(c10::Storage::use_byte_size_t(), keep->nbytes(),
                     c10::DataPtr(keep->mutable_data(), keep, &release_kept_storage, c10::Device(c10::DeviceType::CPU)),
                     /*allocator=*/nullptr, /*resizable=*/false);
  auto a =
      at::detail::make_tensor<c10::TensorImpl>(std::move(alias), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  a.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return a;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  copy_(out, self, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.device().type() == kNpu) {
    npu_resize(dst, self.sizes());
  } else {
    at::native::resize_(dst, self.sizes());
  }
  return copy_from(self, dst, false);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  npu_resize(self, size, memory_format);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  const int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src) { return at::native::set_tensor_(self, src); }

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(), /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

void record_stream(at::Tensor& /*self*/, c10::Stream /*stream*/) {}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty_memory_format);
  m.impl("empty_strided", &empty_strided);
  m.impl("copy_", &copy_);
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("resize_", &resize_);
  m.impl("set_.source_Storage_storage_offset", &set_storage);
  m.impl("set_.source_Storage", &set_source_storage);
  m.impl("set_.source_Tensor", &set_tensor);
  m.impl("set_", &set_empty);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("unfold", &at::native::unfold);
  m.impl("record_stream", &record_stream);
  m.impl("_local_scalar_dense", &local_scalar_dense);
}

TORCH_LIBRARY_FRAGMENT(npu_sim, m) { m.def("cpu_alias(Tensor t) -> Tensor", &cpu_alias_op); }

}  // namespace torch_mspti::sim
