"""Every cycle of a torch.profiler schedule re-arms the plugin and collects its own kernels.

schedule(wait=1, warmup=1, active=2, repeat=3) over 12 steps: cycle c records steps 4c+2 and
4c+3. Each step launches kernels whose names encode the step, so a cycle's trace must hold exactly
the kernels of its two active steps (exact: each step synchronises and the drain is balanced).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from simrun import flow_events, kernels

from torch_mspti_cli.check import check_trace

SCHEDULE = {"wait": 1, "warmup": 1, "active": 2, "repeat": 3}
WORKLOAD = """
launch(f"Step{step}_a", {"name": f"Step{step}_b", "stream": 2})
launch_bare({"name": f"Step{step}_bare", "stream": 3, "dur_ns": 5000})
sync()
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> simrun.SimResult:
    return simrun.run(WORKLOAD, tmp_path_factory.mktemp("plugin_schedule"), schedule=SCHEDULE)


def _active_steps(cycle: int) -> list[int]:
    period = SCHEDULE["wait"] + SCHEDULE["warmup"] + SCHEDULE["active"]
    first = cycle * period + SCHEDULE["wait"] + SCHEDULE["warmup"]
    return list(range(first, first + SCHEDULE["active"]))


def test_schedule_writes_one_trace_per_cycle(run):
    assert len(run.trace_paths) == SCHEDULE["repeat"]
    assert all(p.exists() for p in run.trace_paths)


def test_every_cycle_is_armed_and_drained(run):
    for cycle in run.profiles:
        session = cycle["session"]
        assert session is not None and session["state"] == "processed", (cycle["index"], session)
        assert session["drain"]["exit_reason"] == "balanced", (cycle["index"], session["drain"])
        assert session["rows"]["kernels"] > 0


@pytest.mark.parametrize("cycle", range(SCHEDULE["repeat"]))
def test_each_cycle_trace_holds_exactly_the_kernels_of_its_active_steps(run, cycle):
    trace = run.traces[cycle]
    expected = Counter(k["name"] for k in run.launched if k["step"] in _active_steps(cycle))
    assert len(expected) == 3 * SCHEDULE["active"]
    got = Counter(k["name"] for k in kernels(trace))
    assert got == expected, f"cycle {cycle}: extra {got - expected}, missing {expected - got}"


@pytest.mark.parametrize("cycle", range(SCHEDULE["repeat"]))
def test_each_cycle_trace_is_valid_and_linked(run, cycle):
    trace = run.traces[cycle]
    report = check_trace(trace)
    assert report.ok, report.to_dict()
    launched = [k for k in run.launched if k["step"] in _active_steps(cycle)]
    starts = flow_events(trace, "s")
    assert len(starts) == len(launched)
    assert len({s["id"] for s in starts}) == len(starts)
    # Launches inside the op link to the op; the bare one runs inside the step's ProfilerStep#N
    # range (prof.step() opens one per step) with no op in between, so it links to that range.
    ranges = {e["args"]["External id"]: e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}
    ops = {e["args"]["External id"]: e["name"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
    for k in kernels(trace):
        eid = k["args"]["External id"]
        if k["name"].endswith("_bare"):
            step = int(k["name"].split("_")[0].removeprefix("Step"))
            assert ranges.get(eid) == f"ProfilerStep#{step}", (k, ranges.get(eid))
        else:
            assert ops.get(eid) == "simrun::launch", k


def test_launches_outside_active_steps_were_not_collected(run):
    # warmup and wait steps: the plugin is not armed, so the simulator mints no id
    active = {s for c in range(SCHEDULE["repeat"]) for s in _active_steps(c)}
    for k in run.launched:
        if k["step"] in active:
            assert k["correlation"] > 0, k
        else:
            assert k["correlation"] == 0, k


def test_flow_ids_are_not_reused_across_cycles(run):
    ids = [s["id"] for t in run.traces for s in flow_events(t, "s")]
    assert len(ids) == len(set(ids))
