"""Shared helpers of the benchmark runner and its modules: statistics, machine and version facts,
child-process plumbing. No benchmark logic lives here."""

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
