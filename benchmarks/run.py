#!/usr/bin/env python
"""torch-mspti benchmark runner: one command for every figure of benchmarks/README.md.

    python benchmarks/run.py [--smoke] [--json out.json] [--build-dir DIR] [--only B1a,B2,...,B5,B2real]

Builds the C++ benchmarks (benchmarks/cpp, CMake option TORCH_MSPTI_BENCHMARKS) into
--build-dir (default build/bench; configured there when needed, otherwise brought up to date),
runs every benchmark (C++ ones as `torch_mspti_bench <name>`, Python ones in a fresh interpreter
each), prints a table and writes the JSON report: machine, versions, parameters, and for every
figure its median, spread (relative IQR, min, max) and raw samples.

Every comparing figure is a ratio of two arms interleaved within one process. Every benchmark
checks that every launched kernel was collected; a benchmark that lost data fails the run
(exit 1) whatever its speed. Targets are reported (PASS/MISS), not enforced, unless --strict.
--smoke: tiny sizes and few repeats, to keep the benchmarks working in CI (the figures are then
not meaningful).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH_DIR, REPO, machine, ratio_summary, summarize, versions

FULL = {
    "pushpop": ["--iters=2000000", "--reps=15"],
    "drain": ["--sizes=1000,10000,100000", "--reps=5"],
    "process": ["--sizes=100000,1000000", "--reps=6"],
    "walk": ["--reps=21", "--names=16,256"],
    "overhead": ["--ops", "5000", "--reps", "15"],
    "trace_processing": ["--n", "100000", "--reps", "3"],
    "cli_startup": ["--reps", "15", "--ops", "1000"],
    "end_to_end": ["--n", "1000000", "--ranks", "8", "--rank-n", "100000", "--reps", "1"],
    "real_mspti": ["--sizes=50,1000", "--delays=0,200", "--runs=20", "--launches=20000", "--launch-repeats=7"],
}
SMOKE = {
    "pushpop": ["--iters=50000", "--reps=3", "--launches=2000"],
    "drain": ["--sizes=200,2000", "--reps=1"],
    "process": ["--sizes=5000", "--reps=2"],
    "walk": ["--reps=3", "--names=16,256", "--bytes=1048576"],
    "overhead": ["--ops", "300", "--reps", "2"],
    "trace_processing": ["--n", "500", "--reps", "1"],
    "cli_startup": ["--reps", "2", "--ops", "100"],
    "end_to_end": ["--n", "2000", "--ranks", "2", "--rank-n", "500", "--reps", "1"],
    "real_mspti": [
        "--sizes=20",
        "--delays=0,200",
        "--runs=2",
        "--arms=plugin,seed",
        "--launches=500",
        "--launch-repeats=2",
    ],
}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- build


def build(build_dir: Path) -> Path:
    """Configures (if needed) and builds the benchmark targets; returns benchmarks/cpp's output dir."""
    cache = build_dir / "CMakeCache.txt"
    cache_text = cache.read_text() if cache.exists() else ""
    if "TORCH_MSPTI_BENCHMARKS:BOOL=ON" not in cache_text:
        cmd = [
            "cmake",
            "-S",
            str(REPO),
            "-B",
            str(build_dir),
            "-DTORCH_MSPTI_BENCHMARKS=ON",
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
        if not cache_text:  # a fresh tree: Release, no Python module
            cmd += ["-DCMAKE_BUILD_TYPE=Release", "-DTORCH_MSPTI_PYTHON=OFF"]
            if shutil.which("ninja"):
                cmd += ["-G", "Ninja"]
        log("configure: " + " ".join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    cmd = ["cmake", "--build", str(build_dir), "--target", "torch_mspti_benchmarks", "--parallel", jobs]
    log("build: " + " ".join(cmd))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return build_dir / "benchmarks" / "cpp"


# ---------------------------------------------------------------- running


def run_cpp(bin_dir: Path, name: str, args: list[str]) -> dict[str, Any]:
    cmd = [str(bin_dir / "torch_mspti_bench"), name, *args]
    log("run: " + " ".join(cmd))
    res = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    data = json.loads(lines[-1]) if lines else {"ok": False}
    data["exit_code"] = res.returncode
    data["command"] = " ".join(cmd)
    if res.returncode != 0:
        data["ok"] = False
        data["stderr"] = res.stderr[-4000:]
    return data


def run_py(module: str, args: list[str]) -> dict[str, Any]:
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"tm_bench_{module}_{os.getpid()}.json"
    cmd = [sys.executable, str(BENCH_DIR / f"{module}.py"), *args, "--json", str(out)]
    log("run: " + " ".join(cmd))
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode == 0 and out.exists():
        data = json.loads(out.read_text())
        out.unlink()
    else:
        data = {"ok": False, "stderr": res.stderr[-4000:]}
    data["exit_code"] = res.returncode
    data["command"] = " ".join(cmd[:-2])
    return data


# ---------------------------------------------------------------- figures


class Figures:
    """Rows of the summary table: one figure each, with its target and verdict."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        bench: str,
        figure: str,
        stats: dict[str, Any] | None,
        unit: str,
        target: str,
        passed: bool | None,
        note: str = "",
    ) -> None:
        self.rows.append(
            {
                "bench": bench,
                "figure": figure,
                "unit": unit,
                "target": target,
                "median": stats.get("median") if stats else None,
                "rel_iqr": stats.get("rel_iqr") if stats else None,
                "min": stats.get("min") if stats else None,
                "max": stats.get("max") if stats else None,
                "verdict": "n/a" if passed is None else ("PASS" if passed else "MISS"),
                "note": note,
            }
        )

    def fail(self, bench: str, why: str) -> None:
        self.rows.append(
            {
                "bench": bench,
                "figure": "benchmark failed",
                "unit": "",
                "target": "complete",
                "median": None,
                "rel_iqr": None,
                "min": None,
                "max": None,
                "verdict": "FAIL",
                "note": why,
            }
        )


def le(stats: dict[str, Any], limit: float) -> bool:
    return stats["median"] is not None and stats["median"] <= limit


def ge(stats: dict[str, Any], limit: float) -> bool:
    return stats["median"] is not None and stats["median"] >= limit


def fig_pushpop(d: dict[str, Any], f: Figures) -> None:
    arms = {k: summarize(v) for k, v in d["arms"].items()}
    share = summarize([p - c for p, c in zip(d["arms"]["plugin_noop"], d["arms"]["direct_noop"], strict=False)])
    iters = d["params"]["iters"]
    per_op = {kind: {k: max(v) / iters for k, v in d[kind].items()} for kind in ("heap_calls", "lock_calls")}
    d["summary"] = {"arms": arms, "plugin_share": share, "calls_per_op_max": per_op}
    call = arms["direct_noop"]["median"]
    f.add(
        "B1a",
        "push+pop per op, plugin -> no-op MSPTI",
        arms["plugin_noop"],
        "ns/op",
        "<= 50",
        le(arms["plugin_noop"], 50),
        f"of which the no-op call alone {call:.1f} ns; disarmed {arms['disarmed']['median']:.1f} ns",
    )
    f.add(
        "B1a",
        "  plugin share (plugin -> no-op MSPTI minus the call alone, per round)",
        share,
        "ns/op",
        "<= 50",
        le(share, 50),
    )
    first = d["first_session"]
    f.add(
        "B1a",
        "  heap calls per op, steady state (max over rounds)",
        {"median": per_op["heap_calls"]["plugin_noop"]},
        "calls/op",
        "0",
        per_op["heap_calls"]["plugin_noop"] == 0,
        f"first session on the thread: {first['heap_calls']:.0f} calls for {iters:,} ops "
        f"(op log grows by {d['params']['log_chunk_ids']:,} ids per chunk), {first['ns_per_op']:.1f} ns/op",
    )
    f.add(
        "B1a",
        "  lock calls per op, steady state (max over rounds)",
        {"median": per_op["lock_calls"]["plugin_noop"]},
        "calls/op",
        "0",
        per_op["lock_calls"]["plugin_noop"] == 0,
        f"probe check: the simulator's locked stack shows {per_op['lock_calls']['plugin_sim']:.0f} per op",
    )
    f.add(
        "B1c",
        "push+pop per op, plugin -> simulator (locked stack)",
        arms["plugin_sim"],
        "ns/op",
        "report",
        None,
        f"simulator alone {arms['direct_sim']['median']:.1f} ns",
    )
    base = arms["launch_kernel_only"]["median"]
    for key, label, links in (
        ("launch_kernel_only", "KERNEL (bare consumer)", "no link evidence"),
        ("launch_kernel_pushpop", "KERNEL, inside push/pop", "no link evidence"),
        ("launch_hints", "+ EXTERNAL_CORRELATION", "hints only: unverified"),
        ("launch_calls", "KERNEL + RUNTIME_API, inside push/pop", "launch times only: recovered"),
        ("launch_plugin_kinds", "KERNEL + EXTERNAL_CORRELATION + RUNTIME_API (the plugin's)", "verified"),
    ):
        if key not in arms:
            continue
        f.add(
            "B1c",
            f"MSPTI(sim) per launch, {label}",
            arms[key],
            "ns/launch",
            "report",
            None,
            f"+{arms[key]['median'] - base:.0f} ns over KERNEL only; links: {links}",
        )
    d["summary"]["mspti_share_ns_per_launch"] = arms["launch_plugin_kinds"]["median"] - base


def fig_drain(d: dict[str, Any], f: Figures) -> None:
    d["summary"] = {}
    for variant, sizes in d["variants"].items():
        for n, a in sizes.items():
            sp, sb = summarize(a["plugin_stop_ms"]), summarize(a["baseline_stop_ms"])
            ratio = ratio_summary(a["plugin_stop_ms"], a["baseline_stop_ms"])
            lostp, lostb = max(a["plugin_lost"]), max(a["baseline_lost"])
            d["summary"][f"{variant}/{n}"] = {
                "plugin_stop_ms": sp,
                "baseline_stop_ms": sb,
                "ratio": ratio,
                "plugin_lost_max": lostp,
                "baseline_lost_max": lostb,
            }
            label = f"{variant}, {int(n):,} kernels"
            if variant == "pull":
                fl = summarize(a.get("floor_stop_ms", []))
                d["summary"][f"{variant}/{n}"]["floor_stop_ms"] = fl
                floor_note = f"; floor {fl['median']:.0f} ms" if fl["median"] is not None else ""
                # the floor waits for the reader to parse what the pull brought, as the plugin must:
                # the plugin may add its poll interval (5 ms) to it
                bound = (fl["median"] or 0) + 5
                f.add(
                    "B2",
                    f"stop() ms, {label}",
                    sp,
                    "ms",
                    f"<= floor + 5 ({bound:.0f})",
                    le(sp, bound),
                    f"lost {lostp}; baseline {sb['median']:.0f} ms, lost {lostb}{floor_note}",
                )
                f.add("B2", f"stop / baseline, {label}", ratio, "x", "<= 0.5", le(ratio, 0.5))
            elif variant == "nopull_isenabled":
                # the drain waits for every late record, so its floor is the delivery delay; the
                # rule allows it two poll intervals more ("stop <= delay + 2 poll intervals")
                bound = d["params"]["delivery_delay_ms"] + 2 * d["params"].get("poll_interval_ms", 5)
                f.add(
                    "B2",
                    f"stop() ms, {label} (disable_first)",
                    sp,
                    "ms",
                    f"<= delay + 2 polls ({bound:g})",
                    le(sp, bound),
                    f"lost {lostp}; baseline {sb['median']:.0f} ms, lost {lostb} of {int(n):,}",
                )
            else:
                f.add(
                    "B2",
                    f"stop() ms, {label}",
                    sp,
                    "ms",
                    "floor = delivery delay",
                    None,
                    f"lost {lostp}; baseline {sb['median']:.0f} ms, lost {lostb} of {int(n):,}",
                )
            f.add("B2", f"records lost, {label}", {"median": float(lostp)}, "records", "0", lostp == 0)


def fig_process(d: dict[str, Any], f: Figures) -> None:
    d["summary"] = {}
    for n, a in d["sizes"].items():
        n_ = int(n)
        rate = summarize([n_ / s for s in a["seconds"]])
        prep = summarize([n_ / s for s in a["prepare_seconds"]])
        both = summarize([n_ / (s + p) for s, p in zip(a["seconds"], a["prepare_seconds"], strict=False)])
        floor = summarize([n_ / s for s in a["floor_seconds"]])
        over = ratio_summary(a["seconds"], a["floor_seconds"])
        parts = {k: a[k] / n_ for k in ("store_bytes", "table_bytes", "log_bytes", "transient_peak_bytes")}
        ours = sum(parts.values())
        d["summary"][n] = {
            "kernels_per_s": rate,
            "prepare_kernels_per_s": prep,
            "prepare_and_process_kernels_per_s": both,
            "floor_kernels_per_s": floor,
            "time_over_floor": over,
            **{f"{k}_per_kernel": v for k, v in parts.items()},
            "kineto_activity_bytes_per_kernel": a["activity_bytes"] / n_,
        }
        f.add(
            "B3",
            f"processTrace kernels/s, {n_:,} kernels",
            rate,
            "kernels/s",
            ">= 1e6",
            ge(rate, 1e6),
            f"kineto floor {floor['median']:.3g}/s; ours/floor {over['median']:.2f}x",
        )
        f.add(
            "B3",
            f"  stop()'s launch table, {n_:,} kernels",
            prep,
            "kernels/s",
            "report",
            None,
            f"with processTrace: {both['median']:.3g} kernels/s",
        )
        f.add(
            "B3",
            f"our bytes per kernel, {n_:,} kernels",
            {"median": ours},
            "B/kernel",
            "<= 300",
            ours <= 300,
            f"store {parts['store_bytes']:.0f} + launch table {parts['table_bytes']:.0f} + op log "
            f"{parts['log_bytes']:.0f} + transient {parts['transient_peak_bytes']:.0f}; "
            f"peak in stop() {a.get('stop_peak_bytes', float('nan')) / n_:.0f}; "
            f"kineto's activities {a['activity_bytes'] / n_:.0f}",
        )


def fig_walk(d: dict[str, Any], f: Figures) -> None:
    d["summary"] = {}
    for names, a in d["names"].items():
        s = {k: summarize(a[k]) for k in ("fresh", "reused", "append")}
        d["summary"][names] = s
        mib = d["params"]["bytes"] / (1 << 20)
        f.add(
            "B4",
            f"walk {mib:g} MiB buffer, {names} names",
            s["fresh"],
            "records/s",
            ">= 2e7",
            ge(s["fresh"], 2e7),
            f"reused walker {s['reused']['median']:.3g}/s; walk+append {s['append']['median']:.3g}/s",
        )


def fig_overhead(d: dict[str, Any], f: Figures) -> None:
    r = d["ratio"]
    f.add(
        "B1b",
        "small ops, CPU+PrivateUse1 / CPU-only(+bare consumer), thread CPU time",
        r,
        "x",
        "<= 1.05",
        le(r, 1.05),
        f"{d['plugin_us_per_op']['median']:.2f} vs {d['cpu_only_us_per_op']['median']:.2f} us/op",
    )
    f.add("B1b", "  same, wall time", d["wall_ratio"], "x", "report", None)
    f.add(
        "B1b",
        "  of which torch+kineto PrivateUse1 mode (idle plugin / CPU-only)",
        d["ratio_pu1_idle_vs_cpu_only"],
        "x",
        "report",
        None,
    )
    f.add(
        "B1b",
        "  of which the plugin's collection (plugin / idle plugin)",
        d["ratio_plugin_vs_pu1_idle"],
        "x",
        "report",
        None,
    )


def fig_trace(d: dict[str, Any], f: Figures) -> None:
    n = d["params"]["n"]
    for phase in ("exit", "events", "export"):
        p = d["per_unit_us"][phase]
        target = "<= 2 (per-op)" if phase == "exit" else "report"
        f.add(
            "B3py",
            f"{phase}: added us per kernel / torch us per op, n={n:,}",
            p["ratio"],
            "x",
            target,
            le(p["ratio"], 2.0) if phase == "exit" else None,
            f"{p['plugin_per_kernel']['median']:.2f} vs {p['torch_per_op']['median']:.2f} us",
        )
        if phase == "exit" and "exit_split_us" in d:
            split = d["exit_split_us"]
            f.add(
                "B3py",
                "  of which our stop() + processTrace / torch us per op",
                split["ours_ratio"],
                "x",
                "report",
                None,
                f"{split['ours_per_kernel']['median']:.2f} us per kernel (the session's timings)",
            )
            f.add(
                "B3py",
                "  of which torch + kineto on our activities / torch us per op",
                split["torch_kineto_ratio"],
                "x",
                "report",
                None,
                f"{split['torch_kineto_per_kernel']['median']:.2f} us per kernel: the ratio at zero plugin cost",
            )


def fig_cli(d: dict[str, Any], f: Figures) -> None:
    target = d["target_s"]
    for name, stats in d["commands"].items():
        reference = "import torch" in name
        f.add(
            "Bcli",
            f"`{name}` wall time, fresh process",
            stats,
            "s",
            "report" if reference else f"<= {target}",
            None if reference else le(stats, target),
            "what the CLI commands avoid" if reference else "torch not imported",
        )


def fig_end_to_end(d: dict[str, Any], f: Figures) -> None:
    single = d["single"]
    n, s = single["n"], single["summary"]
    ph = s["phases"]

    def vs_cpu(row: dict[str, Any]) -> str:
        if "cpu_only" not in row:
            return f"{row['plugin_us_per_kernel']['median']:.2f} us/kernel; no cpu_only counterpart"
        return (
            f"cpu_only {row['cpu_only']['median']:.3g} s: {row['ratio']['median']:.2f}x, "
            f"{row['added_us_per_kernel']['median']:+.2f} us/kernel"
        )

    for key, label in (
        ("stop_to_plain_s", "stop() to plain trace on disk"),
        ("stop_to_gzip_s", "stop() to gzip trace on disk"),
    ):
        f.add("B5", f"{label}, {n:,} kernels", ph[key]["plugin"], "s", "report", None, vs_cpu(ph[key]))
    for key, label in (
        ("exit_s", "torch __exit__ (whole)"),
        ("stop_s", "our stop()"),
        ("process_trace_s", "our processTrace"),
        ("exit_rest_s", "rest of the exit: torch + kineto (vs the cpu_only exit)"),
        ("export_plain_s", "export_chrome_trace .json"),
        ("export_gzip_s", "export_chrome_trace .json.gz"),
    ):
        f.add("B5", f"  {label}", ph[key]["plugin"], "s", "report", None, vs_cpu(ph[key]))
    rss, b = s["peak_rss_bytes"], s["trace_bytes_per_kernel"]
    f.add(
        "B5",
        f"  peak RSS, plugin arm, {n:,} kernels",
        {"median": rss["plugin"]["median"] / 2**30},
        "GiB",
        "report",
        None,
        f"cpu_only {rss['cpu_only']['median'] / 2**30:.2f} GiB; plugin extra {rss['plugin_extra_per_kernel']:.0f} B/kernel",
    )
    f.add(
        "B5",
        "  trace bytes per kernel, plain",
        {"median": b["plugin_plain"]},
        "B/kernel",
        "report",
        None,
        f"gzip {b['plugin_gzip']:.0f} B/kernel; cpu_only {b['cpu_only_plain_per_op']:.0f} / {b['cpu_only_gzip_per_op']:.0f} B per op",
    )
    mr = d.get("ranks") or {}
    if mr.get("summary"):
        ms, r, rn = mr["summary"], mr["ranks"], mr["n"]
        for key, label in (("first_stop_to_last_plain", "plain"), ("first_stop_to_last_gzip", "gzip")):
            w = ms["wall_s"][key]
            f.add(
                "B5",
                f"{r} ranks x {rn:,}: first stop() to the last {label} trace on disk",
                {"median": w["plugin"]},
                "s",
                "report",
                None,
                f"cpu_only {w['cpu_only']:.3g} s ({w['ratio']:.2f}x); spawn to last {label}: "
                f"{ms['wall_s'][key.replace('first_stop', 'spawn')]['plugin']:.3g} s",
            )
        ex = ms["phases"]["exit_s"]
        tb, rss_r = ms["total_trace_bytes"], ms["max_peak_rss_bytes"]
        f.add(
            "B5",
            "  per-rank torch __exit__ (median; max in note)",
            {"median": ex["plugin_median"]},
            "s",
            "report",
            None,
            f"max {ex['plugin_max']:.3g} s; cpu_only median {ex['cpu_only_median']:.3g} s; total trace bytes "
            f"{tb['plugin_plain']:,} plain / {tb['plugin_gzip']:,} gzip; max peak RSS {rss_r['plugin'] / 2**30:.2f} GiB",
        )


def fig_real_mspti(d: dict[str, Any], f: Figures) -> None:
    """B2real and B1c-real (real_mspti.py): the real libmspti.so over the fixture's fake CANN layer."""
    if d.get("skipped"):
        f.add("B2real", "skipped", None, "", "report", None, d["skipped"])
        return
    launch = d.get("launch")
    if launch:
        arms = launch["arms"]
        for name, arm in arms.items():
            added = "" if name == "no_subscriber" else f"+{arm['added_cpu_ns']['median']:.0f} ns over no subscriber; "
            f.add(
                "B1c-real",
                f"MSPTI(real) per launch, thread CPU: {name}",
                arm["cpu_ns"],
                "ns/launch",
                "report",
                None,
                f"{added}wall {arm['wall_ns']['median']:.0f} ns; keeps {arm['keeps']}",
            )
    for cfg in (d.get("drain") or {}).values():
        n, delay = cfg["n"], cfg["delay_ms"]
        p = cfg.get("plugin")
        if p:
            big = n >= 1000
            f.add(
                "B2real",
                f"stop(), plugin, {n:,} launches, device delay {delay} ms",
                p["stop_ms"],
                "ms",
                "<= 50" if big else "report",
                le(p["stop_ms"], 50) if big else None,
                f"lost {sum(p['lost'])} over {len(p['lost'])} runs; links verified == N in every run: "
                f"{p['all_verified']}; exit {p['exit_reasons']}; pulled_by {p['pulled_by']}",
            )
        for arm in ("seed", "seed_poll"):
            s = cfg.get(arm)
            if not s:
                continue
            ratio = f"plugin / {arm} {p['stop_ms']['median'] / s['stop_ms']['median']:.3f}; " if p else ""
            f.add(
                "B2real",
                f"  stop(), {arm}, {n:,} launches, device delay {delay} ms",
                s["stop_ms"],
                "ms",
                "report",
                None,
                f"{ratio}lost {sum(s['lost'])} over {len(s['lost'])} runs (max {max(s['lost'])}); "
                f"msptiUnsubscribe alone {s['unsubscribe_ms']['median']:.0f} ms",
            )
    plugin_runs = [c["plugin"] for c in (d.get("drain") or {}).values() if c.get("plugin")]
    if plugin_runs:
        unsub = summarize([x for p in plugin_runs for x in p["unsubscribe_ms"]["samples"]])
        wait = summarize([x for p in plugin_runs for x in p["exit_wait_ms"]["samples"]])
        done = summarize([x for p in plugin_runs for x in p["release_done_ms"]["samples"]])
        f.add(
            "B2real",
            "plugin's msptiUnsubscribe, off stop() (release.last_unsubscribe_ms), all runs",
            unsub,
            "ms",
            "report",
            None,
            f"a child's exit waits for it: the package's exit hook returns {done['median']:.0f} ms after stop() "
            f"(median), the process is gone {wait['median']:.0f} ms after",
        )


BENCHES: list[tuple[str, str, str, Callable[[dict[str, Any], Figures], None]]] = [
    ("B1a", "cpp", "pushpop", fig_pushpop),
    ("B1b", "py", "overhead", fig_overhead),
    ("B2", "cpp", "drain", fig_drain),
    ("B3", "cpp", "process", fig_process),
    ("B3py", "py", "trace_processing", fig_trace),
    ("B4", "cpp", "walk", fig_walk),
    ("Bcli", "py", "cli_startup", fig_cli),
    ("B5", "py", "end_to_end", fig_end_to_end),
    ("B2real", "py", "real_mspti", fig_real_mspti),
]


def fig_cross(report: dict[str, Any], f: Figures) -> None:
    """The work after collection per kernel (B3, C++ harness: stop()'s launch table + processTrace)
    against torch's exit per CPU op (B3py), both at the B3py size when B3 ran it: two processes, so
    no interleaving; reported, with the caveat."""
    b3, b3py = report["benchmarks"].get("process"), report["benchmarks"].get("trace_processing")
    if not (b3 and b3py and b3.get("ok") and b3py.get("ok")):
        return
    n = b3py["params"]["n"]
    if str(n) not in b3.get("sizes", {}):
        return
    sizes = b3["sizes"][str(n)]
    ours_us = [(s + p) / n * 1e6 for s, p in zip(sizes["seconds"], sizes["prepare_seconds"], strict=False)]
    torch_us = b3py["per_unit_us"]["exit"]["torch_per_op"]["median"]
    stats = summarize([u / torch_us for u in ours_us])
    f.add(
        "B3x",
        f"launch table + processTrace us per kernel (C++) / torch exit us per op, n={n:,}",
        stats,
        "x",
        "<= 1",
        le(stats, 1.0),
        f"{summarize(ours_us)['median']:.2f} vs {torch_us:.2f} us; separate processes",
    )


def fig_b1b_split(report: dict[str, Any], f: Figures) -> None:
    """B1b's plugin-added op-thread CPU per launch, split into MSPTI's share (B1c: the simulator's
    cost of the plugin's kinds and push/pop over KERNEL only) and the plugin's own (B1a: its push
    and pop), the rest unexplained; B1b and B1a/B1c run in separate processes, so reported only."""
    b1b, b1a = report["benchmarks"].get("overhead"), report["benchmarks"].get("pushpop")
    if not (b1b and b1a and b1b.get("ok") and b1a.get("ok")):
        return
    added_ns = (b1b["plugin_us_per_op"]["median"] - b1b["pu1_idle_us_per_op"]["median"]) * 1000
    mspti_ns = b1a["summary"]["mspti_share_ns_per_launch"]
    own_ns = b1a["summary"]["plugin_share"]["median"]
    f.add(
        "B1b",
        "  per launch: the plugin's collection (plugin - idle plugin), op thread",
        {"median": added_ns},
        "ns/launch",
        "report",
        None,
        f"MSPTI's share {mspti_ns:.0f} ns (B1c: its kinds + push/pop over KERNEL only), the plugin's own "
        f"{own_ns:.0f} ns (B1a: push + pop), rest {added_ns - mspti_ns - own_ns:.0f} ns; separate processes",
    )


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-2):
            return f"{v:.3g}"
        return f"{v:.2f}"
    return str(v)


def print_table(rows: list[dict[str, Any]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain fallback
        for r in rows:
            print(r)
        return
    from rich.markup import escape

    t = Table(title=escape("torch-mspti benchmarks (median; spread = relative IQR [min, max])"))
    for col in ("bench", "figure", "median", "spread", "unit", "target", "verdict", "note"):
        t.add_column(col, overflow="fold")
    style = {"PASS": "green", "MISS": "yellow", "FAIL": "bold red", "n/a": "dim"}
    for r in rows:
        spread = "-" if r["min"] is None else f"{fmt(r['rel_iqr'])} [{fmt(r['min'])}, {fmt(r['max'])}]"
        t.add_row(
            escape(r["bench"]),
            escape(r["figure"]),
            fmt(r["median"]),
            escape(spread),
            escape(r["unit"]),
            escape(r["target"]),
            f"[{style[r['verdict']]}]{r['verdict']}[/]",
            escape(r["note"]),
        )
    Console(width=200).print(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI): checks completeness, not speed")
    ap.add_argument("--json", help="write the full report here")
    ap.add_argument("--build-dir", default=str(REPO / "build" / "bench"))
    ap.add_argument("--only", help="comma-separated subset of B1a,B1b,B2,B3,B3py,B4,Bcli,B5,B2real")
    ap.add_argument("--strict", action="store_true", help="also fail (exit 2) when a target is missed")
    a = ap.parse_args()

    only = set(a.only.split(",")) if a.only else None
    params = SMOKE if a.smoke else FULL
    t0 = time.time()
    report: dict[str, Any] = {
        "mode": "smoke" if a.smoke else "full",
        "machine": machine(),
        "versions": versions(),
        "parameters": params,
        "benchmarks": {},
    }
    selected = [b for b in BENCHES if not only or b[0] in only]
    # The C++ tree serves the C++ benchmarks and B1b's MSPTI consumer; --only Bcli / B5 need neither.
    needs_build = any(kind == "cpp" or name == "overhead" for _, kind, name, _ in selected)
    bin_dir = build(Path(a.build_dir)) if needs_build else Path(a.build_dir)
    consumer = bin_dir / "libbench_consumer.so"
    figures = Figures()
    failed = False
    for key, kind, name, figs in BENCHES:
        if only and key not in only:
            continue
        if kind == "cpp":
            d = run_cpp(bin_dir, name, params[name])
        else:
            extra = ["--consumer", str(consumer)] if name == "overhead" else []
            d = run_py(name, extra + params[name])
        report["benchmarks"][name] = d
        if not d.get("ok") or d.get("exit_code"):
            failed = True
            figures.fail(
                key,
                (d.get("stderr") or f"exit {d.get('exit_code')}").strip().splitlines()[-1][:300]
                if (d.get("stderr") or "").strip()
                else f"completeness check failed (exit {d.get('exit_code')})",
            )
            continue
        try:
            figs(d, figures)
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            failed = True
            figures.fail(key, f"unexpected result: {exc!r}")
    fig_cross(report, figures)
    fig_b1b_split(report, figures)
    report["figures"] = figures.rows
    report["seconds"] = time.time() - t0
    report["machine"]["loadavg_at_end"] = list(os.getloadavg())
    print_table(figures.rows)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
        log(f"wrote {a.json}")
    log(f"done in {report['seconds']:.0f} s")
    if failed:
        return 1
    if a.strict and any(r["verdict"] == "MISS" for r in figures.rows):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
