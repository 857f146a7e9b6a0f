#!/usr/bin/env python
"""End to end (B5): one profiled step of N kernels, from the profiler's stop to a
trace file on disk, by phase, against the same run without PrivateUse1.

    python benchmarks/end_to_end.py [--n 1000000] [--ranks 8 --rank-n 100000] [--reps 1]
                                    [--out DIR [--keep]] [--json FILE]

Workload (each arm in a fresh process of its own, so its peak RSS is its own): the simulated NPU
(``torch_mspti.sim.enable(device_count=1, launch_mode="direct", housekeeping_every=0)``: launches
inside their ops, no housekeeping kernel in the window), MSPTI simulator options through
``msptiSimSetOption``: ``delivery_delay_ns`` = 2 ms (records reach the plugin 2 ms after their
kernel), ``driver_flush_ns`` = 1 ms (benchmarks/_common.py ``SIM_OPTIONS``, as B3py);
``OMP_NUM_THREADS=1``. After a warm-up profile of 100 ops (one-time set-up: library loading,
kineto's first session, the first export), ``gc.collect()``, then one profile of N ``x.zero_()``
(one kernel each) and ``torch.npu.synchronize()`` inside it:

  plugin     ``profile(activities=[CPU, PrivateUse1])``: torch-mspti collects the N kernels
  cpu_only   ``profile(activities=[CPU])``: the same ops, no device collection

Timed phases (``time.perf_counter``):
  collect         the N ops and the synchronize (for information)
  exit            torch's ``__exit__``, whole; for the plugin split into our ``stop()`` and our
                  ``processTrace`` (``diagnostics()["last_session"]["timings"]``: stop_ms,
                  process_trace_ms) and the rest (torch and kineto: trace building, result
                  conversion); torch's own ``_disable_profiler`` call is reported too
  export_plain    ``export_chrome_trace`` to ``.json``
  export_gzip     ``export_chrome_trace`` to ``.json.gz`` (torch writes the plain JSON to a temporary
                  file, then gzips it). Kineto saves a result once (a second export raises "Trace is
                  already saved"), so one call to ``export_chrome_trace("….json.gz")`` serves both:
                  its inner save of the plain JSON, ``profile.profiler.export_chrome_trace(tmp,
                  metadata)`` (the very call torch makes for a ``.json`` name), is timed as the plain
                  export and kept as ``….json`` (a hard link to torch's temporary file, made in the
                  output directory); the whole call is the gzip export.
  stop_to_plain   exit + export_plain: from stop() to a plain trace on disk
  stop_to_gzip    exit + export_gzip
Peak RSS (``ru_maxrss``) is read right after the export, before the checks; RSS is also sampled
before the exit and after it. Trace bytes per kernel, plain and gzip.

Each plugin phase is reported next to the cpu_only one: ratio (plugin / cpu_only) and the
difference per kernel (us); for our stop() and processTrace, which the cpu_only arm lacks, the
whole figure is the plugin's; the plugin's "rest" is compared with the cpu_only exit. ``--reps``
repeats both arms (alternating which runs first).

Multi-rank (``--ranks R --rank-n M``, default 8 x 100,000; ``--ranks 0`` skips it): R worker
processes of the plugin arm, started together, each with its own simulated NPU; they set up, wait at
a barrier, then run the step concurrently (R processes on this machine's cores), and wait again
before their checks so that no rank's check runs during another rank's timed phases. Then the same R
with CPU only. Per group: per-rank medians and max of every phase, wall time from the spawn (and
from the barrier; and from the first rank's stop) to the last trace on disk (plain, gzip), total
trace bytes, max peak RSS.

Completeness (a run that lost data exits 1), in the worker after the timed phases:
* plugin: the session reports N kernels, all linked and verified; the exported plain trace holds
  exactly N kernel events, each ``args.link == "verified"`` and the end of an ac2g arrow that starts
  on its launch, inside its op (benchmarks/_trace_links.py); the gzip file, read the same way,
  gives the same counts; the trace holds N ``aten::zero_`` ops.
* cpu_only: the plain trace holds N ``aten::zero_`` ops and no kernel; the gzip file the same.
The files are streamed (an event at a time), not loaded whole; the check's time is reported apart.

Output: a table (rich) and with ``--json`` the report (machine, load average at start and end,
versions, parameters, every run's raw figures, summaries). Trace files go to ``--out`` (default a
temporary directory) and are deleted after each arm unless ``--keep``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    CompletenessError,
    check_session,
    emit,
    machine,
    npu_zero_ops,
    ratio_summary,
    setup_simulator,
    summarize,
    versions,
)
from _trace_links import complete, summarize_file

WARMUP_OPS = 100
BARRIER_TIMEOUT_S = 3600.0
ARMS = ("plugin", "cpu_only")
#: phases in seconds, each worker reports them
PHASES = (
    "collect_s",
    "exit_s",
    "stop_s",
    "process_trace_s",
    "exit_rest_s",
    "torch_disable_s",
    "export_plain_s",
    "export_gzip_s",
    "stop_to_plain_s",
    "stop_to_gzip_s",
)
PLUGIN_ONLY = ("stop_s", "process_trace_s")


def log(msg: str) -> None:
    print(f"[end_to_end] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- one arm (a worker process)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _wait_for(path: Path, what: str) -> None:
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} ({path}) after {BARRIER_TIMEOUT_S:.0f} s")
        time.sleep(0.005)


def _export_both(p: Any, plain: Path, gz: Path) -> dict[str, float]:
    """torch's gzip export, with its inner plain save timed and kept (module docstring)."""
    inner = p.profiler.export_chrome_trace
    seen: dict[str, float] = {}

    def save_plain(path: str, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        ret = inner(path, *args, **kwargs)
        seen["export_plain_s"] = time.perf_counter() - t0
        seen["plain_on_disk_wall"] = time.time()
        os.link(path, plain)  # torch deletes its temporary file after gzipping it
        return ret

    p.profiler.export_chrome_trace = save_plain
    saved_tempdir = tempfile.tempdir
    tempfile.tempdir = str(plain.parent)  # torch's temporary plain trace goes there, so it can be hard-linked
    try:
        t0 = time.perf_counter()
        p.export_chrome_trace(str(gz))
        seen["export_gzip_s"] = time.perf_counter() - t0
        seen["gzip_on_disk_wall"] = time.time()
    finally:
        tempfile.tempdir = saved_tempdir
        del p.profiler.export_chrome_trace
    if "export_plain_s" not in seen:
        raise RuntimeError(
            "torch's export_chrome_trace('….json.gz') did not call profile.profiler.export_chrome_trace: "
            "this torch exports gzip differently; the plain export cannot be timed inside it"
        )
    return seen


def _check_traces(arm: str, n: int, plain: Path, gz: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    s_plain = summarize_file(plain)
    t1 = time.perf_counter()
    s_gz = summarize_file(gz)
    t2 = time.perf_counter()
    out = {"plain": s_plain, "check_plain_s": t1 - t0, "check_gzip_s": t2 - t1, "gzip_same": s_gz == s_plain}
    ops = s_plain["cpu_ops"].get("aten::zero_", 0)
    if arm == "plugin":
        ok = complete(s_plain, n) and ops == n
        what = (
            f"{s_plain['kernels']} kernel events ({s_plain['linked_to_op']} verified and linked to their op by an "
            f"arrow; problems {s_plain['problems']}; examples {s_plain['examples'][:2]}), {ops} aten::zero_ ops"
        )
    else:
        ok = s_plain["kernels"] == 0 and ops == n
        what = f"{ops} aten::zero_ ops, {s_plain['kernels']} kernel events"
    if not ok:
        raise CompletenessError(f"{arm}: {n} ops/kernels launched; the exported trace {plain.name} has {what}")
    if s_gz != s_plain:
        raise CompletenessError(
            f"{arm}: the gzip trace differs from the plain one: {s_gz['events']} events, {s_gz['kernels']} kernels, "
            f"{s_gz['linked_to_op']} linked (plain: {s_plain['events']}, {s_plain['kernels']}, {s_plain['linked_to_op']})"
        )
    return out


def worker(arm: str, n: int, out: Path, name: str, group: str | None) -> int:
    result_path = out / f"{name}.result.json"
    res: dict[str, Any] = {"arm": arm, "n": n, "name": name, "pid": os.getpid(), "ok": False}
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile

        res["sim"] = setup_simulator()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.PrivateUse1] if arm == "plugin" else [])
        x = torch.zeros(1, device="npu")
        torch.npu.synchronize()

        warm = profile(activities=activities)  # one-time set-up, not timed
        warm.__enter__()
        npu_zero_ops(x, WARMUP_OPS)
        warm.__exit__(None, None, None)
        warm_file = out / f"{name}.warmup.json"
        warm.export_chrome_trace(str(warm_file))
        warm_file.unlink()
        del warm
        if arm == "plugin":
            check_session(WARMUP_OPS, f"{arm} warm-up")

        if group:
            (out / f"{name}.ready").touch()
            _wait_for(out / f"{group}.go", "start signal")
        gc.collect()
        rss0 = _rss_bytes()
        p = profile(activities=activities)
        p.__enter__()
        t0 = time.perf_counter()
        npu_zero_ops(x, n)
        t1 = time.perf_counter()
        exit_wall = time.time()
        rss1 = _rss_bytes()
        p.__exit__(None, None, None)
        t2 = time.perf_counter()
        rss2 = _rss_bytes()
        res["torch_disable_s"] = p.profiler._stats.profiler_disable_call_duration_us / 1e6
        if arm == "plugin":
            last = check_session(n, arm)  # cheap; between the exit and the export, in no timed phase
            timings = last["timings"]
            res["stop_s"] = timings["stop_ms"] / 1e3
            res["process_trace_s"] = timings["process_trace_ms"] / 1e3
            res["session"] = {
                "kernels": last["rows"]["kernels"],
                "verified": last["links"]["verified"],
                "records": last["records"],
                "drain": last["drain"],
            }
        plain, gz = out / f"{name}.json", out / f"{name}.json.gz"
        res.update(_export_both(p, plain, gz))
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        res.update(
            collect_s=t1 - t0,
            exit_s=t2 - t1,
            exit_start_wall=exit_wall,
            rss_bytes={"before_profile": rss0, "before_exit": rss1, "after_exit": rss2, "after_export": _rss_bytes()},
            peak_rss_bytes=rss_peak,
            plain_bytes=plain.stat().st_size,
            gzip_bytes=gz.stat().st_size,
            plain=str(plain),
            gzip=str(gz),
        )
        res["exit_rest_s"] = res["exit_s"] - res.get("stop_s", 0.0) - res.get("process_trace_s", 0.0)
        res["stop_to_plain_s"] = res["exit_s"] + res["export_plain_s"]
        res["stop_to_gzip_s"] = res["exit_s"] + res["export_gzip_s"]
        del p
        gc.collect()
        if group:  # the others may still be in their timed phases: check only when all are done
            (out / f"{name}.timed.json").write_text(json.dumps(res))
            _wait_for(out / f"{group}.check", "check signal")
        res["check"] = _check_traces(arm, n, plain, gz)
        res["ok"] = True
        return 0
    except CompletenessError as exc:
        res["error"] = f"lost data: {exc}"
        return 1
    except Exception:
        res["error"] = traceback.format_exc()
        return 1
    finally:
        result_path.write_text(json.dumps(res))


# ---------------------------------------------------------------- the driver


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _cmd(arm: str, n: int, out: Path, name: str, group: str | None) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", arm, "--n", str(n), "--out", str(out)]
    cmd += ["--name", name] + (["--group", group] if group else [])
    return cmd


def _result(out: Path, name: str, rc: int | None) -> dict[str, Any]:
    path = out / f"{name}.result.json"
    res = json.loads(path.read_text()) if path.is_file() else {"name": name, "ok": False, "error": "no result file"}
    res["exit_code"] = rc
    if rc != 0 and res.get("ok"):
        res["ok"] = False
        res["error"] = f"worker exited {rc}"
    if not res.get("ok"):
        logf = out / f"{name}.log"
        res["log_tail"] = logf.read_text(errors="replace")[-3000:] if logf.is_file() else ""
    return res


def _cleanup(out: Path, names: list[str], keep: bool) -> None:
    for name in names:
        for suffix in (".result.json", ".timed.json", ".ready", ".log", ".warmup.json"):
            (out / f"{name}{suffix}").unlink(missing_ok=True)
        if not keep:
            for suffix in (".json", ".json.gz"):
                (out / f"{name}{suffix}").unlink(missing_ok=True)


def run_single(arm: str, n: int, out: Path, name: str, keep: bool) -> dict[str, Any]:
    cmd = _cmd(arm, n, out, name, None)
    log(f"{arm}, n={n:,}: " + " ".join(cmd))
    t0 = time.perf_counter()
    with open(out / f"{name}.log", "w") as logf:
        rc = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT, env=_env()).returncode
    res = _result(out, name, rc)
    res["process_wall_s"] = time.perf_counter() - t0
    _cleanup(out, [name], keep)
    if res.get("ok"):
        log(
            f"  exit {res['exit_s']:.2f} s, export plain {res['export_plain_s']:.2f} s / gzip {res['export_gzip_s']:.2f} s, "
            f"peak RSS {res['peak_rss_bytes'] / 2**30:.2f} GiB, check {res['check']['check_plain_s'] + res['check']['check_gzip_s']:.1f} s"
        )
    return res


def run_group(arm: str, ranks: int, n: int, out: Path, keep: bool) -> dict[str, Any]:
    """R workers of one arm, started together, timed phases behind a barrier, checks after all are timed."""
    group = f"ranks_{arm}"
    names = [f"{group}_rank{r}" for r in range(ranks)]
    for f in (out / f"{group}.go", out / f"{group}.check"):
        f.unlink(missing_ok=True)
    log(f"{ranks} ranks x {n:,}, {arm}")
    procs, logs = [], []
    t_spawn = time.time()
    for name in names:
        logf = open(out / f"{name}.log", "w")  # closed below
        logs.append(logf)
        procs.append(
            subprocess.Popen(_cmd(arm, n, out, name, group), stdout=logf, stderr=subprocess.STDOUT, env=_env())
        )

    def wait_all(suffix: str) -> bool:
        while True:
            if all((out / f"{name}{suffix}").exists() for name in names):
                return True
            if any(p.poll() is not None for p in procs):  # a worker ended before the barrier: failed
                return False
            time.sleep(0.01)

    t_go = t_timed = None
    try:
        if wait_all(".ready"):
            t_go = time.time()
            (out / f"{group}.go").touch()
            if wait_all(".timed.json"):
                t_timed = time.time()
        (out / f"{group}.go").touch()  # never leave a worker waiting
        (out / f"{group}.check").touch()
        rcs = [p.wait() for p in procs]
    except BaseException:  # interrupted: end the workers this group started
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        raise
    finally:
        for logf in logs:
            logf.close()
    results = [_result(out, name, rc) for name, rc in zip(names, rcs, strict=True)]
    _cleanup(out, names, keep)
    for f in (out / f"{group}.go", out / f"{group}.check"):
        f.unlink(missing_ok=True)
    g: dict[str, Any] = {"arm": arm, "ranks": ranks, "n": n, "ranks_results": results}
    g["ok"] = all(r.get("ok") for r in results) and t_timed is not None
    if not g["ok"]:
        return g
    last_plain = max(r["plain_on_disk_wall"] for r in results)
    last_gzip = max(r["gzip_on_disk_wall"] for r in results)
    first_stop = min(r["exit_start_wall"] for r in results)
    g["wall_s"] = {
        "spawn_to_last_plain": last_plain - t_spawn,
        "spawn_to_last_gzip": last_gzip - t_spawn,
        "barrier_to_last_plain": last_plain - t_go,
        "barrier_to_last_gzip": last_gzip - t_go,
        "first_stop_to_last_plain": last_plain - first_stop,
        "first_stop_to_last_gzip": last_gzip - first_stop,
        "stops_spread": max(r["exit_start_wall"] for r in results) - first_stop,
    }
    g["phases"] = {ph: summarize([r[ph] for r in results]) for ph in PHASES if all(ph in r for r in results)}
    g["total_plain_bytes"] = sum(r["plain_bytes"] for r in results)
    g["total_gzip_bytes"] = sum(r["gzip_bytes"] for r in results)
    g["max_peak_rss_bytes"] = max(r["peak_rss_bytes"] for r in results)
    g["check_s"] = summarize([r["check"]["check_plain_s"] + r["check"]["check_gzip_s"] for r in results])
    return g


def compare(plugin: list[dict[str, Any]], cpu: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Per phase: the plugin, the cpu_only arm, the ratio and the difference per kernel (us)."""
    out: dict[str, Any] = {}
    for ph in PHASES:
        p = [r[ph] for r in plugin]
        if ph in PLUGIN_ONLY:
            c = None
        elif ph == "exit_rest_s":  # torch + kineto inside the plugin's exit vs the whole cpu_only exit
            c = [r["exit_s"] for r in cpu]
        else:
            c = [r[ph] for r in cpu]
        row: dict[str, Any] = {"plugin": summarize(p), "plugin_us_per_kernel": summarize([x / n * 1e6 for x in p])}
        if c is not None:
            row["cpu_only"] = summarize(c)
            row["ratio"] = ratio_summary(p, c)
            row["added_us_per_kernel"] = summarize([(x - y) / n * 1e6 for x, y in zip(p, c, strict=False)])
        out[ph] = row
    return out


def single_summary(plugin: list[dict[str, Any]], cpu: list[dict[str, Any]], n: int) -> dict[str, Any]:
    med = statistics.median
    peak_p, peak_c = [r["peak_rss_bytes"] for r in plugin], [r["peak_rss_bytes"] for r in cpu]
    return {
        "phases": compare(plugin, cpu, n),
        "peak_rss_bytes": {
            "plugin": summarize(peak_p),
            "cpu_only": summarize(peak_c),
            "plugin_extra_per_kernel": (med(peak_p) - med(peak_c)) / n,
        },
        "trace_bytes_per_kernel": {
            "plugin_plain": med([r["plain_bytes"] for r in plugin]) / n,
            "plugin_gzip": med([r["gzip_bytes"] for r in plugin]) / n,
            "cpu_only_plain_per_op": med([r["plain_bytes"] for r in cpu]) / n,
            "cpu_only_gzip_per_op": med([r["gzip_bytes"] for r in cpu]) / n,
        },
        "check_s": {
            arm: summarize([r["check"]["check_plain_s"] + r["check"]["check_gzip_s"] for r in rs])
            for arm, rs in (("plugin", plugin), ("cpu_only", cpu))
        },
    }


def ranks_summary(groups: dict[str, dict[str, Any]]) -> dict[str, Any]:
    p, c = groups["plugin"], groups["cpu_only"]
    n = p["n"]
    phases = {}
    for ph, s in p["phases"].items():
        row = {"plugin_median": s["median"], "plugin_max": s["max"]}
        cph = "exit_s" if ph == "exit_rest_s" else ph
        if ph not in PLUGIN_ONLY and cph in c["phases"]:
            cs = c["phases"][cph]
            row |= {
                "cpu_only_median": cs["median"],
                "cpu_only_max": cs["max"],
                "ratio_of_medians": s["median"] / cs["median"] if cs["median"] else None,
                "added_us_per_kernel_median": (s["median"] - cs["median"]) / n * 1e6,
            }
        phases[ph] = row
    walls = {k: {"plugin": v, "cpu_only": c["wall_s"][k], "ratio": v / c["wall_s"][k]} for k, v in p["wall_s"].items()}
    return {
        "phases": phases,
        "wall_s": walls,
        "total_trace_bytes": {
            "plugin_plain": p["total_plain_bytes"],
            "plugin_gzip": p["total_gzip_bytes"],
            "cpu_only_plain": c["total_plain_bytes"],
            "cpu_only_gzip": c["total_gzip_bytes"],
        },
        "max_peak_rss_bytes": {"plugin": p["max_peak_rss_bytes"], "cpu_only": c["max_peak_rss_bytes"]},
    }


# ---------------------------------------------------------------- report


def _s(x: float | None, unit: str = "s") -> str:
    if x is None:
        return "-"
    return f"{x:.3f} {unit}" if abs(x) < 10 else f"{x:.1f} {unit}"


def print_report(report: dict[str, Any], stream: Any) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=stream, width=160)
    names = {
        "collect_s": "collection (N ops + sync; information)",
        "exit_s": "torch __exit__ (whole)",
        "stop_s": "  our stop()",
        "process_trace_s": "  our processTrace",
        "exit_rest_s": "  rest: torch + kineto (cpu_only: whole exit)",
        "torch_disable_s": "  torch's _disable_profiler call",
        "export_plain_s": "export_chrome_trace .json",
        "export_gzip_s": "export_chrome_trace .json.gz",
        "stop_to_plain_s": "stop() to plain file",
        "stop_to_gzip_s": "stop() to gzip file",
    }
    single = report.get("single")
    if single and single.get("summary"):
        n = single["n"]
        t = Table(title=escape(f"B5: {n:,} kernels, stop() to trace file (median of {single['reps']})"))
        for col in ("phase", "plugin", "us/kernel", "cpu_only", "ratio", "added us/kernel"):
            t.add_column(col, justify="left" if col == "phase" else "right")
        for ph, row in single["summary"]["phases"].items():
            t.add_row(
                escape(names[ph]),
                _s(row["plugin"]["median"]),
                f"{row['plugin_us_per_kernel']['median']:.2f}",
                _s(row["cpu_only"]["median"]) if "cpu_only" in row else "-",
                f"{row['ratio']['median']:.2f}x" if "ratio" in row else "-",
                f"{row['added_us_per_kernel']['median']:+.2f}" if "added_us_per_kernel" in row else "-",
            )
        console.print(t)
        s = single["summary"]
        rss, b = s["peak_rss_bytes"], s["trace_bytes_per_kernel"]
        console.print(
            f"peak RSS: plugin {rss['plugin']['median'] / 2**30:.2f} GiB, cpu_only {rss['cpu_only']['median'] / 2**30:.2f} GiB, "
            f"plugin extra {rss['plugin_extra_per_kernel']:.0f} B/kernel; trace bytes per kernel: plugin "
            f"{b['plugin_plain']:.0f} plain / {b['plugin_gzip']:.0f} gzip (cpu_only {b['cpu_only_plain_per_op']:.0f} / "
            f"{b['cpu_only_gzip_per_op']:.0f} per op); checks (not timed phases): plugin "
            f"{s['check_s']['plugin']['median']:.1f} s, cpu_only {s['check_s']['cpu_only']['median']:.1f} s"
        )
    mr = report.get("ranks")
    if mr and mr.get("summary"):
        s = mr["summary"]
        t = Table(
            title=escape(f"B5: {mr['ranks']} ranks x {mr['n']:,} kernels, started together (per-rank median / max)")
        )
        for col in ("phase", "plugin median", "plugin max", "cpu_only median", "cpu_only max", "ratio of medians"):
            t.add_column(col, justify="left" if col == "phase" else "right")
        for ph, row in s["phases"].items():
            t.add_row(
                escape(names[ph]),
                _s(row["plugin_median"]),
                _s(row["plugin_max"]),
                _s(row.get("cpu_only_median")),
                _s(row.get("cpu_only_max")),
                f"{row['ratio_of_medians']:.2f}x" if row.get("ratio_of_medians") else "-",
            )
        for k, v in s["wall_s"].items():
            t.add_row(
                escape(f"wall: {k.replace('_', ' ')}"), _s(v["plugin"]), "", _s(v["cpu_only"]), "", f"{v['ratio']:.2f}x"
            )
        console.print(t)
        tb, rss = s["total_trace_bytes"], s["max_peak_rss_bytes"]
        console.print(
            f"total trace bytes: plugin {tb['plugin_plain']:,} plain / {tb['plugin_gzip']:,} gzip; cpu_only "
            f"{tb['cpu_only_plain']:,} / {tb['cpu_only_gzip']:,}; max peak RSS: plugin {rss['plugin'] / 2**30:.2f} GiB, "
            f"cpu_only {rss['cpu_only'] / 2**30:.2f} GiB"
        )


def _failure(res: dict[str, Any]) -> str:
    err = (res.get("error") or "").strip()
    tail = (res.get("log_tail") or "").strip()
    return f"{res.get('name')}: {err or 'failed'}" + (
        f"\n--- log tail:\n{tail[-1500:]}" if tail and "lost data" not in err else ""
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="kernels (ops) in the single-process step")
    ap.add_argument("--ranks", type=int, default=8, help="processes of the multi-rank variant (0: skip it)")
    ap.add_argument("--rank-n", type=int, default=100_000, help="kernels per rank")
    ap.add_argument("--reps", type=int, default=1, help="runs of each single-process arm")
    ap.add_argument("--out", help="directory for the trace files (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the trace files")
    ap.add_argument("--json", help="write the report here (the table then goes to stdout)")
    ap.add_argument("--worker", choices=ARMS, help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--group", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.n, Path(a.out), a.name, a.group)
    if a.n < 1 or a.reps < 1 or a.ranks < 0 or (a.ranks and a.rank_n < 1):
        ap.error("--n, --reps and --rank-n must be >= 1, --ranks >= 0")

    made_out = a.out is None or not Path(a.out).exists()
    out = Path(a.out or tempfile.mkdtemp(prefix="tm_b5_")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    at_start = machine()
    t_start = time.perf_counter()
    report: dict[str, Any] = {
        "bench": "end_to_end",
        "params": {"n": a.n, "reps": a.reps, "ranks": a.ranks, "rank_n": a.rank_n, "warmup_ops": WARMUP_OPS},
        "out": str(out),
        "kept": a.keep,
        "ok": False,
    }
    failures: list[str] = []
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for rep in range(a.reps):
        for arm in ARMS if rep % 2 == 0 else ARMS[::-1]:
            res = run_single(arm, a.n, out, f"{arm}_n{a.n}_rep{rep}", a.keep)
            runs[arm].append(res)
            if not res.get("ok"):
                failures.append(_failure(res))
        if failures:
            break
    report["single"] = {"n": a.n, "reps": a.reps, "runs": runs}
    if not failures:
        report["single"]["summary"] = single_summary(runs["plugin"], runs["cpu_only"], a.n)
    if a.ranks and not failures:
        groups = {arm: run_group(arm, a.ranks, a.rank_n, out, a.keep) for arm in ARMS}
        report["ranks"] = {"ranks": a.ranks, "n": a.rank_n, "groups": groups}
        for g in groups.values():
            failures += [_failure(r) for r in g["ranks_results"] if not r.get("ok")]
            if not g["ok"] and all(r.get("ok") for r in g["ranks_results"]):
                failures.append(f"ranks {g['arm']}: a worker never reached the barrier")
        if not failures:
            report["ranks"]["summary"] = ranks_summary(groups)
    report["wall_s"] = time.perf_counter() - t_start
    report["machine"] = at_start | {"loadavg_at_end": list(os.getloadavg())}
    report["ok"] = not failures
    if failures:
        report["failures"] = failures
    if made_out and not a.keep:
        shutil.rmtree(out, ignore_errors=True)
    if a.json:
        report["versions"] = versions()
        print_report(report, sys.stdout)
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(report, indent=1))
        log(f"wrote {a.json}")
    else:
        print_report(report, sys.stderr)
        emit(report, None)
    log(
        f"done in {report['wall_s']:.0f} s; load average {at_start['loadavg_at_start']} -> {report['machine']['loadavg_at_end']}"
    )
    if failures:
        for f in failures:
            log(f"FAILED: {f}")
        log(f"FAILED: {len(failures)} run(s); first: {failures[0].splitlines()[0][:300]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
