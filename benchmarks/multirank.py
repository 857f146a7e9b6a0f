#!/usr/bin/env python
"""Many ranks on one machine (Bmr): N simulated NPU ranks under torchrun, one DDP and one FSDP training
step profiled on every rank, then what the traces cost and what HTA makes of them.

    python benchmarks/multirank.py [--ranks 8] [--out DIR] [--json FILE] [--size 16] [--batch 8]

1. ``torchrun --standalone --nproc-per-node N`` runs this file with ``--worker`` (one process per rank).
   Each rank enables the simulated NPU (``torch_mspti.sim.enable``, direct launches), uses
   ``npu:<local rank>`` and the simulated ``hccl`` backend, wraps the demo's 2-layer MLP
   (``torch_mspti.sim.workloads``, ``--size`` wide) once in ``DistributedDataParallel`` (default group)
   and once in FSDP2 ``fully_shard`` (HSDP over a 2 x N/2 device mesh when N is even and >= 4: shard
   groups of N/2 ranks, replicate groups of 2; else a 1-d mesh), and profiles (CPU + PrivateUse1,
   ``schedule(wait=0, warmup=1, active=2)``, ``tensorboard_trace_handler(DIR/traces,
   worker_name="rank<r>")``) three steps: a warm-up step of both models, ``ProfilerStep#1`` = one DDP
   training step, ``ProfilerStep#2`` = one FSDP training step. So ``DIR/traces`` holds one trace per
   rank, each with torch's ``distributedInfo``, as the demo writes them. Each rank also writes
   ``DIR/result_rank<r>.json`` (its trace, or the traceback that stopped it).
   The simulated link's latency is ``--collective-latency-us`` (default 5 ms, not the simulator's
   8 µs): HTA's straggler metric only counts collectives that last at least 1 % of the mean
   iteration, and an iteration here lasts ~100 ms of host time (8 processes on 2 cores), while a
   simulated collective's device time holds only its transfer, never the wait for the slowest rank
   that a real HCCL collective's time includes.
2. Per rank: trace size in bytes, collective rows (device rows whose args have ``"Collective name"``)
   and trace bytes per collective row.
3. HTA (``torch_mspti.hta.trace_analysis``, needs ``pip install 'torch-mspti[hta]'``): the wall time of
   loading all N traces (``include_last_profiler_step=True``: HTA would otherwise drop the last step,
   the FSDP one), ``get_comm_comp_overlap``, ``get_potential_stragglers`` and each rank's
   ``critical_path_analysis`` (whole trace); total and per rank (total / N), and the analyses'
   results (overlap per rank, the ranks named as stragglers, the collectives' share of each rank's
   critical path).

Prints a table (rich) and, with ``--json``, writes the figures, the machine and the versions.
Exit 1 when a rank failed, a trace is missing or has no collective row, or HTA failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
MAX_RANKS = 16  # devices the simulated NPU gives one process (torch_mspti.sim.multirank.MAX_RANKS)
TRACE_SUBDIR = "traces"
COMM_BOUND = "gpu_communication_bound"  # HTA's critical-path class of collectives
# warm-up (not recorded), ProfilerStep#1, ProfilerStep#2
PLAN = (("ddp", "fsdp"), ("ddp",), ("fsdp",))


# ---------------------------------------------------------------- one rank (under torchrun)


def _mesh(world: int):
    from torch.distributed.device_mesh import init_device_mesh

    if world >= 4 and world % 2 == 0:  # HSDP: groups whose ranks are not 0..n-1
        return init_device_mesh("npu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
    return init_device_mesh("npu", (world,), mesh_dim_names=("shard",))


def _train_step(model, opt, batch) -> None:
    """One training step as torch_mspti.sim.workloads trains (forward, backward, optimizer ranges)."""
    from torch_mspti.sim.workloads import train_step

    train_step(model, opt, batch)


def worker(out: Path, size: int, batch: int, latency_us: float) -> None:
    import datetime
    import traceback

    import torch

    from torch_mspti import sim

    rank, world, local = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    sim.enable(device_count=max(2, world), launch_mode="direct")  # launches inside their ops: linked
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import profile, record_function, schedule, tensorboard_trace_handler

    from torch_mspti.sim import hccl, workloads

    hccl.set_link_model(latency_us=latency_us)
    torch.npu.set_device(local)
    device = f"npu:{local}"
    # a rank that fails alone must not hang the others for torch's default 30 minutes
    dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=300))
    result: dict[str, Any] = {"rank": rank, "world_size": world, "device": local}
    trace_dir = out / TRACE_SUBDIR
    try:
        torch.manual_seed(0)
        ddp = DistributedDataParallel(workloads._mlp_model(size).to(device), device_ids=[local])
        fsdp = workloads._mlp_model(size).to(device)
        mesh = _mesh(world)
        for layer in (fsdp[0], fsdp[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(fsdp, mesh=mesh)
        models = {name: (m, torch.optim.AdamW(m.parameters(), lr=1e-3)) for name, m in (("ddp", ddp), ("fsdp", fsdp))}
        torch.manual_seed(1000 + rank)
        batches = workloads._random_batches(batch, size, device)
        sched = schedule(wait=0, warmup=1, active=len(PLAN) - 1, repeat=1)
        handler = tensorboard_trace_handler(str(trace_dir), worker_name=f"rank{rank}")
        with profile(activities=workloads.ACTIVITIES, schedule=sched, on_trace_ready=handler) as prof:
            for names in PLAN:
                for name in names:
                    with record_function(name):
                        _train_step(*models[name], batches)
                prof.step()
        torch.npu.synchronize()
        traces = sorted(trace_dir.glob(f"rank{rank}.*.json"))
        result["trace"] = str(traces[-1]) if traces else None
        result["mesh"] = mesh.mesh.tolist()
    except Exception:
        result["error"] = traceback.format_exc()
    finally:
        (out / f"result_rank{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()


# ---------------------------------------------------------------- the driver


def log(msg: str) -> None:
    print(f"[multirank] {msg}", file=sys.stderr, flush=True)


def run_ranks(
    out: Path, ranks: int, size: int, batch: int, latency_us: float, timeout: float
) -> tuple[list[dict], float]:
    """torchrun of the workers; returns (their results, wall seconds). Raises RuntimeError when a rank
    wrote no result or an error."""
    for old in [*out.glob("result_rank*.json"), *(out / TRACE_SUBDIR).glob("*.json")]:
        old.unlink()  # one trace per rank in the directory: HTA reads all of it
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    cmd += [str(Path(__file__).resolve()), "--worker", "--out", str(out), "--size", str(size), "--batch", str(batch)]
    cmd += ["--collective-latency-us", str(latency_us)]
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1", OMP_NUM_THREADS="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    log("run: " + " ".join(cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=out)
    wall = time.perf_counter() - t0
    (out / "torchrun.log").write_text(proc.stdout + proc.stderr)
    results, problems = [], []
    for r in range(ranks):
        f = out / f"result_rank{r}.json"
        if not f.is_file():
            problems.append(f"rank {r} wrote no {f.name}")
            continue
        res = json.loads(f.read_text())
        if "error" in res:
            problems.append(f"rank {r} failed:\n{res['error']}")
        elif not res.get("trace"):
            problems.append(f"rank {r} wrote no trace into {out / TRACE_SUBDIR}")
        results.append(res)
    if problems or proc.returncode != 0:
        tail = (proc.stdout[-2000:] + proc.stderr[-4000:]).strip()
        raise RuntimeError("\n".join(problems or [f"torchrun exited {proc.returncode}"]) + f"\n--- torchrun:\n{tail}")
    return results, wall


def collective_rows(events: list[dict]) -> list[dict]:
    """Device rows with collective metadata (torch-mspti's HCCL/LCCL rows)."""
    return [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "kernel" and "Collective name" in (e.get("args") or {})
    ]


def trace_figures(results: list[dict]) -> list[dict]:
    rows = []
    for res in sorted(results, key=lambda r: r["rank"]):
        path = Path(res["trace"])
        data = json.loads(path.read_text())
        colls = collective_rows(data.get("traceEvents", []))
        size = path.stat().st_size
        rows.append(
            {
                "rank": res["rank"],
                "trace": str(path),
                "trace_bytes": size,
                "collective_rows": len(colls),
                "bytes_per_collective": size / len(colls) if colls else None,
                "kernel_rows": sum(1 for e in data.get("traceEvents", []) if e.get("cat") == "kernel"),
                "events": len(data.get("traceEvents", [])),
                "distributed": data.get("distributedInfo"),
            }
        )
    return rows


def hta_figures(trace_dir: Path, ranks: int) -> dict[str, Any]:
    """Wall time of HTA on all traces: load, then comm/comp overlap and straggler analysis."""
    import logging
    import warnings

    from torch_mspti.hta import trace_analysis

    logging.getLogger("hta").setLevel(logging.ERROR)  # HTA logs every file it parses on stdout

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # HTA 0.5's pandas idioms under pandas 2.3
        t0 = time.perf_counter()
        analysis = trace_analysis(trace_dir, include_last_profiler_step=True)
        t1 = time.perf_counter()
        overlap = analysis.get_comm_comp_overlap(visualize=False)
        t2 = time.perf_counter()
        stragglers = analysis.get_potential_stragglers(visualize=False)
        t3 = time.perf_counter()
        critical = {}
        for rank in range(ranks):  # the whole trace (annotation ""): both profiled steps
            graph, ok = analysis.critical_path_analysis(rank=rank, annotation="", instance_id=None)
            shares = graph.get_critical_path_breakdown().groupby("bound_by")["duration"].sum() if ok else None
            critical[rank] = None if shares is None else float(100 * shares.get(COMM_BOUND, 0) / shares.sum())
        t4 = time.perf_counter()
    pctg = {int(r): float(v) for r, v in zip(overlap["rank"], overlap["comp_comm_overlap_pctg"], strict=True)}
    return {
        "ranks_loaded": sorted(int(r) for r in analysis.t.get_all_traces()),
        "load_s": t1 - t0,
        "overlap_s": t2 - t1,
        "stragglers_s": t3 - t2,
        "critical_path_s": t4 - t3,
        "total_s": t4 - t0,
        "per_rank_s": (t4 - t0) / ranks,
        "comp_comm_overlap_pctg": pctg,
        "potential_stragglers": [int(r) for r in stragglers],
        "critical_path_communication_pctg": critical,
        "communication_names": len(analysis.npu.communication_names),
        "profiler_steps": [int(s) for s in analysis.get_profiler_steps()],
    }


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    hta = report.get("hta") or {}
    overlap = hta.get("comp_comm_overlap_pctg", {})
    critical = hta.get("critical_path_communication_pctg", {})
    t = Table(title=escape(f"{report['ranks']} ranks, one DDP + one FSDP step each (simulated NPU)"))
    columns = ("rank", "trace bytes", "collective rows", "bytes / collective", "kernel rows", "comm/comp overlap %")
    for col in (*columns, "critical path: comm %"):
        t.add_column(col, justify="right")
    for r in report["traces"]:
        per = r["bytes_per_collective"]
        ov = overlap.get(r["rank"], overlap.get(str(r["rank"])))
        cp = critical.get(r["rank"], critical.get(str(r["rank"])))
        t.add_row(
            str(r["rank"]),
            f"{r['trace_bytes']:,}",
            str(r["collective_rows"]),
            f"{per:,.0f}" if per else "-",
            str(r["kernel_rows"]),
            "-" if ov is None else f"{ov:.2f}",
            "-" if cp is None else f"{cp:.2f}",
        )
    tot = report["totals"]
    t.add_row(
        "all", f"{tot['trace_bytes']:,}", str(tot["collective_rows"]), f"{tot['bytes_per_collective']:,.0f}", "", "", ""
    )
    console = Console(width=160)
    console.print(t)
    console.print(f"torchrun ({report['ranks']} ranks, start to exit): {report['run_s']:.1f} s")
    if hta:
        console.print(
            f"HTA, all {report['ranks']} traces: {hta['total_s']:.2f} s (load {hta['load_s']:.2f} s, overlap "
            f"{hta['overlap_s']:.2f} s, stragglers {hta['stragglers_s']:.2f} s, critical paths "
            f"{hta['critical_path_s']:.2f} s) = {hta['per_rank_s']:.2f} s per rank; "
            f"potential stragglers: ranks {hta['potential_stragglers']}"
        )
    elif report.get("hta_error"):
        console.print(escape(f"HTA: {report['hta_error']}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8, help=f"processes (2..{MAX_RANKS}), one simulated NPU each")
    ap.add_argument("--out", default="build/multirank", help="directory for the traces and results")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--size", type=int, default=16, help="MLP width (Linear(size, 4*size), Linear(4*size, size))")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument(
        "--collective-latency-us",
        type=float,
        default=5000.0,
        help="latency of the simulated link (torch_mspti.sim.hccl.set_link_model): every collective lasts at "
        "least this long on the device, so that HTA's straggler metric counts it (see the module docstring)",
    )
    ap.add_argument("--timeout", type=float, default=600, help="seconds for the torchrun run")
    ap.add_argument("--no-hta", action="store_true", help="skip the HTA analysis")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # one rank, under torchrun
    a = ap.parse_args()
    out = Path(a.out).resolve()
    if a.worker:
        worker(out, a.size, a.batch, a.collective_latency_us)
        return 0
    if not 2 <= a.ranks <= MAX_RANKS or a.size < 1 or a.batch < 1:
        ap.error(f"--ranks must be in [2, {MAX_RANKS}], --size and --batch >= 1")
    (out / TRACE_SUBDIR).mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(BENCH_DIR))
    from _common import machine, versions

    at_start = machine()  # the load average before the run
    t_start = time.perf_counter()
    try:
        results, run_s = run_ranks(out, a.ranks, a.size, a.batch, a.collective_latency_us, a.timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        log(f"FAILED: {exc}")
        return 1
    traces = trace_figures(results)
    total_bytes = sum(r["trace_bytes"] for r in traces)
    total_colls = sum(r["collective_rows"] for r in traces)
    report: dict[str, Any] = {
        "benchmark": "multirank",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "ranks": a.ranks,
        "params": {
            "size": a.size,
            "batch": a.batch,
            "collective_latency_us": a.collective_latency_us,
            "plan": [list(p) for p in PLAN],
        },
        "trace_dir": str(out / TRACE_SUBDIR),
        "run_s": run_s,
        "traces": traces,
        "totals": {
            "trace_bytes": total_bytes,
            "collective_rows": total_colls,
            "bytes_per_collective": total_bytes / total_colls if total_colls else math.nan,
            "bytes_per_rank": total_bytes / a.ranks,
        },
    }
    ok = total_colls > 0 and all(r["collective_rows"] for r in traces)
    if not ok:
        log("FAILED: a trace has no collective row")
    if not a.no_hta:
        try:
            report["hta"] = hta_figures(out / TRACE_SUBDIR, a.ranks)
        except Exception as exc:  # HTA missing, or an analysis failed: reported, and the run fails
            report["hta_error"] = f"{type(exc).__name__}: {exc}"
            ok = False
    report["wall_s"] = time.perf_counter() - t_start
    print_table(report)
    if a.json:
        report["machine"] = at_start | {"loadavg_at_end": list(os.getloadavg())}
        report["versions"] = versions()
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(report, indent=1))
        log(f"wrote {a.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
