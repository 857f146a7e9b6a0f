"""A simulated ``hccl`` c10d backend for the simulated NPU (registered by :func:`torch_mspti.sim.enable`).

After ``enable()``, ``torch.distributed.init_process_group("hccl", ...)`` works for ``npu`` tensors as
torch_npu's backend does on hardware: one process per rank, one simulated device per process
(``torch.npu.set_device(local_rank)``), launched by ``torchrun`` or ``torch.multiprocessing.spawn``.

How a collective runs (e.g. ``dist.all_reduce(t)``):

1. torch's ProcessGroup calls the dispatcher op ``c10d::allreduce_``; its PrivateUse1 kernel is ours
   (this module overrides torch's default PrivateUse1 kernels of the c10d ops, which would forward to
   a C++ backend). So the op is on the profile, and every device record launched inside is linked to it.
2. Inside, a host range named as torch_npu names it (``HcclAllreduce``, :mod:`.hccl_model`) wraps the
   device launch: ``torch.ops.npu_sim.launch_communication`` places the collective on the device's
   communication stream (through the task queue in queued mode) and MSPTI reports a COMMUNICATION
   record ``hcom_allReduce__<c>_<i>_1`` with algType, commName, dataType and count.
3. The data moves through a gloo backend on host memory: simulated npu memory is host memory and
   ``torch.ops.npu_sim.cpu_alias`` is a CPU tensor over it, so gloo works in place, asynchronously.
   The returned Work completes when gloo has finished; ``wait()`` and ``get_future()`` behave as
   c10d's (the future's value holds the npu tensors).

Supported: all_reduce (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR; bool SUM as MAX like HCCL), broadcast,
all_gather, all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, all_to_all, all_to_all_single,
reduce, barrier (an all-reduce of one float, as torch_npu's), send and recv, and the coalesced
all-gather / reduce-scatter of functional collectives (one record per tensor); one tensor per call.
Not supported (clear RuntimeError): PREMUL_SUM (its factor is not visible to a Python kernel), the other
coalesced collectives, gather, scatter, recv from any source, reductions of dtypes gloo lacks (int16,
uint16/32/64, float8; moving them is fine). Real HCCL rejects BAND/BOR/BXOR; this backend accepts what
gloo accepts. Thread-safe: collectives may be issued from several threads (DDP's autograd hooks); each
communicator numbers its collectives under a lock.
"""

from __future__ import annotations

import atexit
import threading
import warnings

import torch
import torch.distributed as dist

from . import hccl_ops
from .hccl_comms import Communicator, communicator_name, communicators, create_backend, link_model, set_link_model

__all__ = ["register", "set_link_model", "link_model", "communicator_name", "communicators", "Communicator", "BACKEND"]

BACKEND = "hccl"

_lock = threading.Lock()
_registered = False
_library: torch.library.Library | None = None  # keeps the kernel registrations alive


def register() -> None:
    """Register the ``hccl`` backend for ``npu`` and our PrivateUse1 kernels of the c10d ops.

    Called by :func:`torch_mspti.sim.enable` (the device must be loaded and named ``npu``). Idempotent.
    Overrides torch's default PrivateUse1 kernels of the c10d ops for this process (torch warns once
    about overriding them; the warning is silenced here).
    """
    global _registered, _library

    with _lock:
        if _registered or not dist.is_available():
            return
        dist.Backend.register_backend(BACKEND, create_backend, extended_api=True, devices=["npu"])
        lib = torch.library.Library("c10d", "IMPL")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Warning only once for all operators")
            for op, kernel in hccl_ops.KERNELS.items():
                lib.impl(op, kernel, "PrivateUse1")
            for op in hccl_ops.UNSUPPORTED:
                lib.impl(op, hccl_ops.unsupported(op), "PrivateUse1")
        _library = lib
        _registered = True
        atexit.register(hccl_ops.wait_for_pending_works)  # no completion callback during finalisation
