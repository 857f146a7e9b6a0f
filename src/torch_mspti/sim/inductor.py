"""torch.compile's default backend (inductor) on the simulated NPU.

The simulated device's tensors live in host memory, so inductor's CPU code generation serves it:
:func:`register` registers, for the device ``npu``, inductor's C++ (CPU) scheduling with a Python
wrapper whose kernel calls go through :func:`launch_compiled_kernel`. That runs the compiled C++
kernel on the tensors' host memory, then launches one NPU kernel of the same name on the device's
current stream (``torch.ops.npu_sim.launch_kernel``) inside a RecordFunction of that name, so a
compiled graph's kernels appear on the device lane, linked to their op, as real torch_npu's
compiled kernels do (torch_npu registers its own inductor backend instead, docs/torch_npu.md 3).
Ops inductor leaves to ATen (matmuls, convolutions) run as the device's npu ops.

Not supported: ``cpp_wrapper`` mode (``torch._inductor.config.cpp_wrapper=True``, AOTInductor),
refused with an error that names ``backend="aot_eager"``. Thread-safety: :func:`register` is
idempotent and takes a lock; the generated code is as thread-safe as inductor's.
"""

from __future__ import annotations

import threading
import time

import torch

from ._after_import import call_after_import

__all__ = ["install", "register", "launch_compiled_kernel", "UNSUPPORTED_HINT"]

UNSUPPORTED_HINT = "use torch.compile(model, backend='aot_eager') on the simulated NPU, or leave cpp_wrapper off"
_lock = threading.Lock()
_registered = False
# Importing inductor takes seconds, so enable() does not: the registration happens once this module of
# inductor has been imported (torch.compile imports it before lowering anything).
_TRIGGER = "torch._inductor.compile_fx"


def install() -> None:
    """Make torch.compile's inductor serve the device ``npu`` (torch_mspti.sim.enable() calls this):
    registers now when inductor is already imported, else as soon as it is."""
    call_after_import(_TRIGGER, register)


def launch_compiled_kernel(name: str, device: int, kernel, *args) -> None:
    """Run a compiled kernel on the npu tensors' host memory, then launch it on the simulated device.

    ``name``: the kernel's name (the device row's and its op's); ``device``: npu index (-1: current);
    ``kernel``: the compiled callable; ``args``: its arguments. The device kernel lasts the host time
    the kernel took, under the device's duration model. Raises whatever the kernel raises.
    """
    t0 = time.perf_counter_ns()
    kernel(*args)
    elapsed = time.perf_counter_ns() - t0
    torch.ops.npu_sim.launch_kernel(name, device if device >= 0 else torch.npu.current_device(), elapsed)


def _wrapper_class():
    from torch._inductor.codegen import wrapper as wrapper_mod

    base = getattr(wrapper_mod, "PythonWrapperCodegen", None) or wrapper_mod.WrapperCodeGen

    class NpuSimPythonWrapperCodegen(base):
        """Inductor's Python wrapper, calling C++ kernels of npu graphs through launch_compiled_kernel."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                return base.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
            return NpuSimPythonWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.imports.writeline(
                "from torch_mspti.sim.inductor import launch_compiled_kernel as _npu_sim_launch_compiled_kernel"
            )

        def _npu_call(self, kernel_name, call_args, device) -> bool:
            if device is None or device.type != "npu":
                return False
            index = -1 if device.index is None else int(device.index)
            args = ", ".join([repr(kernel_name), str(index), kernel_name, *map(str, call_args)])
            self.writeline(f"_npu_sim_launch_compiled_kernel({args}){self.ending}")
            return True

        if hasattr(base, "_generate_kernel_call_helper"):  # torch >= 2.8: calls are lines generated later

            def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
                from torch._inductor.virtualized import V

                dev = device or V.graph.get_current_device_or_throw()
                if triton or not self._npu_call(kernel_name, call_args, dev):
                    super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)

        else:  # torch 2.7

            def generate_kernel_call(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
                from torch._inductor.virtualized import V

                dev = device or V.graph.get_current_device_or_throw()
                if triton or not self._npu_call(kernel_name, call_args, dev):
                    super().generate_kernel_call(kernel_name, call_args, device=device, triton=triton, **kwargs)

    return NpuSimPythonWrapperCodegen


class _RefusedCppWrapper:
    """Stands where inductor looks for the device's C++ wrapper codegen: creating one is refused."""

    supports_caching = False

    @staticmethod
    def create(*args, **kwargs):
        raise RuntimeError(
            "torch_mspti.sim: inductor's cpp_wrapper mode (and AOTInductor) is not supported on the simulated "
            "NPU; " + UNSUPPORTED_HINT
        )


def _register_device_interface() -> None:
    """Give inductor a device interface for ``npu``: its lowering asks the device's interface for
    properties (a reduction's split, for one), and a device without one fails there with
    "No interface for device npu". The simulated device's kernels run on the host, so the CPU
    interface's answers hold; device, stream and synchronisation calls go to ``torch.npu``."""
    from torch._dynamo import device_interface as di

    cpu = getattr(di, "CpuInterface", None)
    if cpu is None:
        raise RuntimeError(f"torch_mspti.sim: this torch's dynamo has no CPU device interface; {UNSUPPORTED_HINT}")

    class NpuSimInterface(cpu):
        @staticmethod
        def is_available() -> bool:
            return torch.npu.is_available()

        @staticmethod
        def device_count() -> int:
            return torch.npu.device_count()

        @staticmethod
        def current_device() -> int:
            return torch.npu.current_device()

        @staticmethod
        def set_device(device) -> None:
            torch.npu.set_device(device)

        @staticmethod
        def synchronize(device=None) -> None:
            torch.npu.synchronize(device)

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False  # inductor's C++ code generation serves the device, never triton

    di.register_interface_for_device("npu", NpuSimInterface)


def _schedule_npu_nodes_as_cpu_nodes() -> None:
    """inductor's scheduler takes CPU-only decisions by ``node.is_cpu()`` (a device type of
    "cpu"): loop reindexing, which only its GPU code generation handles, is skipped for CPU nodes.
    The simulated device's nodes are generated by the CPU backend (CppScheduling), so they must
    take the CPU branch too; without it a reduction fused with a pointwise op fails with
    "can't multiply sequence by non-int". Only nodes on ``npu`` change."""
    from torch._inductor.scheduler import BaseSchedulerNode

    original = BaseSchedulerNode.is_cpu
    if getattr(original, "_npu_sim", False):
        return

    def is_cpu(self) -> bool:
        if original(self):
            return True
        device = self.get_device()
        return device is not None and device.type == "npu"

    is_cpu._npu_sim = True
    BaseSchedulerNode.is_cpu = is_cpu


def _npu_code_generation_is_cpp() -> None:
    """inductor asks ``get_current_backend(device_type)`` which code generator serves a device, and
    answers ``config.cuda_backend`` ("triton") for any device it does not know. For ``npu`` the answer
    must be the CPU's (``config.cpu_backend``, "cpp"), which generates its code: on "triton" the C++
    kernels' CSE values get no dtype and ``arange`` (``index_expr``, used by dropout, ``rand`` and
    ``arange``) fails its ``index.dtype is not None`` assertion. The modules that imported the
    function by name get the wrapper too; only ``npu`` changes."""
    import importlib

    from torch._inductor import config, utils

    original = getattr(utils, "get_current_backend", None)
    if original is None:
        # torch before 2.8 has no such question: the scheduling registered for the device
        # (register_backend_for_device, below) alone decides its code generation.
        return
    if getattr(original, "_npu_sim", False):
        return

    def get_current_backend(device_type: str | None = None) -> str:
        if device_type is None:
            from torch._inductor.virtualized import V

            device = V.graph.get_current_device_or_throw() if V.graph is not None else None
            device_type = device.type if device is not None else None
        if device_type == "npu":
            return config.cpu_backend
        return original(device_type)

    get_current_backend._npu_sim = True
    for name in ("torch._inductor.utils", "torch._inductor.codegen.common", "torch._inductor.scheduler",
                 "torch._inductor.kernel.mm_common"):  # fmt: skip
        module = importlib.import_module(name)
        if getattr(module, "get_current_backend", None) is original:
            module.get_current_backend = get_current_backend


def register() -> None:
    """Register inductor's CPU code generation for the device ``npu`` (once; later calls do nothing).

    Raises RuntimeError naming ``backend='aot_eager'`` when this torch's inductor lacks what is needed.
    """
    global _registered
    with _lock:
        if _registered:
            return
        try:
            from torch._inductor.codegen.common import (
                DeviceOpOverrides,
                register_backend_for_device,
                register_device_op_overrides,
            )
            from torch._inductor.codegen.cpp import CppScheduling
        except ImportError as exc:
            raise RuntimeError(
                f"torch_mspti.sim: this torch's inductor has no device backend registry ({exc}); {UNSUPPORTED_HINT}"
            ) from exc

        class NpuSimDeviceOpOverrides(DeviceOpOverrides):
            """Stream and device plumbing of the generated wrapper: host memory, no raw streams."""

            def import_get_raw_stream_as(self, name: str) -> str:
                return f"def {name}(index): return 0"

            def set_device(self, device_idx: int) -> str:
                return f"torch.npu.set_device({device_idx})"

            def synchronize(self) -> str:
                return "torch.npu.synchronize()"

            def device_guard(self, device_idx: int) -> str:
                return f"torch.npu.device({device_idx})"

        register_device_op_overrides("npu", NpuSimDeviceOpOverrides())
        _register_device_interface()
        _schedule_npu_nodes_as_cpu_nodes()
        _npu_code_generation_is_cpp()
        register_backend_for_device("npu", CppScheduling, _wrapper_class(), _RefusedCppWrapper)
        _registered = True
