"""Synthetic per-rank NPU traces in the format torch-mspti emits (README.md, "Trace format"; docs/multi-rank.md), for
the HTA adapter tests until the plugin writes collective rows itself.

Each rank's trace has ``steps`` profiler steps of ``STEP_US`` µs. In every step the host thread runs
ops that launch (``privateuse1_runtime`` rows, with an ac2g flow to their device rows) a memcpy, a
memset (launched from a task-queue thread, so it has no External id), three compute kernels on the
compute stream and one all-reduce on the communication stream. The device rows of one step
(offsets in µs from the step start) are ``LAYOUT`` plus the all-reduce (``comm_row``): it lasts
``COMM_US`` and ends at ``COMM_END - COMM_US * overlap``, so it overlaps the computation on
[100, 400) (MatMulV2, Add) by exactly ``overlap`` × ``COMM_US`` and nothing else (0 <= overlap <= 1;
the next kernel starts at 700). ``overlap`` is given per rank: the expected communication/
computation overlap of rank r is ``overlaps[r]``.
All times are whole µs (HTA rounds fractional ones), names are as MSPTI gives them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

STEP_US = 1000
COMPUTE_STREAM = 2
COMM_STREAM = 3
COMM_US = 200
COMM_END = 600  # where the all-reduce ends with overlap 0 (it then starts when "Add" ends)
COMM_PREFIX = "hcom_allReduce__428_"  # HCCL numbers its ops: the k-th all-reduce is ..._<k>_1
BASE_US = 5_258_659_000_000
BASE_NS = 1_790_857_026_000_000_000


@dataclass(frozen=True)
class DeviceRow:
    cat: str  # kernel | gpu_memcpy | gpu_memset
    name: str
    stream: int
    start: int  # µs from the step start
    end: int
    launch: str  # MSPTI API record name of the launch
    launch_at: tuple[int, int]  # launch event [start, end), µs from the step start
    queued: bool = False  # launched by a task-queue thread (no op owns it) rather than inside an op


# Device rows of one step, except the all-reduce (see comm_row). Kind of each: MEMORY, COMPUTATION.
LAYOUT = (
    DeviceRow("gpu_memcpy", "Memcpy HtoD (Host -> Device)", COMPUTE_STREAM, 10, 60, "aclrtMemcpyAsync", (3, 8)),
    DeviceRow("gpu_memset", "Memset (Device)", COMPUTE_STREAM, 60, 80, "aclrtMemsetAsync", (11, 13), queued=True),
    DeviceRow("kernel", "MatMulV2", COMPUTE_STREAM, 100, 300, "LaunchKernelV2", (25, 35)),
    DeviceRow("kernel", "Add", COMPUTE_STREAM, 300, 400, "LaunchKernelV2", (42, 48)),
    DeviceRow("kernel", "MatMulV2", COMPUTE_STREAM, 700, 800, "LaunchKernelV2", (85, 95)),
)
# Host ops (name, [start, end) µs from the step start), outer ops first; a launch belongs to the
# innermost op enclosing it.
HOST_OPS = (
    ("aten::copy_", 2, 9),
    ("aten::mm", 20, 40),
    ("aten::add", 40, 50),
    ("c10d::allreduce_", 50, 80),
    ("record_param_comms", 52, 78),
    ("aten::mm", 80, 100),
)
NELEMS = 1 << 20


def comm_row(overlap: float, step: int) -> DeviceRow:
    """The all-reduce of profiler step ``step`` (0-based)."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap must be within [0, 1], got {overlap}")
    start = COMM_END - round(COMM_US * (1 + overlap))
    name = f"{COMM_PREFIX}{step}_1"
    return DeviceRow("kernel", name, COMM_STREAM, start, start + COMM_US, "HcclAllReduce", (55, 75))


def is_comm(row: DeviceRow) -> bool:
    return row.name.startswith(COMM_PREFIX)


def step_rows(overlap: float, step: int) -> list[DeviceRow]:
    return sorted([*LAYOUT, comm_row(overlap, step)], key=lambda r: r.start)


def _meta(pid, tid, name, value) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": BASE_US, "args": value}


def _slice(cat, name, pid, tid, ts, end, args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": end - ts, "args": args}


def _flow(ph, corr, pid, tid, ts) -> dict:
    return {"ph": ph, "id": corr, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"} | (
        {"bp": "e"} if ph == "f" else {}
    )


def _device_args(row: DeviceRow, dev: int, corr: int, op_id: int | None, world_size: int) -> dict:
    args = {"device": dev, "stream": row.stream, "correlation": corr} | ({"External id": op_id} if op_id else {})
    nbytes = 4 * NELEMS
    if is_comm(row):
        args |= {"Collective name": "allreduce", "algorithm": "RING", "In msg nelems": NELEMS}
        args |= {"Out msg nelems": NELEMS, "dtype": "Float", "bytes": nbytes, "Process Group Name": "0"}
        args |= {"Process Group Ranks": str(list(range(world_size))), "Group size": world_size}
    elif row.cat == "kernel":
        args["type"] = "KERNEL_AICORE"
    else:
        args |= {"bytes": nbytes, "memory bandwidth (GB/s)": nbytes / ((row.end - row.start) * 1e3)}
        if row.cat == "gpu_memcpy":
            args["copy kind"] = "HtoD"
    return args


def rank_trace(rank: int, world_size: int, steps: int, overlap: float) -> dict:
    """The Chrome trace (a dict) of one rank: see the module docstring."""
    pid, tid, queue_tid, dev = 4000 + rank, 4000 + rank, 4100 + rank, rank
    ev = [
        _meta(dev, 0, "process_name", {"name": f"NPU {dev}"}),
        _meta(dev, 0, "process_labels", {"labels": f"NPU {dev}"}),
    ]
    ev += [_meta(dev, 0, "process_sort_index", {"sort_index": 5000000 + dev})]
    ev += [_meta(dev, s, "thread_name", {"name": f"stream {s}"}) for s in (COMPUTE_STREAM, COMM_STREAM)]
    ev += [_meta(pid, queue_tid, "thread_name", {"name": f"NPU launch thread {queue_tid}"})]
    external = iter(range(1, 1 << 30))
    correlation = iter(range(1 << 30, 1 << 31))
    for step in range(steps):
        t0 = BASE_US + rank * 7 + step * STEP_US  # ranks start a few µs apart, as real ones do
        step_args = {"External id": next(external)}
        ev.append(_slice("user_annotation", f"ProfilerStep#{step + 1}", pid, tid, t0, t0 + STEP_US - 1, step_args))
        ops = []  # (start, end, External id)
        for name, start, end in HOST_OPS:
            ops.append((start, end, next(external)))
            ev.append(_slice("cpu_op", name, pid, tid, t0 + start, t0 + end, {"External id": ops[-1][2]}))
        for row in step_rows(overlap, step):
            corr, (ls, le) = next(correlation), row.launch_at
            owners = [] if row.queued else [e for s, t, e in ops if s <= ls and le <= t]
            assert row.queued or owners, f"launch of {row.name} at {row.launch_at} is in no op"
            op_id, host_tid = (owners[-1], tid) if owners else (None, queue_tid)
            launch_args = {"correlation": corr} | ({"External id": op_id} if op_id else {})
            ev.append(_slice("privateuse1_runtime", row.launch, pid, host_tid, t0 + ls, t0 + le, launch_args))
            ev.append(_flow("s", corr, pid, host_tid, t0 + ls))
            args = _device_args(row, dev, corr, op_id, world_size)
            ev.append(_slice(row.cat, row.name, dev, row.stream, t0 + row.start, t0 + row.end, args))
            ev.append(_flow("f", corr, dev, row.stream, t0 + row.start))
        # A record_function range on the device lane (kineto's GPU_USER_ANNOTATION): no stream arg.
        forward = {"External id": ops[1][2]}
        ev.append(_slice("gpu_user_annotation", "forward", dev, COMPUTE_STREAM, t0 + 100, t0 + 800, forward))
    end = BASE_US + steps * STEP_US + 10
    ev.append(_slice("Trace", "PyTorch Profiler (0)", "Spans", "PyTorch Profiler", BASE_US - 5, end, {"Op count": 0}))
    ev.append({"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "ts": BASE_US - 5})
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": dev, "name": "Ascend910B (simulated)", "totalGlobalMem": 64 << 30}],
        "distributedInfo": {"backend": "hccl", "rank": rank, "world_size": world_size},
        "torch_mspti": {"enabled_kinds": ["KERNEL", "COMMUNICATION", "MEMCPY", "MEMSET"], "dropped": {}},
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": ev,
        "traceName": f"rank{rank}.pt.trace.json",
    }


def write_traces(directory: Path, overlaps: tuple[float, ...] = (0.5, 0.25), steps: int = 3) -> list[Path]:
    """Writes one trace per rank (``len(overlaps)`` ranks) as ``rank<r>.pt.trace.json`` in ``directory``."""
    paths = []
    for rank, overlap in enumerate(overlaps):
        path = Path(directory) / f"rank{rank}.pt.trace.json"
        path.write_text(json.dumps(rank_trace(rank, len(overlaps), steps, overlap)))
        paths.append(path)
    return paths


def require_hta() -> None:
    """Skip the calling test without HolisticTraceAnalysis (the ``hta`` extra); fail instead under
    TORCH_MSPTI_REQUIRE_HTA=1 (CI's ``hta_tests`` stage, where a skip would hide the tests)."""
    import os

    import pytest

    try:
        import hta.trace_analysis  # noqa: F401
    except ImportError as exc:
        if os.environ.get("TORCH_MSPTI_REQUIRE_HTA") == "1":
            pytest.fail(f"TORCH_MSPTI_REQUIRE_HTA=1 but HolisticTraceAnalysis is not importable: {exc}")
        pytest.skip(f"HolisticTraceAnalysis not installed (pip install '.[hta]'): {exc}")
