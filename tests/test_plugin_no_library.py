"""Without a usable libmspti a device profile still works: a CPU-only trace, one warning, a reason.

Each case runs a device profile (CPU + PrivateUse1) in a child with no simulator loaded, then
checks the exported trace, that nothing was raised, that exactly one warning sends the user to
`torch-mspti doctor`, and that diagnostics say why the library is unavailable.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from simrun import flow_events, kernels, launches

from torch_mspti_cli.check import check_trace

WORKLOAD = """
with record_function("phase"):
    for i in range(3):
        launch(f"NoLib_{i}")
        torch.ones(3) * 2
"""


def _run_without_library(tmp_path: Path, library: str | None) -> simrun.SimResult:
    run = simrun.run(WORKLOAD, tmp_path, library=library)
    assert run.returncode == 0
    return run


def _assert_cpu_only_trace_with_one_warning_and_a_reason(run: simrun.SimResult) -> str:
    trace = run.trace
    ops = simrun.cpu_ops(trace)
    assert any(op["name"] == "simrun::launch" for op in ops), "the CPU half of the trace is missing"
    assert not kernels(trace) and not launches(trace)
    assert not flow_events(trace, "s") and not flow_events(trace, "f")
    report = check_trace(trace, allow_empty=True)  # structurally valid; failing only for its failed session
    assert set(report.counts_by_rule) == {"session-failed"}, report.to_dict()
    assert run.profiles[0]["kernels"] == []

    doctor = run.doctor_warnings()
    assert len(doctor) == 1, f"expected exactly one `torch-mspti doctor` warning, got {doctor}"

    lib = run.diagnostics["library"]
    assert lib["available"] is False, lib
    assert isinstance(lib["reason"], str) and lib["reason"].strip(), lib
    assert lib["fix"], lib
    session = run.diagnostics["last_session"]
    assert session is not None and session["rows"]["kernels"] == 0
    return lib["reason"]


def test_nonexistent_explicit_library_gives_cpu_only_trace_one_warning_and_reason(tmp_path):
    run = _run_without_library(tmp_path, "/nonexistent/libmspti.so")
    reason = _assert_cpu_only_trace_with_one_warning_and_a_reason(run)
    assert "/nonexistent/libmspti.so" in reason


def test_no_explicit_library_and_no_cann_gives_cpu_only_trace_one_warning_and_reason(tmp_path):
    if Path("/usr/local/Ascend").exists():
        pytest.skip(
            "needs a machine without CANN: the plugin searches /usr/local/Ascend, where this machine has a real libmspti.so that it would load"
        )
    run = _run_without_library(tmp_path, None)
    _assert_cpu_only_trace_with_one_warning_and_a_reason(run)
    candidates = run.diagnostics["library"]["candidates"]
    assert candidates and all(c["outcome"] != "loaded" for c in candidates)
    assert all(c["source"] != "explicit" for c in candidates)


def test_explicit_library_that_is_a_directory_or_not_a_library_gives_distinct_reasons(tmp_path):
    directory = tmp_path / "libdir"
    directory.mkdir()
    not_a_library = tmp_path / "libmspti.so"
    not_a_library.write_text("this is not an ELF shared object\n")
    reasons = {}
    for label, path in (("directory", directory), ("not-a-library", not_a_library)):
        run = _run_without_library(tmp_path / label, str(path))
        reasons[label] = _assert_cpu_only_trace_with_one_warning_and_a_reason(run)
    assert reasons["directory"] != reasons["not-a-library"], reasons
    assert "director" in reasons["directory"].lower(), reasons
    # neither is mistaken for a missing file
    assert all("no such file" not in r.lower() for r in reasons.values()), reasons


_LATE_LIBRARY_CHILD = """
import json, os, sys, types, warnings
import torch, torch_mspti
from torch.profiler import ProfilerActivity, profile
os.environ["TORCH_MSPTI_LIBRARY"] = torch_mspti.simulator_library()  # after import: too late
torch.utils.rename_privateuse1_backend("npu")
mod = types.ModuleType("npu")
mod.synchronize = lambda *a, **k: None
torch._register_device_module("npu", mod)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        torch.ones(3) * 2
lib = torch_mspti.diagnostics(load_library=False).to_dict()["library"]
print(json.dumps({"warnings": [str(w.message) for w in caught], "reason": lib["reason"], "fix": lib["fix"],
                  "available": lib["available"], "library": os.environ["TORCH_MSPTI_LIBRARY"]}))
"""


def test_library_variable_set_after_import_is_named_with_use_library(tmp_path):
    if Path("/usr/local/Ascend").exists():
        pytest.skip(
            "needs a machine without CANN: the plugin searches /usr/local/Ascend, where this machine has a real libmspti.so that it would load"
        )
    proc = subprocess.run(
        [sys.executable, "-c", _LATE_LIBRARY_CHILD],
        capture_output=True,
        text=True,
        timeout=180,
        env=simrun.clean_environment(),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["available"] is False, out
    told = [out["reason"], out["fix"]] + [ln for ln in proc.stderr.splitlines() if "torch-mspti" in ln]
    told += [w for w in out["warnings"] if "torch-mspti" in w]
    warned = [t for t in told[2:] if "NPU lane" in t or "collected nothing" in t]
    assert warned, proc.stderr
    for text in [out["reason"], warned[0]]:
        assert "TORCH_MSPTI_LIBRARY" in text and "after torch_mspti was imported" in text, text
        assert f"torch_mspti.use_library('{out['library']}')" in text, text
    assert "use_library" in out["fix"], out["fix"]


def test_a_device_profile_with_no_privateuse1_backend_named_gives_one_warning_and_a_reason(tmp_path):
    # Neither torch_npu nor the simulator named the backend: torch drops ProfilerActivity.PrivateUse1
    # before kineto, so no device session starts; the user is told once why, diagnostics keep it.
    run = simrun.run(WORKLOAD, tmp_path, rename=False, profiles=2)
    assert [p["session"] for p in run.profiles] == [None, None]
    told = [w for w in run.warnings + run.stderr.splitlines() if "PrivateUse1 backend is not named" in w]
    assert len(told) == 1, run.warnings + run.stderr.splitlines()[-20:]
    assert "import torch_npu" in told[0].lower() or "Import torch_npu" in told[0], told[0]
    assert "torch_mspti.sim.enable()" in told[0], told[0]
    plugin = run.diagnostics["plugin"]
    assert run.diagnostics["last_session"] is None and plugin["backend_named"] is False, plugin
    assert "PrivateUse1 backend is not named" in (plugin["no_device_session_reason"] or ""), plugin
    assert "PrivateUse1 backend is not named" in run.diagnostics_repr, run.diagnostics_repr


def test_a_cpu_only_profile_with_no_backend_named_hears_nothing_from_us(tmp_path):
    # A profile that did not ask for PrivateUse1 lost nothing: no warning of ours.
    run = simrun.run(WORKLOAD, tmp_path, rename=False, activities=("CPU",))
    assert [p["session"] for p in run.profiles] == [None]
    ours = [w for w in run.warnings + run.stderr.splitlines() if "torch-mspti" in w]
    assert not ours, ours
    assert run.diagnostics["last_session"] is None
    assert run.diagnostics["plugin"]["no_device_session_reason"] is None, run.diagnostics["plugin"]


_LOST_THEN_FOUND = """
import json, warnings
import torch, torch_mspti
from torch.profiler import ProfilerActivity, profile
A = ProfilerActivity
out = {}
warnings.filterwarnings("error", message="torch-mspti")
try:
    profile(activities=[A.CPU, A.CUDA, A.PrivateUse1])
    out["raised"] = None
except UserWarning as w:
    out["raised"] = str(w)
warnings.resetwarnings()
with profile(activities=[A.CPU, A.PrivateUse1]):  # unnamed backend: lost
    torch.ones(2) + 1
out["after_unnamed"] = torch_mspti.diagnostics().plugin.no_device_session_reason
torch_mspti.sim.enable(launch_mode="direct")
unused = profile(activities=[A.CPU, A.CUDA, A.PrivateUse1])  # made, never started
with profile(activities=[A.CPU, A.PrivateUse1]):
    torch.ones(2, device="npu") + 1
out["after_good"] = torch_mspti.diagnostics().plugin.no_device_session_reason
with profile(activities=[A.CPU]):
    torch.ones(2) + 1
out["after_cpu_only"] = torch_mspti.diagnostics().plugin.no_device_session_reason
print(json.dumps(out))
"""


def test_the_reason_is_the_latest_started_profiles_and_a_warning_filter_can_raise_it(tmp_path):
    # The warning is not swallowed by a filter that makes it an error; diagnostics follow the profile
    # that started last, not the one made last, and a CPU-only profile clears the reason.
    proc = subprocess.run(
        [sys.executable, "-c", _LOST_THEN_FOUND],
        capture_output=True,
        text=True,
        timeout=180,
        env=simrun.clean_environment(),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["raised"] and "backend is not named" in out["raised"], out  # before sim.enable(): unnamed
    assert "backend is not named" in (out["after_unnamed"] or ""), out
    assert out["after_good"] is None and out["after_cpu_only"] is None, out


def test_cuda_beside_privateuse1_is_named_as_why_the_npu_lane_is_empty(tmp_path):
    # torch.profiler takes CUDA before PrivateUse1 and, with no CUDA, profiles no device: the user is
    # told once, the trace says why, and check/doctor read it there instead of asking whether
    # PrivateUse1 was among the activities (it was).
    run = simrun.run(WORKLOAD, tmp_path, activities=("CPU", "CUDA", "PrivateUse1"), profiles=2)
    assert [p["session"] for p in run.profiles] == [None, None]
    told = [w for w in run.warnings + run.stderr.splitlines() if "took ProfilerActivity.CUDA" in w]
    assert len(told) == 1, run.warnings + run.stderr.splitlines()[-20:]
    assert "Remove ProfilerActivity.CUDA" in told[0], told[0]
    reason = run.diagnostics["plugin"]["no_device_session_reason"] or ""
    assert "took ProfilerActivity.CUDA" in reason, run.diagnostics["plugin"]
    assert "took ProfilerActivity.CUDA" in run.trace.get("torch_mspti_no_npu_lane", ""), sorted(run.trace)
    report = check_trace(run.trace)
    messages = [p.message for p in report.problems if p.rule == "no-device-activity"]
    assert len(messages) == 1 and "took ProfilerActivity.CUDA" in messages[0], report.to_dict()
    assert "was ProfilerActivity.PrivateUse1 among the activities" not in messages[0]
    doctor = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "doctor", str(run.trace_paths[-1]), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    verdict = json.loads(doctor.stdout)["verdict"]
    assert doctor.returncode == 1 and "Remove ProfilerActivity.CUDA" in verdict, doctor.stdout[-2000:]


def test_a_named_backend_gives_no_unnamed_backend_reason(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path)
    assert run.profiles[0]["session"] is not None
    assert not [w for w in run.warnings + run.stderr.splitlines() if "backend is not named" in w]
    assert run.diagnostics["plugin"]["no_device_session_reason"] is None
