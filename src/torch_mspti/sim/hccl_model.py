"""What a collective of the simulated ``hccl`` backend looks like to MSPTI: names, data types, timing.

Pure functions and tables, no torch.distributed state; :mod:`torch_mspti.sim.hccl` uses them for each
collective it launches.

Names (one :class:`Collective` per c10d collective):

* ``kind``: HCCL's op type as it appears in communication op names (HCCL ``PROF_OP_NAME``:
  ``hcom_allReduce_``, ``hcom_broadcast_``, ``hcom_allGather_``, ``hcom_reduceScatter_``,
  ``hcom_alltoall_``, ``hcom_alltoallv_``, ``hcom_send_``, ``hcom_receive_``, ``hcom_reduce_``).
* ``host_op``: the host range torch_npu's ProcessGroupHCCL opens around the launch
  (``RECORD_FUNCTION("HcclAllreduce", ...)`` in Ascend/pytorch ``ProcessGroupHCCL.cpp``).
* ``api``: the HCCL API that launches it (``HcclAllReduce``, ...), the name of MSPTI's API record.
* ``mstx_op``: the ``opName`` of the ``"communication"`` mstx range torch_npu opens around the HCCL call
  (``getMstxHcclMsg("HcclAllreduce", ...)``; not always the host range's name: ``HcclAllGather``,
  ``HcclAlltoAllV``), see :func:`mstx_message` and docs/torch_npu.md 5.

The MSPTI record's ``name`` is HCCL's op name ``hcom_<kind>__<c>_<i>_1`` (e.g. ``hcom_allReduce__674_0_1``,
as in msprof/MindStudio exports): ``<c>`` is the last three digits of the communicator name, ``<i>`` the index
of the HCCL call in its communicator, sends and receives included (so the same collective has the same name on
every rank of the communicator as long as they made the same number of calls on it).
"""

from __future__ import annotations

import dataclasses

import torch

__all__ = [
    "Collective",
    "COLLECTIVES",
    "LinkModel",
    "data_type",
    "op_name",
    "ALG_TYPE",
    "mstx_message",
]


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective: HCCL op type, host op name, HCCL API name, c10d's collective name, traffic factor.

    ``traffic(n)`` is the share of the message each rank puts on the wire with ``n`` ranks, relative to
    the message size (bytes of ``count`` elements, see :meth:`LinkModel.duration_ns`).
    """

    kind: str
    host_op: str
    api: str
    c10d_name: str
    pattern: str  # "ring" | "shards" | "spread" | "once"
    mstx_op: str

    def traffic(self, ranks: int) -> float:
        if ranks <= 1:
            return 0.0
        if self.pattern == "ring":  # all-reduce: reduce-scatter + all-gather of the whole message
            return 2.0 * (ranks - 1) / ranks
        if self.pattern == "shards":  # count is one rank's shard; (n-1) shards go out
            return float(ranks - 1)
        if self.pattern == "spread":  # count is the whole message, (n-1)/n of it goes to the peers
            return (ranks - 1) / ranks
        return 1.0  # broadcast, reduce, send, receive: the message once


COLLECTIVES: dict[str, Collective] = {
    c.c10d_name: c
    for c in (
        Collective("allReduce", "HcclAllreduce", "HcclAllReduce", "allreduce", "ring", "HcclAllreduce"),
        Collective("broadcast", "HcclBroadcast", "HcclBroadcast", "broadcast", "once", "HcclBroadcast"),
        Collective("allGather", "HcclAllgather", "HcclAllGather", "allgather", "shards", "HcclAllGather"),
        Collective("allGather", "HcclAllgatherBase", "HcclAllGather", "_allgather_base", "shards", "HcclAllGather"),
        Collective(
            "reduceScatter", "HcclReduceScatter", "HcclReduceScatter", "reduce_scatter", "shards", "HcclReduceScatter"
        ),
        Collective(
            "reduceScatter",
            "HcclReduceScatterBase",
            "HcclReduceScatter",
            "_reduce_scatter_base",
            "shards",
            "HcclReduceScatter",
        ),
        Collective("alltoall", "HcclAlltoAll", "HcclAlltoAll", "all_to_all", "shards", "HcclAlltoAll"),
        Collective("alltoallv", "HcclAlltoAllV", "HcclAlltoAllV", "all_to_allv", "spread", "HcclAlltoAllV"),
        Collective("reduce", "HcclReduce", "HcclReduce", "reduce", "once", "HcclReduce"),
        Collective("send", "HcclSend", "HcclSend", "send", "once", "HcclSend"),
        Collective("receive", "HcclRecv", "HcclRecv", "recv", "once", "HcclRecv"),
    )
}

# HCCL reports the algorithm as one name per level joined by "-" (MSPTI profapi_inject.h: "the algorithm used
# by the communication op ... a '-' separated string"; MSPTI's adapter test uses "MESH-RING"). All simulated
# ranks share one server: level 0 is the 910B full mesh, level 1 a ring.
ALG_TYPE = "MESH-RING"


def op_name(collective: Collective, comm_name: str, index: int) -> str:
    """HCCL's name of the ``index``-th collective (0-based) of communicator ``comm_name``."""
    digits = "".join(ch for ch in comm_name if ch.isdigit())[-3:].rjust(3, "0")
    return f"hcom_{collective.kind}__{digits}_{int(index)}_1"


# msptiCommunicationDataType (mspti.md 3.3). bool travels as uint8, as torch_npu maps it for HCCL.
_DATA_TYPES: dict[torch.dtype, int] = {
    torch.int8: 0,
    torch.int16: 1,
    torch.int32: 2,
    torch.float16: 3,
    torch.float32: 4,
    torch.int64: 5,
    torch.uint64: 6,
    torch.uint8: 7,
    torch.bool: 7,
    torch.uint16: 8,
    torch.uint32: 9,
    torch.float64: 10,
    torch.bfloat16: 11,
    torch.float8_e4m3fn: 15,
    torch.float8_e5m2: 16,
}
if hasattr(torch, "float8_e8m0fnu"):
    _DATA_TYPES[torch.float8_e8m0fnu] = 17


def data_type(dtype: torch.dtype) -> int:
    """msptiCommunicationDataType of a torch dtype (mspti.md 3.3).

    Raises TypeError for dtypes HCCL cannot communicate (complex, quantized, ...)."""
    try:
        return _DATA_TYPES[dtype]
    except KeyError:
        names = ", ".join(sorted(str(d).replace("torch.", "") for d in _DATA_TYPES))
        raise TypeError(
            f"the simulated hccl backend cannot communicate {dtype} tensors (HCCL has no data type for it); "
            f"supported: {names}"
        ) from None


# The dataType names of torch_npu's mstx message, by msptiCommunicationDataType (HCCL's own numbering,
# mspti.md 3.3); any other type is "na" (docs/torch_npu.md 5).
_MSTX_TYPE_NAMES = {
    0: "int8", 1: "int16", 2: "int32", 3: "fp16", 4: "fp32", 5: "int64", 6: "uint64", 7: "uint8", 8: "uint16",
    9: "uint32", 10: "fp64", 11: "bfp16",
}  # fmt: skip


def mstx_message(
    collective: Collective,
    comm_name: str,
    dtype: torch.dtype,
    count: int,
    stream_id: int,
    src_rank: int | None = None,
    dst_rank: int | None = None,
) -> str:
    """The message of the ``"communication"`` mstx range torch_npu's ProcessGroupHCCL opens around one HCCL
    call (``getMstxHcclMsg``, docs/torch_npu.md 5): a flat JSON object of strings whose quotes are written
    backslash-escaped, as torch_npu writes them: each key and value is enclosed in a backslash and a quote
    on both sides, pairs are joined by ``,`` and a key is followed by ``: ``.

    Keys: opName, groupName (the communicator's name, MSPTI's commName), srcRank (receives) or destRank
    (sends; the peer's rank in the group), dataType (``fp32``, ``bfp16``, ... or ``na``), count (elements)
    and streamId. ``count`` is the call's element count; for all-to-all-v pass the number of per-peer counts,
    as torch_npu does.
    """
    fields = {"opName": collective.mstx_op, "groupName": comm_name}
    if src_rank is not None:
        fields["srcRank"] = str(int(src_rank))
    if dst_rank is not None:
        fields["destRank"] = str(int(dst_rank))
    fields["dataType"] = _MSTX_TYPE_NAMES.get(_DATA_TYPES.get(dtype, -1), "na")
    fields["count"] = str(int(count))
    fields["streamId"] = str(int(stream_id))
    return "{" + ",".join(f'\\"{k}\\": \\"{v}\\"' for k, v in fields.items()) + "}"


@dataclasses.dataclass(frozen=True)
class LinkModel:
    """Device time of a collective: ``latency_us + traffic bytes / bandwidth``.

    bandwidth_gb_s: per-rank bandwidth in GB/s (1e9 bytes/s); the default 50 GB/s is of the order of one
        910B HCCS link (a model, not a measurement). latency_us: fixed cost per collective in µs.
    Traffic bytes = element size x count x :meth:`Collective.traffic` (ring algorithms: 2(n-1)/n of the
    message for all-reduce; (n-1) shards of ``count`` for all-gather / reduce-scatter / all-to-all;
    (n-1)/n of the ``count`` elements for all-to-all-v; the message once for broadcast, reduce and
    point-to-point).
    """

    bandwidth_gb_s: float = 50.0
    latency_us: float = 8.0

    def __post_init__(self) -> None:
        if not self.bandwidth_gb_s > 0:
            raise ValueError(f"bandwidth_gb_s must be > 0, got {self.bandwidth_gb_s!r}")
        if not self.latency_us >= 0:
            raise ValueError(f"latency_us must be >= 0, got {self.latency_us!r}")

    def duration_ns(self, collective: Collective, count: int, element_size: int, ranks: int) -> int:
        """Device duration in ns of ``collective`` moving ``count`` elements of ``element_size`` bytes."""
        wire_bytes = collective.traffic(ranks) * count * element_size
        return int(self.latency_us * 1000.0 + wire_bytes / self.bandwidth_gb_s)  # 1 GB/s = 1 byte/ns
