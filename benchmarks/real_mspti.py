#!/usr/bin/env python
"""B2real and B1c-real: the plugin on Huawei's real MSPTI (libmspti.so) over the fake CANN driver of
the realmspti fixture (its README.md), beside a seed-style consumer on the same library.

    python benchmarks/real_mspti.py [--realmspti DIR] [--cann-root DIR] [--sizes 50,1000]
                                    [--delays 0,200] [--runs 20] [--launches 20000]
                                    [--launch-repeats 7] [--parts drain,launch] [--json FILE]

The fixture: --realmspti, else $TORCH_MSPTI_REALMSPTI_DIR, else <repo>/../shared/realmspti; when it
is absent the benchmark reports itself skipped (exit 0). The CANN root: --cann-root, else one laid
out by the fixture's make_root.sh in a temporary directory. The C side (cpp/bench_realmspti.c) is
compiled with gcc into that temporary directory.

drain (B2real): for each size N and device delivery delay (FAKECANN_DEVICE_DELAY_MS), --runs runs,
each arm in a fresh process (one MSPTI subscriber per process), arms rotated within a run:
  plugin     torch.profiler with CPU + PrivateUse1 (backend renamed "npu"), N launches through the
             fake layer, each inside its own record_function; from torch_mspti.diagnostics():
             timings.stop_ms, rows.kernels (lost = N - kernels), links.verified, the drain's
             exit_reason and pulled_by; plugin.release when stop() returned and, from an atexit
             hook that runs after the package's, once the background msptiUnsubscribe is done
             (last_unsubscribe_ms); and how long the process took to exit after it reported
             (exit_wait_ms: the exit waits for that release; release_done_ms: from the report to
             the end of the package's wait at exit).
  seed       bench_realmspti drain ... seed: Subscribe, RegisterCallbacks, Enable KERNEL,
             EXTERNAL_CORRELATION, RUNTIME_API, COMMUNICATION; the launches inside CUSTOM0
             push/pop; stop = FlushAll, Disable each kind, Unsubscribe, FlushAll; the stop time,
             msptiUnsubscribe alone, lost = N - KERNEL records.
  seed_poll  the same with torch_npu's own stop: FlushAll + 25 ms until three polls add nothing,
             then Disable each kind, Unsubscribe, FlushAll + 25 ms.
launch (B1c-real): bench_realmspti launch: MSPTI's cost per launch on the launching thread by
kind set, arms interleaved within one process (see the C file); thread CPU and wall ns per launch,
the added cost over "no subscriber", per repeat.

Completeness: every plugin run must hold N kernels with N verified links, and every B1c arm must
get back all its kernel records; otherwise exit 1. The seed arms' losses are results, not failures.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH_DIR, REPO, emit, machine, summarize

C_SOURCE = BENCH_DIR / "cpp" / "bench_realmspti.c"
MSPTI_INCLUDE = REPO / "third_party" / "mspti" / "include"
ARMS = ("plugin", "seed", "seed_poll")
LAUNCH_ARMS = ("no_subscriber", "kernel_only", "kernel_pushpop", "hints", "calls", "plugin_kinds")
#: What each B1c kind set keeps (benchmarks/README.md "what each setting costs and keeps").
KEEPS = {
    "no_subscriber": "nothing (no profiler)",
    "kernel_only": "kernels, no link",
    "kernel_pushpop": "kernels, no link (MSPTI's push/pop stack alone)",
    "hints": "kernels + the op's id per kernel: unverified links",
    "calls": "kernels + launch calls (thread, time): recovered links",
    "plugin_kinds": "kernels + hints + launch calls: verified links",
}
STOP_TARGET_MS = 50.0


def default_realmspti() -> Path:
    env = os.environ.get("TORCH_MSPTI_REALMSPTI_DIR")
    return Path(env) if env else (REPO.parent / "shared" / "realmspti")


def log(msg: str) -> None:
    print(f"[real_mspti] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the plugin's arm (child process)


def child_plugin(n: int, root: str, fixture: str) -> None:
    """One profiled window of N launches with the plugin on the real library; prints two JSON lines:
    the session's figures when the profiler has exited, then (atexit, after the package's hook has
    waited for the background msptiUnsubscribe) the release's figures."""

    def at_exit() -> None:  # registered before torch_mspti is imported: atexit runs it last
        out = {"phase": "exit", "t": time.time()}
        try:
            import torch_mspti

            out["release"] = dict(torch_mspti.diagnostics(load_library=False).plugin.release)
        except Exception as exc:  # reported, not raised (the interpreter is exiting)
            out["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out), flush=True)

    atexit.register(at_exit)
    os.environ["ASCEND_HOME_PATH"] = root
    os.environ["TORCH_MSPTI_LIBRARY"] = root + "/lib64/libmspti.so"
    sys.path.insert(0, fixture)
    import torch
    from fakecann import FakeCann
    from torch.profiler import ProfilerActivity, profile, record_function

    import torch_mspti

    torch.utils.rename_privateuse1_backend("npu")  # torch.profiler drops PrivateUse1 while unnamed
    cann = FakeCann(root)
    cann.open_device(0)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        for i in range(n):
            with record_function(f"op{i}"):
                cann.launch_kernel(0, 3, i & 0xFFFF, "MatMulV2", "aclnnMatmul", 5000)
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    diag = torch_mspti.diagnostics(load_library=False)
    d = diag.last_session.to_dict() if diag.last_session is not None else {}
    out = {
        "phase": "stop",
        "n": n,
        "library": diag.library.path,
        "exit_s": t2 - t1,
        "timings": d.get("timings"),
        "drain": d.get("drain"),
        "links": d.get("links"),
        "rows": d.get("rows"),
        "records_by_kind": d.get("records_by_kind"),
        "enabled_kinds": d.get("enabled_kinds"),
        "errors": d.get("errors"),
        "release_at_stop": dict(diag.plugin.release),
        "collect_s": t1 - t0,
        "t": time.time(),
    }
    print(json.dumps(out), flush=True)


# ---------------------------------------------------------------- set-up and arms (parent)


def prepare(fixture: Path, cann_root: str | None, work: Path) -> tuple[str, Path]:
    """The CANN root (laid out by make_root.sh unless given) and the compiled C program."""
    if cann_root is None:
        res = subprocess.run(
            ["bash", str(fixture / "make_root.sh"), str(work / "cann")], check=True, capture_output=True, text=True
        )
        cann_root = res.stdout.strip().splitlines()[-1]
        log(f"CANN root laid out at {cann_root}")
    exe = work / "bench_realmspti"
    cmd = [os.environ.get("CC", "gcc"), "-O2", "-std=gnu11", "-Wall", "-I", str(MSPTI_INCLUDE)]
    cmd += ["-o", str(exe), str(C_SOURCE), "-ldl", "-lpthread"]
    subprocess.run(cmd, check=True)
    return cann_root, exe


def child_env(root: str, delay_ms: int) -> dict[str, str]:
    env = dict(os.environ)
    env["ASCEND_HOME_PATH"] = root
    env["FAKECANN_DEVICE_DELAY_MS"] = str(delay_ms)
    env.setdefault("FAKECANN_LOG", "3")  # MSPTI's own warnings (kinds the fake device lacks) off
    return env


def run_plugin(n: int, delay_ms: int, root: str, fixture: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "plugin", "--n", str(n)]
    cmd += ["--cann-root", root, "--realmspti", str(fixture)]
    p = subprocess.Popen(cmd, env=child_env(root, delay_ms), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop_line, stop_seen = None, None
    assert p.stdout is not None
    for line in p.stdout:  # the stop line arrives while the child is still running
        if line.startswith("{") and '"phase": "stop"' in line:
            stop_line, stop_seen = json.loads(line), time.time()
            break
    rest, err = p.communicate(timeout=300)
    exited = time.time()
    if p.returncode != 0 or stop_line is None:
        raise RuntimeError(f"plugin child (n={n}, delay={delay_ms}) exit {p.returncode}: {err[-2000:]}")
    exit_line = next((json.loads(ln) for ln in rest.splitlines() if '"phase": "exit"' in ln), {})
    r = stop_line
    r["exit_wait_ms"] = (exited - stop_seen) * 1e3  # from its report to its exit (the release)
    r["release_at_exit"] = exit_line.get("release")
    if "t" in exit_line:  # the child's atexit hook, after the package's wait for the release
        r["release_done_ms"] = (exit_line["t"] - r["t"]) * 1e3
    r["release_error"] = exit_line.get("error")
    return r


def run_seed(exe: Path, mode: str, n: int, delay_ms: int, root: str) -> dict[str, Any]:
    res = subprocess.run(
        [str(exe), "drain", root, str(n), mode],
        env=child_env(root, delay_ms),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} (n={n}, delay={delay_ms}) exit {res.returncode}: {res.stderr[-2000:]}")
    return json.loads(lines[-1])


def plugin_summary(n: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    kernels = [r["rows"]["kernels"] for r in runs]
    verified = [r["links"]["verified"] for r in runs]
    rel = [r["release_at_exit"] or {} for r in runs]
    return {
        "stop_ms": summarize([r["timings"]["stop_ms"] for r in runs]),
        "drain_ms": summarize([r["drain"]["ms"] for r in runs]),
        "lost": [n - k for k in kernels],
        "verified": verified,
        "all_verified": all(v == n for v in verified),
        "links": runs[-1]["links"],
        "exit_reasons": dict(Counter(r["drain"]["exit_reason"] for r in runs)),
        "pulled_by": dict(Counter(r["drain"]["pulled_by"] or "-" for r in runs)),
        "drain_order": dict(Counter(r["drain"]["order"] for r in runs)),
        "enabled_kinds": runs[-1]["enabled_kinds"],
        "release_in_flight_at_stop": sum(bool((r["release_at_stop"] or {}).get("in_flight")) for r in runs),
        # a release that made its call (a fast Unsubscribe can take 0.0 ms: not "none")
        "unsubscribe_ms": summarize(
            [x["last_unsubscribe_ms"] for x in rel if int(x.get("releases") or 0) > int(x.get("skipped_at_exit") or 0)]
        ),
        "release_results": dict(Counter(str(x.get("last_result")) for x in rel)),
        "release_errors": sorted({x.get("last_error") for x in rel if x.get("last_error")}),
        "skipped_at_exit": sum(int(x.get("skipped_at_exit") or 0) for x in rel),
        "exit_wait_ms": summarize([r["exit_wait_ms"] for r in runs]),
        "release_done_ms": summarize([r["release_done_ms"] for r in runs if "release_done_ms" in r]),
        "exit_s": summarize([r["exit_s"] for r in runs]),
        "errors": sorted({e for r in runs for e in (r.get("errors") or [])}),
    }


def seed_summary(n: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "stop_ms": summarize([r["stop_ms"] for r in runs]),
        "unsubscribe_ms": summarize([r["unsubscribe_ms"] for r in runs]),
        "disable_ms": summarize([r["disable_ms"] for r in runs]),
        "lost": [n - r["records"]["KERNEL"] for r in runs],
        "polls": [r["polls"] for r in runs],
        "unsubscribe_results": dict(Counter(str(r["unsubscribe_result"]) for r in runs)),
    }


def run_drain(a: argparse.Namespace, root: str, exe: Path, fixture: Path) -> dict[str, Any]:
    configs = [(n, d) for n in a.sizes for d in a.delays]
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {f"{n}:{d}": {arm: [] for arm in a.arms} for n, d in configs}
    for r in range(a.runs):
        for n, d in configs:
            order = list(a.arms[r % len(a.arms) :]) + list(a.arms[: r % len(a.arms)])  # rotated
            for arm in order:
                if arm == "plugin":
                    res = run_plugin(n, d, root, fixture)
                else:
                    res = run_seed(exe, arm, n, d, root)
                raw[f"{n}:{d}"][arm].append(res)
        log(f"drain: run {r + 1}/{a.runs} done")
    out: dict[str, Any] = {}
    for n, d in configs:
        key = f"{n}:{d}"
        cfg: dict[str, Any] = {"n": n, "delay_ms": d}
        for arm in a.arms:
            runs = raw[key][arm]
            cfg[arm] = plugin_summary(n, runs) if arm == "plugin" else seed_summary(n, runs)
        cfg["raw"] = raw[key]
        out[key] = cfg
    return out


def run_launch(a: argparse.Namespace, root: str, exe: Path) -> dict[str, Any]:
    cmd = [str(exe), "launch", root, str(a.launches), str(a.launch_repeats)]
    log("run: " + " ".join(cmd))
    res = subprocess.run(cmd, env=child_env(root, 0), capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"launch exit {res.returncode}: {res.stderr[-2000:]}")
    d = json.loads(lines[-1])
    base_cpu, base_wall = d["arms"]["no_subscriber"]["cpu_ns"], d["arms"]["no_subscriber"]["wall_ns"]
    arms: dict[str, Any] = {}
    complete = True
    for name in LAUNCH_ARMS:
        v = d["arms"][name]
        arm = {
            "cpu_ns": summarize(v["cpu_ns"]),
            "wall_ns": summarize(v["wall_ns"]),
            "added_cpu_ns": summarize([x - b for x, b in zip(v["cpu_ns"], base_cpu, strict=True)]),
            "added_wall_ns": summarize([x - b for x, b in zip(v["wall_ns"], base_wall, strict=True)]),
            "keeps": KEEPS[name],
        }
        if name != "no_subscriber":
            arm["kernels"] = v["kernels"]
            arm["external_correlation"] = v["external_correlation"]
            arm["runtime_api"] = v["runtime_api"]
            arm["wait_ms"] = summarize(v["wait_ms"])
            complete = complete and all(k == a.launches for k in v["kernels"])
        arms[name] = arm
    return {
        "launches": a.launches,
        "repeats": a.launch_repeats,
        "arms": arms,
        "complete": complete,
        "unsubscribe_ms": summarize(d["unsubscribe_ms"]),
    }


def problems(drain: dict[str, Any]) -> list[str]:
    """What the plugin got wrong on the real library: lost kernels, unverified links, a slow stop."""
    out = []
    for cfg in drain.values():
        p = cfg.get("plugin")
        if not p:
            continue
        n, d = cfg["n"], cfg["delay_ms"]
        if any(p["lost"]):
            out.append(f"plugin lost kernels at N={n}, delay {d} ms: {p['lost']}")
        if not p["all_verified"]:
            out.append(f"plugin: links not all verified at N={n}, delay {d} ms: {p['verified']}")
        if n >= 1000 and p["stop_ms"]["median"] > STOP_TARGET_MS:
            out.append(
                f"plugin stop() median {p['stop_ms']['median']:.1f} ms > {STOP_TARGET_MS:.0f} ms at N={n}, delay {d} ms"
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--realmspti", help="the realmspti fixture (default: $TORCH_MSPTI_REALMSPTI_DIR or <repo>/../shared/realmspti)"
    )
    ap.add_argument(
        "--cann-root", help="a CANN root made by make_root.sh (default: one laid out in a temporary directory)"
    )
    ap.add_argument("--sizes", default="50,1000", help="launches per profiled window (comma-separated)")
    ap.add_argument("--delays", default="0,200", help="FAKECANN_DEVICE_DELAY_MS values (comma-separated)")
    ap.add_argument("--runs", type=int, default=20, help="runs per size and delay (each arm a fresh process)")
    ap.add_argument("--arms", default=",".join(ARMS), help="drain arms: plugin,seed,seed_poll")
    ap.add_argument("--launches", type=int, default=20000, help="B1c: launches per arm and repeat (<= 60000)")
    ap.add_argument("--launch-repeats", type=int, default=7, help="B1c: repeats (arms rotated)")
    ap.add_argument("--parts", default="drain,launch", help="drain (B2real), launch (B1c-real)")
    ap.add_argument("--json", help="write the report here (else one JSON line on stdout)")
    ap.add_argument("--child", choices=["plugin"], help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    fixture = Path(a.realmspti) if a.realmspti else default_realmspti()
    if a.child == "plugin":
        child_plugin(a.n, a.cann_root, str(fixture))
        return 0

    a.sizes = [int(x) for x in a.sizes.split(",") if x]
    a.delays = [int(x) for x in a.delays.split(",") if x]
    a.arms = [x for x in a.arms.split(",") if x]
    parts = set(a.parts.split(","))
    params = {
        "sizes": a.sizes,
        "delays_ms": a.delays,
        "runs": a.runs,
        "arms": a.arms,
        "launches": a.launches,
        "launch_repeats": a.launch_repeats,
        "parts": sorted(parts),
    }
    result: dict[str, Any] = {"ok": True, "params": params, "machine": machine(), "realmspti": str(fixture)}
    if not (fixture / "make_root.sh").is_file() or not (fixture / "fakecann.py").is_file():
        result["skipped"] = f"the realmspti fixture is absent ({fixture}); set --realmspti or TORCH_MSPTI_REALMSPTI_DIR"
        log("skipped: " + result["skipped"])
        emit(result, a.json)
        return 0
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="tm_real_mspti_") as tmp:
        root, exe = prepare(fixture, a.cann_root, Path(tmp))
        result["cann_root"] = root if a.cann_root else "(temporary, make_root.sh)"
        if "launch" in parts:
            result["launch"] = run_launch(a, root, exe)
        if "drain" in parts:
            result["drain"] = run_drain(a, root, exe, fixture)
    result["machine"]["loadavg_at_end"] = list(os.getloadavg())
    result["seconds"] = time.time() - t0
    result["problems"] = problems(result.get("drain", {}))
    complete = result.get("launch", {}).get("complete", True) and not any(
        "lost" in p or "verified" in p for p in result["problems"]
    )
    result["ok"] = bool(complete)
    emit(result, a.json)
    for p in result["problems"]:
        log("PROBLEM: " + p)
    if not complete:
        log(
            "incomplete: " + "; ".join(result["problems"])
            if result["problems"]
            else "incomplete: a B1c arm lost kernels"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
