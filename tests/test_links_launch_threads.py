"""Launches from a thread that runs no op (torch_npu's task queue, a housekeeping thread).

Such a launch belongs to no op: its launch event sits on the launching thread's own lane ("NPU
launch thread <tid>") at the launch call's host time, with an arrow to its kernel(s), no External
id, and no device time credited to any op. When most device rows come from such threads, the
session warns once, naming TASK_QUEUE_ENABLE=0, and `torch-mspti doctor TRACE` explains the low
link ratio the same way. Here the task queue is a Python thread fed by a custom op, each launch
timed with the host clock (tests/link_workloads.py); tests/test_links_sim_device.py runs the
simulated NPU's own queue.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from link_workloads import queue_workload
from op_links import audit, plugin_warnings, state_problems
from simrun import TS_TOL_US, end, flow_events, flow_id, kernels, launches, metadata

from torch_mspti_cli import main as cli_main
from torch_mspti_cli.check import check_trace

TASK_QUEUE_FIX = "TASK_QUEUE_ENABLE=0"


@pytest.fixture(scope="module")
def queued(tmp_path_factory) -> simrun.SimResult:
    return simrun.run(queue_workload(), tmp_path_factory.mktemp("queued"), profiles=2, record_shapes=True)


def _us(trace, ns: int) -> float:
    return (ns - trace["baseTimeNanoseconds"]) / 1000


@pytest.mark.parametrize("profile", [0, 1])
def test_queued_launches_are_on_their_launch_thread_lane_at_their_host_time(queued, profile):
    trace = queued.traces[profile]
    assert check_trace(trace).ok, check_trace(trace).to_dict()
    tid = queued.extra["launcher_tids"][profile]
    pid = simrun.cpu_ops(trace)[0]["pid"]
    assert {e["tid"] for e in simrun.cpu_ops(trace)}.isdisjoint({tid})
    names = [e["args"]["name"] for e in metadata(trace, "thread_name") if (e["pid"], e["tid"]) == (pid, tid)]
    assert names == [f"NPU launch thread {tid}"], names
    by_corr = {ev["args"]["correlation"]: ev for ev in launches(trace)}
    starts = {f["id"]: f for f in flow_events(trace, "s")}
    ends = {f["id"]: f for f in flow_events(trace, "f")}
    ks = [k for k in kernels(trace) if k["name"].startswith("K")]
    assert len(ks) == 30
    for k in ks:
        assert "External id" not in k["args"] and k["args"]["link"] == "no_op_on_thread", k
        launch = by_corr[k["args"]["correlation"]]
        assert "External id" not in launch["args"], launch
        assert (launch["pid"], launch["tid"]) == (pid, tid), launch
        t0, t1 = queued.extra["launch_ns"][f"{profile}:{k['name'][1:]}"]
        assert _us(trace, t0) - TS_TOL_US <= launch["ts"] and end(launch) <= _us(trace, t1) + TS_TOL_US, (
            launch,
            t0,
            t1,
        )
        cid = flow_id(k["args"]["correlation"])
        assert (starts[cid]["tid"], starts[cid]["ts"]) == (tid, launch["ts"]), starts[cid]
        assert (ends[cid]["pid"], ends[cid]["tid"], ends[cid]["ts"]) == (k["pid"], k["tid"], k["ts"]), ends[cid]


@pytest.mark.parametrize("profile", [0, 1])
def test_queued_launches_credit_no_device_time_to_any_op(queued, profile):
    summary = queued.profiles[profile]
    assert {k["linked_correlation_id"] for k in summary["kernels"]} == {0}, summary["kernels"][:3]
    credited = [op for op in summary["ops"] if op["device_time_total"] or op["kernels"]]
    assert not credited, credited[:3]
    session = summary["session"]
    assert session["links"]["no_op_on_thread"] == 30 and session["linked_rows"] == 0, session["links"]
    assert not state_problems(queued.traces[profile], session)
    assert session["rows"]["launch_thread_events"] == 30, session["rows"]


def test_queued_launches_warn_once_per_session_naming_the_task_queue_setting(queued):
    warnings = plugin_warnings(queued, TASK_QUEUE_FIX)
    assert len(warnings) == 2, warnings  # two sessions, one warning each
    assert all("30 of 30 device rows" in w for w in warnings), warnings
    assert all("task-queue" in p["session"]["warnings"] for p in queued.profiles)
    # diagnostics() says the same about the last session.
    assert TASK_QUEUE_FIX in queued.diagnostics_repr and "30 no_op_on_thread" in queued.diagnostics_repr


@pytest.mark.parametrize("profile", [0, 1])
def test_the_traces_health_report_is_the_report_diagnostics_give(queued, profile):
    """kineto embeds the health report (getMetadata) before processTrace: the warnings decided from
    the links and the final state must already be in it, and equal diagnostics().last_session."""
    health = queued.traces[profile]["torch_mspti"]
    session = queued.profiles[profile]["session"]
    common = sorted(set(health) & set(session))
    assert {"state", "errors", "warnings", "enabled_kinds", "drain", "dropped", "repaired", "buffers"} <= set(common)
    assert health["warnings"] == ["task-queue"] and health["state"] == "processed", health
    for key in common:
        assert health[key] == session[key], (key, health[key], session[key])


def test_doctor_explains_a_trace_of_queued_launches(queued, capsys):
    assert cli_main(["doctor", str(queued.trace_paths[0])]) == 0
    out = capsys.readouterr().out
    assert TASK_QUEUE_FIX in out, out


def test_mostly_queued_launches_are_explained_by_the_warning_and_the_doctor(tmp_path, capsys):
    run = simrun.run(queue_workload(direct=True), tmp_path, record_shapes=True)
    result = audit(run.trace, {"links::enqueue"})
    assert result.kernels == 30 and not result.wrong and not result.problems, result.summary()
    assert dict(result.states) == {"verified": 10, "no_op_on_thread": 20}, result.summary()
    assert len(plugin_warnings(run, TASK_QUEUE_FIX)) == 1, run.stderr[-2000:]
    assert cli_main(["doctor", str(run.trace_paths[0])]) == 0
    out = capsys.readouterr().out
    assert TASK_QUEUE_FIX in out and "20" in out, out


def test_a_few_launches_from_a_housekeeping_thread_do_not_blame_the_task_queue(tmp_path, capsys):
    # One launch in ten from a thread that runs no op: shown and counted, no task-queue advice.
    workload = """
import threading
@torch.library.custom_op("links::compute", mutates_args=())
def compute(t: torch.Tensor, n: int) -> torch.Tensor:
    sim.msptiSimLaunchKernel(f"K{n}".encode(), b"KERNEL_AICORE", 0, 1, 2000)
    return t.clone()

def housekeeping(n):
    sim.msptiSimLaunchKernel(f"K{n}_memset".encode(), b"KERNEL_AIVEC", 0, 1, 2000)

for n in range(20):
    torch.ops.links.compute(x, n)
    if n % 10 == 0:
        t = threading.Thread(target=housekeeping, args=(500 + n,))
        t.start(); t.join()
sync()
"""
    run = simrun.run(workload, tmp_path, record_shapes=True)
    rows = {k["name"]: k["args"]["link"] for k in kernels(run.trace)}
    assert sorted(n for n, s in rows.items() if s != "verified") == ["K500_memset", "K510_memset"], rows
    assert {s for n, s in rows.items() if n.endswith("_memset")} == {"no_op_on_thread"}, rows
    assert not plugin_warnings(run, TASK_QUEUE_FIX)
    assert cli_main(["doctor", str(run.trace_paths[0])]) == 0
    assert TASK_QUEUE_FIX not in capsys.readouterr().out
