"""The session behind ``torch-mspti doctor --probe``: profile a few ops on this machine's NPU.

Runs in a child process of the doctor (``python -m torch_mspti.probe --out RESULT.json``):
using the simulator renames the PrivateUse1 backend for the whole process, and a real device
session loads CANN's MSPTI there for good, so the doctor's own process stays untouched.

The device is the real Ascend NPU when torch_npu and CANN are installed (torch_npu is imported
then, and an NPU must be available), else the simulated NPU (``torch_mspti.sim.enable(
launch_mode="direct")``, which honours ``TORCH_MSPTI_LIBRARY`` naming a simulator library). The
workload is 4 x (64 x 64 matmul + add) under ``record_function``, after a warm-up, with the
device synchronized before the profiler stops. The result (JSON) holds the device used, the
simulator's settings, the device's counters during the profile (simulator), the plugin's diagnostics after
the session, the path of the exported trace (which the doctor checks: the library does not import
the command line) and the warnings raised; or ``error`` (one line) when no profile could run. Exit
status 0 whenever the result was written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from typing import Any

__all__ = ["probe"]

OPS = 4
SIZE = 64


def _workload(torch, record_function) -> None:
    x = torch.randn(SIZE, SIZE, device="npu")
    with record_function("torch-mspti probe"):
        for _ in range(OPS):
            torch.matmul(x, x).add_(1)
    torch.npu.synchronize()


def probe(device: str = "auto", trace_path: str | None = None) -> dict[str, Any]:
    """Profile the probe workload on ``device`` ("auto", "sim" or "real"); see the module docstring."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    import torch_mspti

    from .sim import demo

    result: dict[str, Any] = {"requested_device": device, "device": None, "error": None, "warnings": []}
    try:
        result["device"] = demo.select_device(device, launch_mode="direct")
    except Exception as exc:
        result["error"] = f"cannot use device {device!r}: {type(exc).__name__}: {exc}"
        return result
    if result["device"] == "sim":
        result["simulator"] = torch_mspti.sim.settings()
    path = trace_path or os.path.join(tempfile.mkdtemp(prefix="torch_mspti_probe_"), "probe.json")
    counters = torch_mspti.sim.device_counters
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _workload(torch, record_function)  # warm-up: allocations, first launches
            before = counters() if result["device"] == "sim" else {}
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
                _workload(torch, record_function)
            prof.export_chrome_trace(path)
        result["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    except Exception as exc:
        result["error"] = f"the probe profile failed: {type(exc).__name__}: {exc}"
        return result
    if result["device"] == "sim":  # what the simulated device did inside the profile
        result["device_counters"] = {k: v - before.get(k, 0) for k, v in counters().items()}
    result["diagnostics"] = torch_mspti.diagnostics().to_dict()
    result["trace"] = path
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torch_mspti.probe", description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("auto", "sim", "real"), default="auto")
    ap.add_argument("--out", required=True, help="where to write the result (JSON)")
    ap.add_argument("--trace", help="where to write the probe's trace (default: a temporary file)")
    a = ap.parse_args(argv)
    result = probe(a.device, a.trace)
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
