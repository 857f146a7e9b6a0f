"""The communicators of this process and the collectives' time model, for the simulated ``hccl``
backend. :mod:`.hccl` registers :func:`create_backend` and :mod:`.hccl_ops`' kernels run on the
communicators it creates; this module sits below both, so neither imports the other back.
Thread-safe: one lock guards the registry.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence

import torch.distributed as dist

from .hccl_model import LinkModel

__all__ = ["Communicator", "create_backend", "communicators", "communicator_name", "set_link_model", "link_model"]

_COMM_NAME_KEY = "torch_mspti_sim_hccl/comm_name"

_lock = threading.Lock()
_link = LinkModel()
_comms: dict[str, Communicator] = {}


class Communicator:
    """One HCCL communicator: a process group's gloo transport, its name and two counters: ``seq``, the
    c10d calls the group has issued (one per collective, coalesced call or point-to-point call, as
    ProcessGroupHCCL's ``seq_``, docs/torch_npu.md 6), and the HCCL calls it has made (each record's
    index in its name)."""

    def __init__(self, group_name: str, rank: int, size: int, gloo, comm_name: str, ranks: Sequence[int]):
        self.group_name = group_name
        self.rank = rank
        self.size = size
        self.gloo = gloo
        self.comm_name = comm_name
        self.ranks = list(ranks)
        self._next = 0
        self.seq = 0
        self._lock = threading.Lock()

    def note_call(self) -> int:
        """Count one c10d call on the group (before its HCCL calls); returns its number (from 1)."""
        with self._lock:
            self.seq += 1
            return self.seq

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


def create_backend(opts, backend_options):
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
