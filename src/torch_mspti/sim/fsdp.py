"""FSDP2's custom ops for npu tensors on torch versions that give them no PrivateUse1 kernel.

FSDP2 copies parameters in and out of its all-gather buffers with ``torch.ops.fsdp.all_gather_copy_in``,
``split_with_sizes_copy`` and ``chunk_cat`` (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py).
torch >= 2.8 registers their device-generic Python kernels for PrivateUse1 too; torch 2.7 only for
CUDA, XPU, HPU, CPU and MTIA, so npu tensors would reach the simulated device's CPU fallback, which
runs the kernel on CPU aliases and breaks the views FSDP2's buffers rely on. :func:`install` registers
the same device-generic kernels for PrivateUse1 when that module is imported and lacks them.
"""

from __future__ import annotations

import torch

from ._after_import import call_after_import

__all__ = ["install"]

_MODULE = "torch.distributed.fsdp._fully_shard._fsdp_collectives"
# op name -> the device-generic kernel's name in _MODULE (torch 2.7)
_KERNELS = {"all_gather_copy_in": "all_gather_copy_in_cuda", "split_with_sizes_copy": "split_with_sizes_copy",
            "chunk_cat": "chunk_cat"}  # fmt: skip


def _register() -> None:
    import importlib

    module = importlib.import_module(_MODULE)
    for op, kernel in _KERNELS.items():
        if not hasattr(torch.ops.fsdp, op) or not hasattr(module, kernel):
            continue
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"fsdp::{op}", "PrivateUse1"):
            continue  # torch >= 2.8 has it
        torch.library.impl(module.lib, op, "PrivateUse1")(getattr(module, kernel))


def install() -> None:
    """Register the kernels now if FSDP2 is imported, else right after it is (torch_mspti.sim.enable())."""
    call_after_import(_MODULE, _register)
