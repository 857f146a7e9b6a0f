"""This process's HCCL communicators, for the collective join: what the plugin asks Python at the
start and at the stop of each profiling session.

A collective's COMMUNICATION record names its HCCL communicator (``commName``); a CUDA trace's
collective row names its c10d process group (``pg_name``, as in ``distributedInfo.pg_config``), the
group's description and ranks, and numbers the group's collectives (``Seq``). This module maps the
one to the other by walking ``torch.distributed``'s process groups and asking each group's ``npu``
backend for its communicator's name and its sequence number:

* the simulated ``hccl`` backend (:mod:`torch_mspti.sim.hccl_comms`, when loaded): its
  :class:`Communicator` for the group, ``comm_name`` and ``seq`` (calls issued, counted as
  ProcessGroupHCCL counts them);
* torch_npu's ProcessGroupHCCL: ``get_hccl_comm_name(rank, init_comm=False)`` (never creates a
  communicator that does not exist yet; a torch_npu without that keyword is not asked) and
  ``_get_sequence_number_for_group()`` (its ``seq_``), docs/torch_npu.md 6.

Called by the plugin with the GIL held, on the thread that starts or stops the session; never
raises (a group it cannot describe is left out, and its rows are counted as ``no_group``).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

__all__ = ["describe"]

# (comm_name, pg_name, pg_desc, ranks, rank in group, seq): the shape _C.set_communicator_provider takes.
Entry = tuple[str, str, str, list[int], int, int]


def _npu_backend(pg: Any) -> Any:
    try:  # the PrivateUse1 device by its registered name ("npu" once torch_npu or the simulator is loaded)
        device = torch.device(torch._C._get_privateuse1_backend_name())
        return pg._get_backend(device)
    except Exception:
        return None


def _from_simulator(pg_name: str) -> tuple[str, int] | None:
    comms = sys.modules.get("torch_mspti.sim.hccl_comms")  # never imported here: loaded by sim.enable()
    comm = comms.communicators().get(pg_name) if comms is not None else None
    return (comm.comm_name, comm.seq) if comm is not None else None


def _from_torch_npu(pg: Any, global_rank: int) -> tuple[str, int] | None:
    backend = _npu_backend(pg)
    get_name = getattr(backend, "get_hccl_comm_name", None)
    if get_name is None:
        return None
    try:
        name = str(get_name(global_rank, init_comm=False) or "")
    except Exception:  # no init_comm keyword (older torch_npu), or no communicator yet
        return None
    if not name:
        return None
    try:
        seq = int(backend._get_sequence_number_for_group())
    except Exception:
        seq = -1
    return name, seq


def describe() -> list[Entry]:
    """One entry per process group of this process that has an HCCL communicator.

    The entry's rank is this process's rank *in the group* (what the trace writes as ``Rank``, as
    torch writes ProcessGroupNCCL's ``rank_``): the index of the global rank in the group's global
    ``ranks``, e.g. 1 for global rank 2 in ``new_group([0, 2])``. torch_npu's
    ``get_hccl_comm_name`` is asked with the global rank, which picks the device (docs/torch_npu.md 6).
    tests/test_subgroup_ranks.py tells the two apart."""
    try:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return []
        c10d = dist.distributed_c10d
        me = dist.get_rank()
        out: list[Entry] = []
        for pg in list(c10d._world.pg_map):
            try:
                pg_name = c10d._get_process_group_name(pg)
                ranks = [int(r) for r in c10d.get_process_group_ranks(pg)]
                found = _from_simulator(pg_name) or _from_torch_npu(pg, me)
                if found is None:
                    continue
                comm_name, seq = found
                rank = ranks.index(me) if me in ranks else -1
                out.append((comm_name, str(pg_name), str(pg.group_desc), ranks, rank, int(seq)))
            except Exception:
                continue
        return out
    except Exception:
        return []
