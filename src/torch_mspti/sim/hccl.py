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

import secrets
import threading
import warnings
from collections.abc import Sequence

import torch
import torch.distributed as dist

from .hccl_model import LinkModel

__all__ = ["register", "set_link_model", "link_model", "communicator_name", "BACKEND"]

BACKEND = "hccl"
_COMM_NAME_KEY = "torch_mspti_sim_hccl/comm_name"

_lock = threading.Lock()
_registered = False
_library: torch.library.Library | None = None  # keeps the kernel registrations alive
_link = LinkModel()
_comms: dict[str, Communicator] = {}


class Communicator:
    """One HCCL communicator: a process group's gloo transport, its name and collective counter."""

    def __init__(self, group_name: str, rank: int, size: int, gloo, comm_name: str, ranks: Sequence[int]):
        self.group_name = group_name
        self.rank = rank
        self.size = size
        self.gloo = gloo
        self.comm_name = comm_name
        self.ranks = list(ranks)
        self._next = 0
        self._lock = threading.Lock()

    def next_index(self) -> int:
        with self._lock:
            i = self._next
            self._next += 1
            return i


def set_link_model(bandwidth_gb_s: float = 50.0, latency_us: float = 8.0) -> None:
    """Device time model of later collectives of this process (see :class:`hccl_model.LinkModel`)."""
    global _link
    _link = LinkModel(bandwidth_gb_s=float(bandwidth_gb_s), latency_us=float(latency_us))


def link_model() -> LinkModel:
    return _link


def communicator_name(group: dist.ProcessGroup | None = None) -> str:
    """The HCCL communicator name (MSPTI commName) of ``group`` (default: the world group)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return _comms[pg.group_name].comm_name


def _agree_comm_name(store, rank: int) -> str:
    # Rank 0 mints the communicator's name and shares it, as HCCL's root info is shared; every rank then
    # reports the same commName for the same communicator. HCCL names look like "16898834563344171674".
    if rank == 0:
        name = str(secrets.randbits(64) | (1 << 63))
        store.set(_COMM_NAME_KEY, name)
        return name
    return store.get(_COMM_NAME_KEY).decode()


def _create_backend(opts, backend_options):
    """Backend creator for ``Backend.register_backend`` (extended API): a gloo backend on host memory."""
    del backend_options
    gloo = dist.ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    comm_name = _agree_comm_name(opts.store, opts.group_rank)
    comm = Communicator(
        opts.group_id, opts.group_rank, opts.group_size, gloo, comm_name, opts.global_ranks_in_group or []
    )
    with _lock:
        _comms[opts.group_id] = comm
    return gloo


def communicators() -> dict[str, Communicator]:
    """Communicators of this process by process-group name (a snapshot)."""
    with _lock:
        return dict(_comms)


def register() -> None:
    """Register the ``hccl`` backend for ``npu`` and our PrivateUse1 kernels of the c10d ops.

    Called by :func:`torch_mspti.sim.enable` (the device must be loaded and named ``npu``). Idempotent.
    Overrides torch's default PrivateUse1 kernels of the c10d ops for this process (torch warns once
    about overriding them; the warning is silenced here).
    """
    global _registered, _library
    from . import hccl_ops

    with _lock:
        if _registered or not dist.is_available():
            return
        dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["npu"])
        lib = torch.library.Library("c10d", "IMPL")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Warning only once for all operators")
            for op, kernel in hccl_ops.KERNELS.items():
                lib.impl(op, kernel, "PrivateUse1")
            for op in hccl_ops.UNSUPPORTED:
                lib.impl(op, hccl_ops.unsupported(op), "PrivateUse1")
        _library = lib
        _registered = True
