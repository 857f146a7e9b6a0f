"""The torch-mspti command line: exit codes, JSON schemas, 80-column output, no tracebacks."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import torch_mspti
from torch_mspti import cli
from torch_mspti.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from test_check import make_trace

NOT_FOUND_LINE = "libmspti.so not found: source CANN's set_env.sh or set TORCH_MSPTI_LIBRARY"

AVAILABLE = {
    "library": {
        "available": True,
        "path": "/usr/local/Ascend/ascend-toolkit/latest/lib64/libmspti.so",
        "found_by": "ASCEND_TOOLKIT_HOME",
        "reason": None,
        "fix": None,
        "candidates": [
            {
                "path": "/opt/custom/libmspti.so",
                "source": "TORCH_MSPTI_LIBRARY",
                "outcome": "skipped",
                "reason": "not set",
            },
            {
                "path": "/usr/local/Ascend/ascend-toolkit/latest/lib64/libmspti.so",
                "source": "ASCEND_TOOLKIT_HOME",
                "outcome": "loaded",
                "reason": "all required symbols resolved",
            },
        ],
        "symbols": {
            "resolved": ["msptiSubscribe", "msptiActivityEnable"],
            "missing_required": [],
            "missing_optional": ["msptiActivityEnableMarkerDomain"],
        },
        "capabilities": {
            "kernel": True,
            "external_correlation": True,
            "api_records": True,
            "communication": False,
            "memcpy_memset": True,
            "is_enabled": False,
        },
        "version": "26.1",
    },
    "plugin": {
        "registered": True,
        "forwarded_to_kineto": True,
        "privateuse1_backend": "npu",
        "backend_named": True,
        "other_profiler": False,
        "mode": "auto",
        "sessions": 2,
        "last_trace_used_ours": True,
    },
    "last_session": {
        "state": "processed",
        "errors": [],
        "records_by_kind": {"kernel": 120, "external_correlation": 118},
        "kernels": 120,
        "linked_kernels": 118,
        "link_ratio": 118 / 120,
        "unlinked_kernels": 2,
        "out_of_window": 0,
        "invalid_timing": 0,
        "duplicates": 0,
        "mislinks_rejected": 0,
        "buffers": {"requested": 4, "completed": 4, "declined": 0},
        "records_dropped": 0,
        "drain": {
            "exit_reason": "quiet",
            "flushes": 3,
            "ms": 1.25,
            "records_during_drain": 7,
            "pending_launches": 0,
            "late_records": 0,
        },
    },
    "totals": {"records_by_kind": {"kernel": 240}, "kernels": 240, "linked_kernels": 236, "link_ratio": 236 / 240},
}


def missing_library() -> dict:
    d = copy.deepcopy(AVAILABLE)
    d["library"].update(
        available=False,
        path=None,
        found_by=None,
        version=None,
        reason="libmspti.so not found",
        fix="source CANN's set_env.sh or set TORCH_MSPTI_LIBRARY",
    )
    d["library"]["candidates"] = [
        {
            "path": "/usr/local/Ascend/ascend-toolkit/latest/lib64/" + "very-long-directory-name/" * 3 + "libmspti.so",
            "source": "default",
            "outcome": "rejected",
            "reason": "no such file",
        }
    ]
    d["last_session"] = None
    return d


class FakeDiagnostics:
    def __init__(self, data: dict) -> None:
        self._data = data

    def to_dict(self) -> dict:
        return copy.deepcopy(self._data)


@pytest.fixture
def fake_diagnostics(monkeypatch):
    """Install a fake ``torch_mspti.diagnostics`` returning the given dict."""

    def install(data: dict) -> None:
        monkeypatch.setattr(torch_mspti, "diagnostics", lambda: FakeDiagnostics(data), raising=False)

    return install


def _package_env(**extra: str) -> dict:
    """Environment for a child python that imports the same torch_mspti as this process."""
    env = dict(os.environ, **extra)
    root = str(Path(next(iter(torch_mspti.__path__))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _run_module(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_mspti", *args],
        capture_output=True,
        text=True,
        env=_package_env(**env),
        timeout=300,
    )


def _write(tmp_path: Path, trace) -> str:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    return str(path)


def _broken_trace(n_bad: int) -> dict:
    trace = make_trace(ops=n_bad)
    for e in trace["traceEvents"]:
        if e.get("ph") == "f":
            del e["bp"]
    return trace


# ------------------------------------------------------------------------------------ check


def test_check_accepts_a_good_trace(tmp_path, capsys):
    assert main(["check", _write(tmp_path, make_trace())]) == 0
    assert "OK: no problems found" in capsys.readouterr().out


def test_check_lists_first_problems_then_a_count(tmp_path, capsys):
    assert main(["check", _write(tmp_path, _broken_trace(5)), "--max-problems", "2"]) == 1
    out = capsys.readouterr().out
    assert out.count("flow-end-binding") >= 2 and "... and 3 more" in out and "FAILED: 5 problems" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_check_json_schema(tmp_path, capsys):
    path = _write(tmp_path, _broken_trace(3))
    assert main(["check", path, "--json", "--max-problems", "1"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"trace", "ok", "problem_count", "omitted", "counts_by_rule", "problems", "stats", "health"}
    assert doc["trace"] == path and doc["ok"] is False
    assert doc["problem_count"] == 3 and doc["omitted"] == 2 and doc["counts_by_rule"] == {"flow-end-binding": 3}
    assert set(doc["problems"][0]) == {"rule", "message", "event"}
    assert set(doc["stats"]) == {
        "events",
        "kernels",
        "linked_kernels",
        "link_ratio",
        "launches",
        "flows",
        "flow_finishes",
        "device_lanes",
        "streams",
    }


def test_check_min_link_ratio_fails_below_it(tmp_path, capsys):
    trace = make_trace(ops=4)
    del next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")["args"]["External id"]
    path = _write(tmp_path, trace)
    assert main(["check", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["link_ratio"] == 0.75
    assert main(["check", path, "--json", "--min-link-ratio", "0.8"]) == 1
    assert json.loads(capsys.readouterr().out)["counts_by_rule"] == {"link-ratio-below-min": 1}


@pytest.mark.parametrize("content", [None, "not json {", "[1, 2"], ids=["missing", "garbage", "truncated"])
def test_check_unreadable_input_exits_2_with_one_line(tmp_path, capsys, content):
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_text(content)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err


def test_check_usage_errors_exit_2(tmp_path, capsys):
    path = _write(tmp_path, make_trace())
    assert main(["check", path, "--min-link-ratio", "1.5"]) == 2
    assert main(["check", path, "--max-problems", "-1"]) == 2
    assert main([]) == 2
    capsys.readouterr()


def test_version_and_help_exit_0(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("torch-mspti ")
    assert main(["check", "--help"]) == 0
    assert "--min-link-ratio" in capsys.readouterr().out


def test_python_m_check_exit_codes(tmp_path):
    good = _write(tmp_path, make_trace())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_broken_trace(2)))
    assert _run_module("check", good).returncode == 0
    r = _run_module("check", str(bad), "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["counts_by_rule"] == {"flow-end-binding": 2}
    r = _run_module("check", str(tmp_path / "absent.json"))
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------ doctor


def test_doctor_json_when_collection_is_possible(fake_diagnostics, capsys):
    fake_diagnostics(AVAILABLE)
    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"library", "plugin", "last_session", "totals", "bypass", "ok"} <= set(doc)
    assert doc["ok"] is True and doc["bypass"] == []
    assert doc["library"]["capabilities"]["kernel"] is True


def test_doctor_missing_library_exits_1_with_reason_and_fix(fake_diagnostics, capsys):
    fake_diagnostics(missing_library())
    assert main(["doctor", "--json"]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["ok"] is False and doc["library"]["available"] is False
    assert captured.err == NOT_FOUND_LINE + "\n"

    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert f"NOT READY: {NOT_FOUND_LINE}" in out.splitlines()


def test_doctor_report_fits_80_columns(fake_diagnostics, capsys):
    for data in (AVAILABLE, missing_library()):
        fake_diagnostics(data)
        main(["doctor"])
        lines = capsys.readouterr().out.splitlines()
        verdict = [line for line in lines if line.startswith(("OK: ", "NOT READY: "))]
        assert len(verdict) == 1
        assert all(len(line) <= 80 for line in lines if line not in verdict)


def test_doctor_report_shows_session_and_capabilities(fake_diagnostics, capsys):
    fake_diagnostics(AVAILABLE)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for text in ("98.3%", "quiet", "memcpy_memset yes", "msptiActivityEnableMarkerDomain", "ASCEND_TOOLKIT_HOME"):
        assert text in out


def test_doctor_unregistered_plugin_exits_1(fake_diagnostics, capsys):
    data = copy.deepcopy(AVAILABLE)
    data["plugin"]["registered"] = False
    fake_diagnostics(data)
    assert main(["doctor", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ok"] is False
    assert captured.err.count("\n") == 1 and "not registered" in captured.err


def test_doctor_failing_diagnostics_is_one_line_not_a_traceback(monkeypatch, capsys):
    def boom():
        raise RuntimeError("extension not loaded\nsecond line")

    monkeypatch.setattr(torch_mspti, "diagnostics", boom, raising=False)
    assert main(["doctor"]) == 1
    err = capsys.readouterr().err
    assert err == "torch-mspti doctor: torch_mspti.diagnostics() failed: RuntimeError: extension not loaded\n"


def test_doctor_without_diagnostics_is_one_line(monkeypatch, capsys):
    monkeypatch.delattr(torch_mspti, "diagnostics", raising=False)
    assert main(["doctor", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ok"] is False
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_doctor_warns_about_transfer_to_npu(fake_diagnostics, monkeypatch, capsys):
    fake_diagnostics(AVAILABLE)
    monkeypatch.setitem(sys.modules, cli.TRANSFER_TO_NPU, types.ModuleType(cli.TRANSFER_TO_NPU))
    assert main(["doctor", "--json"]) == 0  # a warning, not a failure
    kinds = [b["kind"] for b in json.loads(capsys.readouterr().out)["bypass"]]
    assert kinds == ["transfer_to_npu"]
    main(["doctor"])
    assert "! torch_npu.contrib.transfer_to_npu is imported" in capsys.readouterr().out


def test_doctor_warns_when_torch_profiler_is_replaced(fake_diagnostics, monkeypatch, capsys):
    fake_diagnostics(AVAILABLE)
    foreign = type("profile", (), {"__module__": "torch_npu.profiler.profiler"})
    fake_torch = types.SimpleNamespace(profiler=types.SimpleNamespace(profile=foreign))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    main(["doctor", "--json"])
    bypass = json.loads(capsys.readouterr().out)["bypass"]
    assert [b["kind"] for b in bypass] == ["profiler_replaced"]
    assert "torch_npu.profiler.profiler" in bypass[0]["message"]


def test_doctor_warns_about_another_privateuse1_profiler(fake_diagnostics, capsys):
    data = copy.deepcopy(AVAILABLE)
    data["plugin"]["other_profiler"] = True
    fake_diagnostics(data)
    main(["doctor", "--json"])
    assert [b["kind"] for b in json.loads(capsys.readouterr().out)["bypass"]] == ["other_privateuse1_profiler"]


def test_real_doctor_without_library_exits_1():
    if getattr(torch_mspti, "__file__", None) is None:
        pytest.skip("torch_mspti is a bare source tree here (no __init__.py / built extension)")
    r = subprocess.run(
        [sys.executable, "-m", "torch_mspti", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=_package_env(TORCH_MSPTI_LIBRARY="/nonexistent/libmspti.so"),
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["library"]["available"] is False and doc["ok"] is False
    assert "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------ demo


def _fake_demo(monkeypatch, rc: int) -> list[dict]:
    """Replace torch_mspti.sim.demo by a stub whose run() records its keyword arguments."""
    calls = []
    demo = types.ModuleType("torch_mspti.sim.demo")
    demo.run = lambda **kw: calls.append(kw) or rc
    sim = types.ModuleType("torch_mspti.sim")
    sim.demo = demo
    monkeypatch.setitem(sys.modules, "torch_mspti.sim", sim)
    monkeypatch.setitem(sys.modules, "torch_mspti.sim.demo", demo)
    return calls


def test_demo_dispatches_to_the_simulator_and_returns_its_code(monkeypatch):
    calls = _fake_demo(monkeypatch, 3)
    argv = ["demo", "--workload", "mlp", "--steps", "4", "--size", "64", "--out", "t.json", "--device", "sim"]
    assert main(argv) == 3
    assert calls == [
        {"workload": "mlp", "steps": 4, "size": 64, "out": "t.json", "device": "sim", "launch_mode": "direct"}
    ]
    assert main(["demo"]) == 3
    assert calls[-1] == {"workload": "phases", "device": "auto", "launch_mode": "direct"}


def test_demo_passes_ranks_for_the_ddp_workload(monkeypatch):
    calls = _fake_demo(monkeypatch, 0)
    assert main(["demo", "--workload", "ddp", "--ranks", "4"]) == 0
    assert calls == [{"workload": "ddp", "ranks": 4, "device": "auto", "launch_mode": "direct"}]
    assert main(["demo", "--workload", "ddp", "--ranks", "0"]) == 2


@pytest.mark.parametrize(
    "text",
    [
        '{"traceEvents": [{"ph": [], "name": "x"}]}',
        '{"traceEvents": [{"ph": "X", "cat": ["kernel"], "name": "k", "ts": 1, "dur": 1, "pid": 0, "tid": 1}]}',
        "[" * 100000 + "]" * 100000,
    ],
)
def test_check_reports_a_malformed_trace_in_one_line_with_exit_2(tmp_path, capsys, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "malformed trace" in err[0], err
