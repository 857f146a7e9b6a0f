"""What a session tells its user comes from one table (src/core/SessionFindings.h): the warning
it gives, ``diagnostics().last_session.findings``, the trace's health report and
``torch-mspti doctor TRACE.json`` carry the same finding names and messages, and the README's
table is the plugin's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import simrun

import torch_mspti

REPO = Path(__file__).resolve().parent.parent
PREFIX = "torch-mspti: "


def _readme_table() -> str:
    rows = ["| finding | excludes others of | fix |", "|---|---|---|"]
    rows += [f"| `{f['name']}` | {f['group'] or '-'} | {f['fix']} |" for f in torch_mspti.findings()]
    return "\n".join(rows)


def test_the_readme_findings_table_is_the_plugins():
    names = [f["name"] for f in torch_mspti.findings()]
    assert len(names) == len(set(names)), names
    assert all(f["fix"] for f in torch_mspti.findings())
    assert _readme_table() in (REPO / "README.md").read_text(), (
        "README's findings table differs from torch_mspti.findings(); render it anew:\n" + _readme_table()
    )


def _doctor(trace: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "doctor", str(trace)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "1000"},
    )


def test_a_drain_finding_is_one_warning_and_the_same_text_everywhere(tmp_path):
    # No KERNEL record ever comes (the 26.x simulator withholds them without the preload), so the
    # drain times out: of the drain's findings only "no-kernels" is given (not also "timeout" or
    # "pending", which hold too).
    workload = 'for i in range(4):\n    launch({"name": f"Vec{i}", "stream": 2})\nsync()\n'
    run = simrun.run(workload, tmp_path, sim_options={"kernels_need_preload": 1}, config={"drain_timeout_ms": 200})
    session = run.diagnostics["last_session"]
    assert session["warnings"] == ["no-kernels"], session["warnings"]
    (given,) = session["findings"]
    assert given["name"] == "no-kernels" and given["message"].startswith(PREFIX), given
    assert "MSPTI reported 4 launches" in given["message"] and "drain_timeout_ms=200" in given["message"], given
    (warned,) = run.doctor_warnings()
    assert given["message"] in warned, (given, warned)
    health = json.loads(run.trace_paths[0].read_text())["torch_mspti"]
    health = json.loads(health) if isinstance(health, str) else health
    assert health["findings"] == [given] and health["warnings"] == ["no-kernels"], health
    proc = _doctor(run.trace_paths[0])
    rows = [ln for ln in proc.stdout.splitlines() if "finding" in ln and "no-kernels:" in ln]
    assert len(rows) == 1 and given["message"].removeprefix(PREFIX) in rows[0], proc.stdout
    # Launches are still pending, so the verdict is a problem, named by the session's finding.
    assert proc.returncode == 1, proc.stdout
    assert "PROBLEM: the session found no-kernels: MSPTI reported" in " ".join(proc.stdout.split()), proc.stdout


def test_the_doctor_names_the_sessions_first_finding_when_the_trace_is_sound(tmp_path):
    run = simrun.run('launch({"name": "Vec", "stream": 2})\nsync()\n', tmp_path)
    trace = json.loads(run.trace_paths[0].read_text())
    health = trace["torch_mspti"]
    health = json.loads(health) if isinstance(health, str) else health
    assert health["findings"] == [] and run.diagnostics["last_session"]["findings"] == [], health
    proc = _doctor(run.trace_paths[0])
    assert proc.returncode == 0 and "but the session found" not in proc.stdout, proc.stdout
    # The same trace with what a session would have said: the doctor's verdict names the first.
    health["findings"] = [
        {"name": "stale", "message": PREFIX + "3 records of an earlier session arrived in this one and were dropped"},
        {"name": "clock", "message": PREFIX + "MSPTI's API records are on an unknown host clock"},
    ]
    trace["torch_mspti"] = json.dumps(health)
    told = tmp_path / "told.json"
    told.write_text(json.dumps(trace))
    proc = _doctor(told)
    verdict = " ".join(proc.stdout.split("OK:")[-1].split())
    assert proc.returncode == 0, proc.stdout
    assert "but the session found stale: 3 records of an earlier session arrived" in verdict, proc.stdout
    assert "clock" not in verdict, proc.stdout


def test_without_torchs_op_ids_the_cause_named_is_that_setting_not_the_task_queue(tmp_path):
    # _ExperimentalConfig(disable_external_correlation=True): torch records its ops but passes none
    # to the profiler (kineto.md 4.1), so no kernel can be credited to one. The launches are made
    # inside ops on the op's own thread (direct mode): the task queue is not the cause and must not
    # be blamed; the session, its health report and the doctor name the setting instead.
    workload = 'for i in range(4):\n    launch({"name": f"Vec{i}", "stream": 2})\nsync()\n'
    run = simrun.run(workload, tmp_path, experimental_config={"disable_external_correlation": True})
    ops = [e for e in simrun.cpu_ops(run.trace) if e["name"] == "simrun::launch"]
    assert len(ops) == 4, "torch still records the ops"
    session = run.diagnostics["last_session"]
    assert session["warnings"] == ["no-op-ids"], session["warnings"]
    (given,) = session["findings"]
    assert "disable_external_correlation=True" in given["message"] and "TASK_QUEUE" not in given["message"], given
    proc = _doctor(run.trace_paths[0])
    assert "TASK_QUEUE_ENABLE" not in proc.stdout, proc.stdout
    assert "disable_external_correlation" in proc.stdout, proc.stdout


def test_launches_from_a_thread_of_the_users_are_not_blamed_on_torchs_setting(tmp_path):
    # Default settings, every launch made on a thread of the user's that torch does not profile
    # (no profile_all_threads), none on the profiling thread: no op was passed either, but the
    # cause is the thread, which the task-queue finding names, not disable_external_correlation.
    workload = (
        "import threading\n"
        "t = threading.Thread(target=lambda: [launch_bare({'name': f'V{i}', 'stream': 2}) for i in range(4)])\n"
        "t.start(); t.join()\nsync()\n"
    )
    run = simrun.run(workload, tmp_path)
    session = run.diagnostics["last_session"]
    assert session["warnings"] == ["task-queue"], session["warnings"]
