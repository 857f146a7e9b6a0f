"""Shared helpers of the benchmark runner and its modules: statistics, machine and version facts,
child-process plumbing, and the simulated-NPU workload the Python benchmarks share (B3py, B5): the
simulator set-up, N ``x.zero_()`` ops, and the session's completeness check."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    """Median and spread of repeated measurements.

    spread: (q3 - q1) / median, the relative interquartile range (0 for fewer than 4 samples, where
    min/max are the only honest spread and are reported too)."""
    xs = sorted(float(x) for x in samples)
    if not xs:
        return {"n": 0, "median": None, "min": None, "max": None, "rel_iqr": None, "samples": []}
    med = statistics.median(xs)
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        rel_iqr = (q[2] - q[0]) / med if med else 0.0
    else:
        rel_iqr = 0.0
    return {"n": len(xs), "median": med, "min": xs[0], "max": xs[-1], "rel_iqr": rel_iqr, "samples": list(samples)}


def ratio_summary(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Per-pair ratios a[i]/b[i] of interleaved arms, summarized (median of the ratios)."""
    return summarize([x / y for x, y in zip(a, b, strict=False) if y])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "loadavg_at_start": list(load) if load else None,
    }


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    code = (
        "import json, torch, torch_mspti; "
        "print(json.dumps({'torch': torch.__version__, 'torch_mspti': torch_mspti.__version__}))"
    )
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        out.update(json.loads(res.stdout.strip().splitlines()[-1]))
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def emit(result: dict[str, Any], path: str | None) -> None:
    """A child module's result: to `path` when given, else one JSON line on stdout."""
    text = json.dumps(result)
    if path:
        Path(path).write_text(text)
    else:
        print(text)


class CompletenessError(AssertionError):
    """A benchmark lost data: its timing is not a result."""


# ---------------------------------------------------------------- the simulated-NPU workload (B3py, B5)

#: Simulator options of the trace benchmarks: records reach the plugin 2 ms after their kernel and a
#: driver flush takes 1 ms, so the drain inside the profiler's exit is a few ms (B2 measures the drain).
SIM_OPTIONS = {"delivery_delay_ns": 2_000_000, "driver_flush_ns": 1_000_000}
#: ``torch_mspti.sim.enable`` arguments: one device, launches inside their ops (every kernel linkable),
#: no housekeeping kernels inside the profiled window (the one per device comes with the first allocation).
SIM_ENABLE = {"device_count": 1, "launch_mode": "direct", "housekeeping_every": 0}


def setup_simulator(options: dict[str, int] | None = None) -> dict[str, Any]:
    """Turns this process's PrivateUse1 into the simulated NPU (``SIM_ENABLE``) and sets the MSPTI
    simulator's options (``SIM_OPTIONS`` unless given) through ``msptiSimSetOption``; returns what it set."""
    import ctypes

    import torch_mspti.sim as sim

    sim.enable(**SIM_ENABLE)
    lib = ctypes.CDLL(sim.simulator_library())
    lib.msptiSimSetOption.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    opts = dict(SIM_OPTIONS if options is None else options)
    for key, value in opts.items():
        lib.msptiSimSetOption(key.encode(), value)
    return {"enable": dict(SIM_ENABLE), "options": opts}


def npu_zero_ops(x: Any, n: int) -> None:
    """N ``x.zero_()`` (one kernel each on the simulated NPU, direct launch), then a device synchronize."""
    import torch

    for _ in range(n):
        x.zero_()
    torch.npu.synchronize()


def check_session(n: int, arm: str = "plugin") -> dict[str, Any]:
    """The plugin's last session holds exactly N kernels, each linked to its op and verified
    (``torch_mspti.diagnostics().to_dict()["last_session"]``); returns that report, raises
    CompletenessError otherwise."""
    import torch_mspti

    last = torch_mspti.diagnostics(load_library=False).to_dict()["last_session"]
    got, verified = last["rows"]["kernels"], last["links"]["verified"]
    if not (got == n and verified == n):
        raise CompletenessError(f"{arm}: {n} kernels launched; the session has {got} ({verified} verified links)")
    return last
