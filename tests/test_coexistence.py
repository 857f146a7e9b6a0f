"""TORCH_MSPTI_PROFILER and another PrivateUse1 profiler (e.g. torch_npu's) in the registry.

torch keeps only the last factory registered. A do-nothing factory registered through
`_C._register_foreign_profiler_for_testing()` stands in for torch_npu's; each scenario runs in a
fresh process because registration and the PrivateUse1 rename are process-wide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCENARIO = r"""
import json, os, types, warnings
os.environ["TORCH_MSPTI_PROFILER"] = "off"        # import without registering ...
import torch, torch_mspti
from torch_mspti import _C
_C._register_foreign_profiler_for_testing()         # ... another vendor registers first ...
_C._reset_registration_for_testing()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    message = _C.register_profiler(MODE)            # ... then ours, as an import would
torch.utils.rename_privateuse1_backend("npu")
mod = types.ModuleType("npu"); mod.synchronize = lambda *a: None
mod.is_available = lambda: True; mod.device_count = lambda: 1; mod.current_device = lambda: 0
torch._register_device_module("npu", mod)
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
    torch.ones(2) + 1
print(json.dumps({"message": message, "plugin": _C.plugin_report()}))
"""


def _run(mode: str) -> dict:
    code = SCENARIO.replace("MODE", repr(mode))
    env = {**os.environ, "TORCH_MSPTI_LIBRARY": "/nonexistent/libmspti.so"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_auto_leaves_an_earlier_privateuse1_profiler_in_place():
    out = _run("auto")
    plugin = out["plugin"]
    assert plugin["other_profiler"] is True and plugin["registered"] is False
    assert "another PrivateUse1 profiler" in out["message"] and "TORCH_MSPTI_PROFILER=mspti" in out["message"]
    assert plugin["forwarded_to_kineto"] is True
    assert plugin["last_trace_used_ours"] is False  # kineto used the other one


def test_mspti_mode_replaces_an_earlier_privateuse1_profiler():
    out = _run("mspti")
    plugin = out["plugin"]
    assert plugin["other_profiler"] is True and plugin["registered"] is True
    assert "replaced" in out["message"]
    assert plugin["last_trace_used_ours"] is True


def test_off_mode_registers_nothing():
    out = _run("off")
    assert out["plugin"]["registered"] is False
    assert out["plugin"]["last_trace_used_ours"] is False


@pytest.mark.parametrize("value", ["sometimes", "MSPTI "])
def test_profiler_mode_from_the_environment(value):
    code = "import torch_mspti, json; print(json.dumps(torch_mspti._C.plugin_report()))"
    env = {**os.environ, "TORCH_MSPTI_PROFILER": value}
    r = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    if value.strip().lower() == "mspti":
        assert report["mode"] == "mspti" and report["registered"] is True
    else:
        assert "TORCH_MSPTI_PROFILER='sometimes' is not allowed" in r.stderr
        assert report["mode"] == "auto"
