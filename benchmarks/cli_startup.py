"""Bcli: wall time of the ``torch-mspti`` commands that must not import torch.

Run by run.py (or alone):

    python benchmarks/cli_startup.py [--reps R] [--ops N] [--json out]

Each sample is one fresh process, timed from ``subprocess.run`` to its exit (what a user waits
for): ``torch-mspti --help``, ``torch-mspti --version``, ``torch-mspti check TRACE`` (a
well-formed synthetic trace of N ops, each with a launch, a kernel and an arrow, written once),
and, for scale, ``python -c "import torch"``, the cost the first three avoid. The console script
next to this interpreter is used when installed, else ``python -m torch_mspti_cli``. Commands
are rotated over R rounds after one discarded warm-up round (page cache). Target: median
<= 0.5 s each. Completeness: every command exits 0 and prints what it should (usage text,
version, "OK"), and none of the CLI commands imported torch (``-X importtime`` of one extra
run of each through ``python -m torch_mspti_cli``, the console script's module).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CompletenessError, emit, summarize

TARGET_S = 0.5


def cli_command() -> list[str]:
    script = Path(sys.executable).parent / "torch-mspti"
    if script.is_file():
        return [str(script)]
    found = shutil.which("torch-mspti")
    return [found] if found else [sys.executable, "-m", "torch_mspti_cli"]


def synthetic_trace(path: str, ops: int) -> None:
    """Ops on one host thread, each launching one kernel on NPU 0 stream 1, linked by an arrow."""
    host, events = 100, []
    events += [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "NPU 0"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "NPU 0"}},
        {"ph": "M", "name": "process_sort_index", "pid": 0, "tid": 0, "args": {"sort_index": 5_000_000}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "stream 1"}},
    ]
    for i in range(ops):
        t, corr = 10.0 * i, 1000 + i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": host, "tid": host, "ts": t, "dur": 8},
            {
                "ph": "X",
                "cat": "privateuse1_runtime",
                "name": "LaunchKernelV2",
                "pid": host,
                "tid": host,
                "ts": t + 1,
                "dur": 2,
                "args": {"correlation": corr, "External id": i + 1},
            },
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": host, "tid": host, "ts": t + 1},
            {
                "ph": "X",
                "cat": "kernel",
                "name": "MatMulV2",
                "pid": 0,
                "tid": 1,
                "ts": t + 4,
                "dur": 5,
                "args": {"device": 0, "stream": 1, "correlation": corr, "External id": i + 1},
            },
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 1, "ts": t + 4, "bp": "e"},
        ]
    health = {"library": {"available": True}, "state": "stopped", "errors": [], "drain": {"pending_launches": 0}}
    Path(path).write_text(json.dumps({"traceEvents": events, "torch_mspti": json.dumps(health)}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--json")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="tm_bench_cli_")
    trace = os.path.join(tmp, "trace.json")
    synthetic_trace(trace, a.ops)
    cli = cli_command()
    cli_args = {
        "torch-mspti --help": (["--help"], "usage: torch-mspti"),
        "torch-mspti --version": (["--version"], "torch-mspti "),
        "torch-mspti check TRACE": (["check", trace], "OK"),
    }
    commands = {name: (cli + args, expect) for name, (args, expect) in cli_args.items()}
    commands["python -c 'import torch'"] = ([sys.executable, "-c", "import torch"], "")
    env = dict(os.environ, COLUMNS="100")

    def once(name: str) -> float:
        cmd, expect = commands[name]
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t0
        if res.returncode != 0 or expect not in res.stdout:
            raise CompletenessError(f"{name}: exit {res.returncode}, stdout {res.stdout[-300:]!r}")
        return dt

    names = list(commands)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(a.reps + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            dt = once(name)
            if r:  # round 0 warms the page cache
                samples[name].append(dt)

    imported = {}
    for name, (args, _) in cli_args.items():
        py = [sys.executable, "-X", "importtime", "-m", "torch_mspti_cli", *args]
        res = subprocess.run(py, capture_output=True, text=True, env=env)
        imported[name] = any(line.split("|")[-1].strip() == "torch" for line in res.stderr.splitlines())
    shutil.rmtree(tmp, ignore_errors=True)
    if any(imported.values()):
        raise CompletenessError(f"torch was imported by: {[n for n, v in imported.items() if v]}")

    out = {
        "bench": "cli_startup",
        "params": {"reps": a.reps, "ops": a.ops, "command": cli},
        "commands": {n: summarize(v) for n, v in samples.items()},
        "imports_torch": imported,
        "target_s": TARGET_S,
        "ok": True,
    }
    emit(out, a.json)


if __name__ == "__main__":
    main()
