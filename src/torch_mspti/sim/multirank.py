"""``torch-mspti demo --workload ddp --ranks N``: one process per rank on this machine, then a per-rank summary.

The ranks are started with ``torch.multiprocessing.spawn`` and meet at a free localhost TCP port
(``init_method="tcp://127.0.0.1:<port>"``). Rank r uses device ``npu:r``: a simulated NPU of its own
process (``torch_mspti.sim.enable(device_count=max(2, N))``) or, with ``device="real"``, the r-th visible
Ascend device with torch_npu's own ``hccl``. Each rank runs :func:`torch_mspti.sim.workloads.ddp` and
writes ``<out stem>_rank<r><suffix>`` plus one TensorBoard trace in the shared trace directory.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any

__all__ = ["free_port", "rank_path", "summarize_rank_trace", "run_demo"]

MAX_RANKS = 16  # simulated devices per process (torch_mspti.sim.enable)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_path(out: str, rank: int) -> str:
    """``trace.json`` -> ``trace_rank1.json`` (rank 1's copy of its trace)."""
    p = Path(out)
    return str(p.with_name(f"{p.stem}_rank{rank}{p.suffix or '.json'}"))


def summarize_rank_trace(path: str) -> dict[str, Any]:
    """Counts from one rank's chrome trace: kernels (device rows of cat ``kernel``, collectives
    included), collectives (device rows named ``hcom_*``, HCCL's op names), linked rows (with an
    ``External id``), c10d ops on the host, and the trace's ``distributedInfo``."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    rows = [e for e in events if e.get("cat") == "kernel"]
    linked = [e for e in rows if "External id" in (e.get("args") or {})]
    comms = [e for e in rows if str(e.get("name", "")).startswith("hcom_")]
    host = [e for e in events if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("c10d::")]
    return {
        "kernels": len(rows) - len(comms),
        "collectives": len(comms),
        "collectives_linked": sum(1 for e in comms if "External id" in (e.get("args") or {})),
        "c10d_ops": len(host),
        "linked_ratio": len(linked) / len(rows) if rows else 0.0,
        "distributed": data.get("distributedInfo") if isinstance(data, dict) else None,
    }


def _rank_main(
    rank: int,
    ranks: int,
    port: int,
    device: str,
    launch_mode: str,
    size: int,
    steps: int,
    out: str,
    trace_dir: str,
) -> None:
    import torch

    if device == "real":
        import torch_npu  # noqa: F401  (registers torch.npu and its hccl backend)
    else:
        from torch_mspti import sim

        sim.enable(device_count=max(2, ranks), launch_mode=launch_mode)
    import torch.distributed as dist

    from . import workloads

    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=ranks, init_method=f"tcp://127.0.0.1:{port}")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
            workloads.ddp(size=size, out=rank_path(out, rank), steps=steps, device=f"npu:{rank}", trace_dir=trace_dir)
    finally:
        dist.destroy_process_group()


def run_demo(
    ranks: int = 2,
    steps: int | None = None,
    size: int | None = None,
    out: str = "trace.json",
    device: str = "sim",
    launch_mode: str = "direct",
) -> int:
    """Run the ddp workload on ``ranks`` processes and print one summary line per rank.

    ``device``: ``"sim"`` (each rank its own simulated NPU) or ``"real"`` (torch_npu, one Ascend
    device per rank). Returns a process exit code: 0 success, 1 a rank failed, 2 bad arguments.
    """
    import torch.multiprocessing as mp

    from . import workloads

    if not 1 <= int(ranks) <= MAX_RANKS:
        print(f"torch-mspti demo: --ranks must be in [1, {MAX_RANKS}], got {ranks}", file=sys.stderr)
        return 2
    d_size, d_steps = workloads.DEFAULTS["ddp"]
    size = d_size if size is None else int(size)
    steps = d_steps if steps is None else int(steps)
    if steps < 1:
        print(f"torch-mspti demo: --steps must be >= 1, got {steps}", file=sys.stderr)
        return 2
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    trace_dir = os.fspath(Path(out).with_suffix("")) + "_tb"
    for old in Path(trace_dir).glob("rank*.json") if Path(trace_dir).is_dir() else ():
        old.unlink()  # one trace per rank in the directory (HTA reads the whole directory)
    if device == "sim":
        print(
            f"torch-mspti demo: SIMULATED NPU, {ranks} rank(s), one process and one simulated device per rank "
            f"(launch mode {launch_mode}); collectives move data through gloo on host memory and their device "
            "time is a bandwidth model."
        )
    else:
        print(f"torch-mspti demo: real Ascend NPUs (torch_npu, backend hccl), {ranks} rank(s)")
    print(f"running workload 'ddp' (size {size}, steps {steps}) on {ranks} rank(s) ...", flush=True)
    t0 = time.perf_counter()
    args = (ranks, free_port(), device, launch_mode, size, steps, out, trace_dir)
    try:
        mp.spawn(_rank_main, args=args, nprocs=ranks, join=True)
    except Exception as exc:  # a rank raised or died: its traceback is on stderr already
        first = str(exc).strip().splitlines()
        print(f"torch-mspti demo: workload 'ddp' failed: {first[0] if first else type(exc).__name__}", file=sys.stderr)
        return 1
    print(f"done in {time.perf_counter() - t0:.1f} s")
    failed = False
    for r in range(ranks):
        path = rank_path(out, r)
        try:
            s = summarize_rank_trace(path)
        except (OSError, ValueError) as exc:
            print(f"torch-mspti demo: could not read rank {r}'s trace {path}: {exc}", file=sys.stderr)
            failed = True
            continue
        info = s["distributed"] or {}
        print(
            f"  rank {r}  kernels {s['kernels']}, collectives {s['collectives']} "
            f"({s['collectives_linked']} linked; {s['c10d_ops']} c10d ops), linked {s['linked_ratio']:.0%}, "
            f"backend {info.get('backend', '?')} world {info.get('world_size', '?')}"
        )
        print(f"          {os.path.abspath(path)}")
    print(f"per-rank traces (TensorBoard, HTA): {os.path.abspath(trace_dir)}/")
    return 1 if failed else 0
