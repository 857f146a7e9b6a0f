"""Links and the lanes the plugin owns on the simulated NPU, in both launch modes.

* queued (torch_npu's TASK_QUEUE_ENABLE=1): every kernel is launched by the task-queue worker,
  which runs no op. Its launch events sit on the worker's own lane "NPU launch thread <tid>" at
  their host time (after the op that enqueued them, before the kernel starts), with arrows and no
  External id; key_averages() credits no op with device time; one warning per session names
  TASK_QUEUE_ENABLE=0, and `torch-mspti doctor TRACE` says the same.
* direct (TASK_QUEUE_ENABLE=0): ops launch their own kernels and are linked; the allocator's
  housekeeping MemSet, launched by a helper thread that runs no op, is unlinked with its reason
  and is not blamed on a task queue (plugin, doctor and demo).
* thread names: each lane the plugin owns (a stream, a launch thread) has one name, the same in
  every trace; host threads that run ops keep the names kineto gives them (the plugin adds none).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from op_links import state_problems
from sim_support import require_simulator, result, run_checks, run_demo
from simrun import TS_TOL_US, events, flow_events, flow_id, kernels, launches, metadata

from torch_mspti_cli import main as cli_main

TASK_QUEUE_FIX = "TASK_QUEUE_ENABLE=0"

CHECKS = r"""
import os, sys, tempfile, warnings
from torch.profiler import profile, ProfilerActivity
import torch_mspti
ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
OUT = os.environ["LINKS_OUT"]
COUNT = [0]

def _profile(fn, acts=ACT):
    # The plugin's warnings are C++ warnings: on fd 2, or Python warnings when a handler is set.
    with tempfile.TemporaryFile(mode="w+") as err, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            with profile(activities=acts) as prof:
                fn()
                torch.npu.synchronize()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        messages = err.read().splitlines() + [str(w.message) for w in caught]
    COUNT[0] += 1
    path = os.path.join(OUT, f"trace_{COUNT[0]}.json")
    prof.export_chrome_trace(path)
    cpu = torch.autograd.DeviceType.CPU
    credited = [(e.key, e.device_time_total) for e in prof.key_averages() if e.device_type == cpu and e.device_time_total]
    session = torch_mspti.diagnostics(load_library=False).to_dict()["last_session"]
    return {"trace": path, "warnings": [m for m in messages if "torch-mspti:" in m], "credited": credited,
            "session": session}

def _ops():
    a = torch.randn(64, 64, device="npu"); b = torch.randn(64, 64, device="npu")
    for _ in range(12):
        torch.add(a, b); torch.mul(a, b); torch.sub(a, b)
        torch.empty(1024, device="npu")  # allocations: every 8th launches a housekeeping MemSet

def _train():
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).npu()
    x = torch.randn(8, 16, device="npu")
    for _ in range(3):
        m(x).pow(2).mean().backward()
        torch.empty(1024, device="npu")

def check_sessions():
    _train(); _ops(); torch.npu.synchronize()  # warm-up: the device threads exist before profiling
    return [_profile(_ops), _profile(_train), _profile(_train, [ProfilerActivity.CPU])]
"""


def _sessions(launch_mode: str, out: Path) -> list[dict]:
    """[ops profile, training profile, CPU-only training profile] of one child in ``launch_mode``."""
    require_simulator()
    r = run_checks(
        CHECKS, {"launch_mode": launch_mode, "housekeeping_every": 8}, env={"LINKS_OUT": str(out)}, timeout=300
    )
    sessions = result(r, "sessions")
    for s in sessions:
        s["path"] = s["trace"]
        s["trace"] = json.loads(Path(s["trace"]).read_text())
    return sessions


@pytest.fixture(scope="module")
def queued(tmp_path_factory) -> list[dict]:
    return _sessions("queued", tmp_path_factory.mktemp("sim_queued"))


@pytest.fixture(scope="module")
def direct(tmp_path_factory) -> list[dict]:
    return _sessions("direct", tmp_path_factory.mktemp("sim_direct"))


@pytest.fixture(params=["queued", "direct"])
def mode(request) -> tuple[str, list[dict]]:
    return request.param, request.getfixturevalue(request.param)


def _launch_lane_tids(trace) -> set:
    op_lanes = {(e["pid"], e["tid"]) for e in events(trace) if e.get("cat") in ("cpu_op", "user_annotation")}
    return {ev["tid"] for ev in launches(trace) if (ev["pid"], ev["tid"]) not in op_lanes}


def _names(trace) -> dict:
    names = defaultdict(list)
    for e in metadata(trace, "thread_name"):
        names[(e["pid"], e["tid"])].append(e["args"]["name"])
    return names


def test_every_row_has_a_counted_state(mode):
    _, sessions = mode
    for s in sessions[:2]:
        assert not state_problems(s["trace"], s["session"]), state_problems(s["trace"], s["session"])


def test_queued_launches_are_on_the_worker_lane_between_enqueue_and_kernel(queued):
    trace = queued[0]["trace"]
    ops = {
        name: sorted((e for e in events(trace) if e.get("name") == f"aten::{name}"), key=lambda e: e["ts"])
        for name in ("add", "mul", "sub")
    }
    by_corr = {ev["args"]["correlation"]: ev for ev in launches(trace)}
    starts = {f["id"]: f for f in flow_events(trace, "s")}
    ends = {f["id"]: f for f in flow_events(trace, "f")}
    lanes = _launch_lane_tids(trace)
    assert lanes, "no launch-thread lane"
    names = _names(trace)
    pid = next(e["pid"] for e in events(trace) if e.get("cat") == "cpu_op")
    for tid in lanes:
        assert names[(pid, tid)] == [f"NPU launch thread {tid}"], names[(pid, tid)]
    for name, kernel in (("add", "Add"), ("mul", "Mul"), ("sub", "Sub")):
        ks = sorted(
            (k for k in kernels(trace) if k["name"] == kernel), key=lambda k: by_corr[k["args"]["correlation"]]["ts"]
        )
        assert len(ks) == len(ops[name]) == 12, (kernel, len(ks), len(ops[name]))
        for op, k in zip(ops[name], ks, strict=True):  # one FIFO queue: the n-th op's launch is the n-th
            launch = by_corr[k["args"]["correlation"]]
            assert "External id" not in k["args"] and "External id" not in launch["args"], (k, launch)
            assert k["args"]["link"] == "no_op_on_thread", k
            assert launch["tid"] in lanes and launch["pid"] == pid, launch
            assert op["ts"] - TS_TOL_US <= launch["ts"] <= k["ts"] + TS_TOL_US, (op, launch, k)
            cid = flow_id(k["args"]["correlation"])
            assert (starts[cid]["tid"], starts[cid]["ts"]) == (launch["tid"], launch["ts"])
            assert (ends[cid]["pid"], ends[cid]["tid"], ends[cid]["ts"]) == (k["pid"], k["tid"], k["ts"])


def test_queued_launches_credit_no_op_and_warn_once_per_session(queued):
    for s in queued[:2]:
        assert s["credited"] == [], s["credited"][:5]
        assert s["session"]["linked_rows"] == 0, s["session"]["links"]
        hits = [w for w in s["warnings"] if TASK_QUEUE_FIX in w]
        assert len(hits) == 1, s["warnings"]


def test_doctor_explains_the_queued_trace_and_not_the_direct_one(mode, capsys):
    launch_mode, sessions = mode
    assert cli_main(["doctor", sessions[0]["path"]]) == 0
    text = capsys.readouterr().out
    assert (TASK_QUEUE_FIX in text) == (launch_mode == "queued"), text


def test_direct_mode_links_every_op_kernel_and_blames_no_task_queue_for_the_memset(direct):
    for s in direct[:2]:
        trace, session = s["trace"], s["session"]
        memsets = [k for k in kernels(trace) if k["name"] == "MemSet"]
        others = [k for k in kernels(trace) if k["name"] != "MemSet"]
        assert memsets, "no housekeeping MemSet in the profile"
        assert {k["args"]["link"] for k in memsets} == {"no_op_on_thread"}, memsets
        assert all("External id" not in k["args"] for k in memsets)
        assert {k["args"]["link"] for k in others} <= {"verified", "recovered"}, [
            k for k in others if k["args"]["link"] not in ("verified", "recovered")
        ]
        assert session["links"]["no_op_on_thread"] == len(memsets), session["links"]
        assert not [w for w in s["warnings"] if TASK_QUEUE_FIX in w], s["warnings"]
        assert s["credited"], "direct mode: ops get the device time of their kernels"
    # The ops profile: the n-th aten::add (mul, sub) launched the n-th Add (Mul, Sub) kernel.
    trace = direct[0]["trace"]
    for name, kernel in (("add", "Add"), ("mul", "Mul"), ("sub", "Sub")):
        ops = sorted((e for e in events(trace) if e.get("name") == f"aten::{name}"), key=lambda e: e["ts"])
        ks = sorted((k for k in kernels(trace) if k["name"] == kernel), key=lambda k: k["ts"])
        assert len(ops) == len(ks) == 12, (name, len(ops), len(ks))
        assert [k["args"].get("External id") for k in ks] == [op["args"]["External id"] for op in ops], kernel


def test_each_plugin_lane_has_one_name_the_same_in_every_trace(mode):
    _, sessions = mode
    seen: dict = {}
    for s in sessions[:2]:
        trace = s["trace"]
        names = _names(trace)
        devices = {k["pid"] for k in kernels(trace)}
        pid = next(e["pid"] for e in events(trace) if e.get("cat") == "cpu_op")
        owned = {lane: n for lane, n in names.items() if lane[0] in devices}
        owned.update({(pid, tid): names[(pid, tid)] for tid in _launch_lane_tids(trace)})
        for (p, tid), n in owned.items():
            want = f"stream {tid}" if p in devices else f"NPU launch thread {tid}"
            assert n == [want], (p, tid, n)
        for lane, n in owned.items():
            assert seen.setdefault(lane, n) == n, (lane, n, seen[lane])


def test_the_plugin_names_no_lane_of_a_thread_that_runs_ops(mode):
    _, sessions = mode
    npu, cpu_only = sessions[1]["trace"], sessions[2]["trace"]  # the same training step, same threads
    for trace in (sessions[0]["trace"], npu):
        op_lanes = {(e["pid"], e["tid"]) for e in events(trace) if e.get("cat") in ("cpu_op", "user_annotation")}
        for lane in op_lanes:
            plugin = [n for n in _names(trace).get(lane, []) if n.startswith(("NPU launch thread", "stream "))]
            assert not plugin, (lane, plugin)
    npu_names, cpu_names = _names(npu), _names(cpu_only)
    op_lanes = {(e["pid"], e["tid"]) for e in events(npu) if e.get("cat") == "cpu_op"}
    autograd = [lane for lane in op_lanes if any("pt_autograd" in n for n in npu_names[lane])]
    assert autograd, "the training profile has no autograd thread lane"
    for lane in op_lanes:
        assert set(npu_names[lane]) == set(cpu_names[lane]), (lane, npu_names[lane], cpu_names[lane])


@pytest.mark.parametrize("launch_mode", ["direct", "queued"])
def test_demo_blames_the_task_queue_only_in_queued_mode(launch_mode, tmp_path):
    require_simulator()
    proc, trace = run_demo(tmp_path / "trace.json", workload="transformer", launch_mode=launch_mode)
    text = proc.stdout + proc.stderr
    assert ("TASK_QUEUE_ENABLE" in text) == (launch_mode == "queued"), text
    assert ("queued launches" in text) == (launch_mode == "queued"), text
    memsets = [k for k in kernels(trace) if k["name"] == "MemSet"]
    assert memsets and {k["args"]["link"] for k in memsets} == {"no_op_on_thread"}, memsets
    if launch_mode == "direct":
        assert "launched from a thread that ran no op" in proc.stdout, proc.stdout
