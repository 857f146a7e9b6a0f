"""The torch-mspti command line: exit codes, JSON schemas, output that fits the terminal without
breaking words, no tracebacks, no torch import for --help/--version/check."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import torch_mspti
import torch_mspti_cli as cli_main_module
from torch_mspti_cli import cmd_doctor as cli
from torch_mspti_cli import main

sys.path.insert(0, str(Path(__file__).parent))
from test_check import make_trace

NOT_FOUND_LINE = "libmspti.so not found: source CANN's set_env.sh or set TORCH_MSPTI_LIBRARY"
LONG_CANDIDATE = "/usr/local/Ascend/ascend-toolkit/latest/lib64/" + "very-long-directory-name/" * 3 + "libmspti.so"

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
            "path": LONG_CANDIDATE,
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


@pytest.fixture(autouse=True)
def _columns(monkeypatch):
    """A known terminal width (the tests' output is not a terminal)."""
    monkeypatch.setenv("COLUMNS", "80")


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


def _run_module(*args: str, module: str = "torch_mspti_cli", **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=_package_env(**env),
        timeout=300,
    )


def _fits(out: str, columns: int) -> bool:
    """Every line fits, unless it holds a word too long for any line (a path, kept whole)."""
    return all(len(line) <= columns or max(map(len, line.split())) > columns // 2 for line in out.splitlines())


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
    assert _fits(out, 80)


def test_check_counts_one_problem_in_the_singular(tmp_path, capsys):
    assert main(["check", _write(tmp_path, _broken_trace(1))]) == 1
    out = capsys.readouterr().out
    assert "FAILED: 1 problem (flow-end-binding 1)" in out and "1 problems" not in out


def _cpu_only(trace: dict, health: dict | None = None) -> dict:
    trace["traceEvents"] = [
        e for e in trace["traceEvents"] if e.get("cat") not in ("kernel", "privateuse1_runtime", "ac2g")
    ]
    if health is None:
        del trace["torch_mspti"]
    else:
        trace["torch_mspti"] = json.dumps(health)
    return trace


def test_check_fails_a_trace_without_device_activity_unless_allowed(tmp_path, capsys):
    path = _write(tmp_path, _cpu_only(make_trace()))
    assert main(["check", path]) == 1
    out = capsys.readouterr().out
    assert "no-device-activity" in out and "--allow-empty" in out and "OK" not in out
    assert main(["check", path, "--allow-empty"]) == 0
    assert "OK: no problems found" in capsys.readouterr().out


@pytest.mark.parametrize("allow_empty", [False, True])
def test_check_never_passes_an_empty_list(tmp_path, capsys, allow_empty):
    path = _write(tmp_path, [])
    assert main(["check", path, "--json"] + (["--allow-empty"] if allow_empty else [])) == 1
    assert json.loads(capsys.readouterr().out)["counts_by_rule"] == {"trace-empty": 1}


def test_check_fails_a_trace_whose_health_report_says_the_session_failed(tmp_path, capsys):
    health = {"state": "failed", "errors": ["MSPTI unavailable: another tool holds the subscriber"]}
    path = _write(tmp_path, _cpu_only(make_trace(), health))
    assert main(["check", path, "--allow-empty"]) == 1
    out = capsys.readouterr().out
    assert "session-failed" in out and "another tool holds the subscriber" in out and "OK" not in out


def test_check_reports_a_missing_health_report_and_no_linked_kernel(tmp_path, capsys):
    trace = make_trace()
    del trace["torch_mspti"]
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            del e["args"]["External id"]
    assert main(["check", _write(tmp_path, trace)]) == 0
    out = capsys.readouterr().out
    assert "health-report-missing" in out and "no-kernel-linked" in out and "TASK_QUEUE_ENABLE=0" in out
    assert "OK with 2 warnings" in out and "no problems found" not in out


def test_check_summarises_the_health_report(tmp_path, capsys):
    trace = make_trace()
    trace["torch_mspti"] = json.dumps(
        {
            "state": "processed",
            "dropped": {"out_of_window": 4, "duplicates": 0},
            "repaired": {"overlaps": 2},
            "drain": {"order": "disable_first", "exit_reason": "balanced", "flushes": 3, "ms": 20.5},
            "a_counter_added_later": 9,
        }
    )
    assert main(["check", _write(tmp_path, trace)]) == 0
    out = capsys.readouterr().out
    for text in (
        "out_of_window 4",
        "overlaps 2",
        "balanced (disable_first) after 3 flushes, 20.5 ms",
        "a_counter_added_later 9",
    ):
        assert text in out, out


def test_check_json_schema(tmp_path, capsys):
    path = _write(tmp_path, _broken_trace(3))
    assert main(["check", path, "--json", "--max-problems", "1"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {
        "trace",
        "ok",
        "problem_count",
        "omitted",
        "counts_by_rule",
        "problems",
        "warnings",
        "stats",
        "health",
    }
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
        "link_states",
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
    assert main(["doctor", path, "--probe"]) == 2
    capsys.readouterr()


def test_no_command_prints_the_help_and_exits_0(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: torch-mspti") and all(c in out for c in ("doctor", "check", "demo"))


def test_demo_help_shows_every_default(capsys):
    parser = cli_main_module.build_parser()
    demo = parser._subparsers._group_actions[0].choices["demo"]
    options = [a for a in demo._actions if a.option_strings and a.dest != "help"]
    assert {a.dest for a in options} == {
        "workload",
        "steps",
        "size",
        "out",
        "device",
        "launch_mode",
        "ranks",
        "memcpy",
        "cann_root",
    }
    for action in options:
        assert "(default: " in action.help, action.dest
    assert main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "phases 1, mlp 3, transformer 3" in text and "phases 1024, mlp 256, transformer 128" in text


@pytest.mark.parametrize(
    "argv", [["--help"], ["--version"], ["check", "TRACE"], []], ids=["help", "version", "check", "none"]
)
def test_commands_that_must_be_fast_never_import_torch(tmp_path, argv):
    poisoned = tmp_path / "poison" / "torch"
    poisoned.mkdir(parents=True)
    (poisoned / "__init__.py").write_text("raise ImportError('torch imported by a torch-free command')\n")
    argv = [_write(tmp_path, make_trace()) if a == "TRACE" else a for a in argv]
    env = _package_env()
    env["PYTHONPATH"] = os.pathsep.join([str(poisoned.parent), env["PYTHONPATH"]])
    r = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", *argv], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert "torch imported" not in r.stderr and r.stdout
    # control: the poisoned torch does break a command that needs torch
    control = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "doctor"], capture_output=True, text=True, env=env, timeout=120
    )
    assert control.returncode == 1 and "torch imported by a torch-free command" in control.stderr


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


def test_python_m_torch_mspti_names_the_command_line(tmp_path):
    # The library never imports the CLI (tests/test_layering.py), so `python -m torch_mspti` only
    # says where the command line is.
    good = _write(tmp_path, make_trace())
    r = _run_module("check", good, module="torch_mspti")
    assert r.returncode == 2 and "python -m torch_mspti_cli" in r.stderr and f"torch-mspti check {good}" in r.stderr


# ------------------------------------------------------------------------------------ doctor


def test_doctor_json_when_collection_is_possible(fake_diagnostics, capsys):
    fake_diagnostics(AVAILABLE)
    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"library", "plugin", "last_session", "totals", "bypass", "ok"} <= set(doc)
    assert doc["ok"] is True and doc["bypass"] == []
    assert doc["library"]["capabilities"]["kernel"] is True


def _verdict(out: str) -> str:
    """The verdict paragraph (the last one), unwrapped."""
    lines = out.rstrip("\n").split("\n")
    start = max(i for i, line in enumerate(lines) if line.startswith(("OK: ", "NOT READY: ", "PROBLEM: ")))
    return " ".join(line.strip() for line in lines[start:])


def test_doctor_missing_library_exits_1_with_reason_and_fix(fake_diagnostics, capsys):
    fake_diagnostics(missing_library())
    assert main(["doctor", "--json"]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["ok"] is False and doc["library"]["available"] is False
    assert captured.err.startswith(NOT_FOUND_LINE) and captured.err.count("\n") == 1

    assert main(["doctor"]) == 1
    assert _verdict(capsys.readouterr().out).startswith(f"NOT READY: {NOT_FOUND_LINE}")


def test_doctor_without_a_library_points_at_the_simulator(fake_diagnostics, capsys):
    fake_diagnostics(missing_library())
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    verdict = _verdict(out)
    assert "simulated NPU" in verdict and "torch-mspti doctor --probe" in verdict
    assert "Simulator (no NPU needed)" in out and "26.1" in out


@pytest.mark.parametrize("columns", [80, 200])
def test_doctor_uses_the_terminal_width_and_never_breaks_a_word(fake_diagnostics, capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    for data in (AVAILABLE, missing_library()):
        fake_diagnostics(data)
        main(["doctor"])
        out = capsys.readouterr().out
        lines = out.splitlines()
        assert _fits(out, columns), out
        words = {w for line in lines for w in line.split()}
        for path in [c["path"] for c in data["library"]["candidates"]] + [data["library"]["path"]]:
            assert path is None or path in words, path
        assert len(_verdict(out)) > 80  # the verdict is long, so it really was wrapped or not
        if columns == 200:
            assert max(len(line) for line in lines) > 80  # the width is used
    verdict_lines = [ln for ln in lines if ln.startswith("NOT READY: ")]
    assert len(verdict_lines) == 1


def test_doctor_verdict_reflects_the_backend_name(fake_diagnostics, capsys):
    data = copy.deepcopy(AVAILABLE)
    data["plugin"].update(privateuse1_backend="privateuseone", backend_named=False)
    fake_diagnostics(data)
    assert main(["doctor"]) == 0
    verdict = _verdict(capsys.readouterr().out)
    assert verdict.startswith("OK: ") and "not verified by a session" in verdict and "'privateuseone'" in verdict


def test_doctor_fails_when_kineto_used_another_profiler(fake_diagnostics, capsys):
    data = copy.deepcopy(AVAILABLE)
    data["plugin"]["last_trace_used_ours"] = False
    fake_diagnostics(data)
    assert main(["doctor"]) == 1
    assert "another PrivateUse1 profiler" in _verdict(capsys.readouterr().out)


def test_doctor_names_a_simulated_library(fake_diagnostics, capsys):
    data = copy.deepcopy(AVAILABLE)
    data["library"]["path"] = torch_mspti.simulator_library("8.1")
    fake_diagnostics(data)
    assert main(["doctor"]) == 0
    verdict = _verdict(capsys.readouterr().out)
    assert "the simulated MSPTI 8.1" in verdict and "torch_mspti.sim" in verdict


def test_doctor_says_where_a_session_can_be_seen(fake_diagnostics, capsys):
    fake_diagnostics(missing_library())
    main(["doctor"])
    text = " ".join(capsys.readouterr().out.split())
    assert "none in this process" in text
    assert all(s in text for s in ("doctor --probe", "doctor TRACE.json", "torch_mspti.diagnostics()"))


def test_doctor_report_shows_session_and_capabilities(fake_diagnostics, capsys):
    fake_diagnostics(AVAILABLE)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for text in (
        "link_ratio 0.983",
        "quiet",
        "memcpy_memset yes",
        "msptiActivityEnableMarkerDomain",
        "ASCEND_TOOLKIT_HOME",
    ):
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
        [sys.executable, "-m", "torch_mspti_cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=_package_env(TORCH_MSPTI_LIBRARY="/nonexistent/libmspti.so"),
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["library"]["available"] is False and doc["ok"] is False
    assert "Traceback" not in r.stderr


# ------------------------------------------------------------------------------ doctor TRACE.json


def test_doctor_explains_a_good_trace_from_its_health_report(tmp_path, capsys):
    trace = make_trace(ops=4)
    trace["torch_mspti"] = json.dumps(
        {
            "library": {"available": True, "path": "/opt/x/libmspti.so"},
            "state": "stopped",
            "drain": {"exit_reason": "balanced", "pending_launches": 0},
        }
    )
    assert main(["doctor", _write(tmp_path, trace)]) == 0
    out = capsys.readouterr().out
    assert "/opt/x/libmspti.so" in out
    verdict = _verdict(out)
    assert verdict.startswith("OK: the trace holds 4 kernels on 1 device, 100.0% linked") and "balanced" in verdict


@pytest.mark.parametrize(
    "health, expected",
    [
        (None, "did not serve it"),
        ({"state": "failed", "errors": ["MSPTI unavailable: libmspti.so not found"]}, "libmspti.so not found"),
        ({"state": "stopped", "records": 0}, "did the profiled code run on the NPU?"),
    ],
    ids=["no-health-report", "session-failed", "nothing-ran"],
)
def test_doctor_explains_why_a_trace_has_no_npu_lane(tmp_path, capsys, health, expected):
    path = _write(tmp_path, _cpu_only(make_trace(), health))
    assert main(["doctor", path]) == 1
    verdict = _verdict(capsys.readouterr().out)
    assert verdict.startswith("PROBLEM: ") and expected in verdict
    assert main(["doctor", path, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and expected in doc["verdict"] and doc["check"]["stats"]["kernels"] == 0


@pytest.mark.parametrize(
    "domains, shown",
    [
        ({"setting": "", "applied": True, "note": ""}, "all domains (marker_domains unset), applied"),
        (
            {"setting": "include:hccl", "applied": False, "note": "cannot be applied"},
            "include:hccl, not applied; cannot be applied",
        ),
    ],
    ids=["unset", "not-applied"],
)
def test_doctor_shows_the_marker_domain_setting_without_blank_fields(tmp_path, capsys, domains, shown):
    trace = make_trace()
    trace["torch_mspti"] = {"state": "stopped", "marker_domains": domains}
    main(["doctor", _write(tmp_path, trace)])
    out = capsys.readouterr().out
    assert re.search(r"^ *marker domains +" + re.escape(shown) + "$", out, re.M), out


def test_doctor_reports_lost_kernels_from_the_drain(tmp_path, capsys):
    trace = make_trace()
    trace["torch_mspti"] = {"state": "stopped", "drain": {"exit_reason": "timeout", "pending_launches": 2}}
    assert main(["doctor", _write(tmp_path, trace)]) == 1
    assert "2 launch(es) had no device row" in _verdict(capsys.readouterr().out)


def test_doctor_on_an_unreadable_trace_exits_2(tmp_path, capsys):
    assert main(["doctor", str(tmp_path / "absent.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err


# ------------------------------------------------------------------------------ doctor --probe


def test_probe_verdicts():
    from torch_mspti_cli import _doctor_probe

    health = {"state": "stopped", "errors": [], "drain": {"exit_reason": "balanced", "ms": 21.0, "pending_launches": 0}}
    good = {
        "device": "sim",
        "diagnostics": {"library": AVAILABLE["library"], "plugin": AVAILABLE["plugin"]},
        "check": {"ok": True, "stats": {"kernels": 9, "linked_kernels": 9, "link_ratio": 1.0}, "health": health},
    }
    ok, line = _doctor_probe.probe_verdict(good)
    assert ok and "9 kernels in its trace, 100.0% linked" in line and "balanced" in line and "no real NPU" in line
    for where, change, expected in [
        (None, {"error": "cannot use device 'real': no NPU"}, "no NPU"),
        ("plugin", {"backend_named": False, "privateuse1_backend": "privateuseone"}, "stayed 'privateuseone'"),
        ("plugin", {"last_trace_used_ours": False}, "another PrivateUse1 profiler"),
        ("check", {"health": None}, "no torch-mspti health report"),
        ("check", {"health": {"state": "failed", "errors": ["MSPTI unavailable"]}}, "MSPTI unavailable"),
        ("check", {"stats": {"kernels": 0}}, "no kernel"),
        ("check", {"health": {**health, "drain": {"exit_reason": "timeout", "pending_launches": 2}}}, "2 of the probe"),
    ]:
        bad = copy.deepcopy(good)
        if where is None:
            bad.update(change)
        elif where == "plugin":
            bad["diagnostics"]["plugin"] = {**bad["diagnostics"]["plugin"], **change}
        else:
            bad["check"].update(change)
        ok, line = _doctor_probe.probe_verdict(bad)
        assert not ok and expected in line, (change, line)


def test_doctor_probe_profiles_the_simulator_in_a_child_process(capsys):
    import torch

    before = torch._C._get_privateuse1_backend_name()
    assert main(["doctor", "--probe", "--device", "sim", "--json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    probe = doc["probe"]
    assert doc["ok"] is True and probe["device"] == "sim" and probe["error"] is None
    stats, health = probe["check"]["stats"], probe["check"]["health"]
    # every kernel the simulated device launched inside the profile is in the trace, linked
    assert stats["kernels"] == probe["device_counters"]["kernels"] > 0
    assert stats["linked_kernels"] == stats["kernels"] and health["drain"]["pending_launches"] == 0
    plugin = probe["diagnostics"]["plugin"]
    assert plugin["privateuse1_backend"] == "npu" and plugin["last_trace_used_ours"] is True
    assert probe["diagnostics"]["library"]["capabilities"]["kernel"] is True
    assert probe["check"]["ok"] is True
    # the doctor's own process was not renamed
    assert torch._C._get_privateuse1_backend_name() == before == "privateuseone"


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
