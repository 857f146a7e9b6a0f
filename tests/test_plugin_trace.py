"""End to end on the simulated MSPTI: kernels, lanes, ac2g arrows and prof.events() device time.

One child process profiles a fixed workload; every test reads its results. The
simulator's default Disable pulls every in-flight kernel record, and the workload synchronises
before the profile ends, so after a balanced drain the kernel set is exact and tests compare it
with what was launched.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from simrun import TS_TOL_US, cpu_ops, end, flow_events, flow_id, kernels, launches

from torch_mspti_cli.check import check_trace

WORKLOAD = """
with record_function("phase"):
    for i in range(4):
        launch(f"MatMulV2_{i}", {"name": f"Add_{i}", "type": "KERNEL_AIVEC", "stream": 2})
    launch({"name": "FusedTriple", "count": 3, "stream": 3, "dur_ns": 30000})
launch_bare({"name": "Housekeeping", "type": "KERNEL_AIVEC", "stream": 4, "dur_ns": 5000})
sync()
torch.ones(2) + 1  # a host op after the device went idle: the trace's CPU range covers every kernel
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> simrun.SimResult:
    return simrun.run(WORKLOAD, tmp_path_factory.mktemp("plugin_trace"))


@pytest.fixture(scope="module")
def trace(run):
    return run.trace


def _expected_kernel_names(launched, in_op=None) -> Counter:
    return Counter(k["name"] for k in launched for _ in range(k["count"]) if in_op is None or k["in_op"] == in_op)


def _op_by_external_id(trace) -> dict[int, dict]:
    ops = {}
    for op in cpu_ops(trace):
        eid = op["args"].get("External id")
        assert eid not in ops, f"two cpu_op events share External id {eid}"
        ops[eid] = op
    return ops


def test_drain_was_balanced_so_kernel_counts_are_exact(run):
    session = run.diagnostics["last_session"]
    assert session["state"] == "processed", session
    assert session["errors"] == []
    assert session["drain"]["exit_reason"] == "balanced", session["drain"]
    assert session["drain"]["pending_launches"] == 0


def test_trace_passes_the_checker(trace):
    report = check_trace(trace)
    assert report.ok, report.to_dict()
    assert report.stats.kernels == len(kernels(trace))


def test_every_launched_kernel_reaches_the_trace_named_exactly_as_launched(run, trace):
    assert Counter(k["name"] for k in kernels(trace)) == _expected_kernel_names(run.launched)


def test_kernels_carry_type_stream_device_and_correlation_matching_their_lane(run, trace):
    launched = {k["name"]: k for k in run.launched}
    for k in kernels(trace):
        args = k["args"]
        src = launched[k["name"]]
        assert args["type"] == src["type"], k
        assert args["stream"] == src["stream"] == k["tid"], k
        assert args["streamId"] == args["stream"], k  # torch_npu's backend's name, which its tools read
        assert args["device"] == src["device"] == k["pid"], k
        assert isinstance(args["correlation"], int) and args["correlation"] > 0, k
        assert k["dur"] == pytest.approx(src["dur_ns"] / 1000, abs=TS_TOL_US), k


def test_no_span_or_row_of_ours_starts_or_ends_past_the_record_window_end(trace):
    # What PyTorch's test_basic_chrome_trace asks of every trace span (it exempts only XPU's by
    # name): kineto takes its window end before it stops our session, whose stop comes later.
    events = trace["traceEvents"]
    window_end = [e["ts"] for e in events if e.get("name") == "Record Window End"]
    assert len(window_end) == 1, window_end
    spans = [e for e in events if e.get("cat") == "Trace" and e.get("name", "").startswith("torch_mspti")]
    assert len(spans) == 1, [e for e in events if e.get("cat") == "Trace"]
    span = spans[0]
    assert span["ts"] + span["dur"] <= window_end[0], (span, window_end)
    late = [e for e in events if "dur" in e and e["ts"] > window_end[0]]
    assert not late, late[:3]


def test_npu_lane_is_named_and_sorts_below_every_cpu_lane(trace):
    dev_pids = simrun.device_pids(trace)
    host_pids = simrun.cpu_pids(trace)
    assert dev_pids and host_pids and not (dev_pids & host_pids)
    host_sort = [simrun.sort_index(trace, p) if simrun.sort_index(trace, p) is not None else p for p in host_pids]
    for pid in dev_pids:
        idx = simrun.sort_index(trace, pid)
        assert idx is not None and idx >= simrun.CPU_SORT_LIMIT, (pid, idx)
        assert all(idx > h for h in host_sort), (idx, host_sort)
        assert simrun.process_name(trace, pid), f"device pid {pid} has no process_name"
    streams = {(k["pid"], k["tid"]) for k in kernels(trace)}
    named = {(e["pid"], e["tid"]) for e in simrun.metadata(trace, "thread_name")}
    assert streams <= named, f"unnamed stream lanes: {streams - named}"


def test_every_ac2g_start_has_a_finish_with_the_same_id_and_start_ids_are_unique(trace):
    starts = flow_events(trace, "s")
    finishes = flow_events(trace, "f")
    start_ids = [s["id"] for s in starts]
    assert starts, "no ac2g arrows in the trace"
    assert len(start_ids) == len(set(start_ids)), f"duplicate start ids: {Counter(start_ids).most_common(3)}"
    finish_ids = {f["id"] for f in finishes}
    assert set(start_ids) == finish_ids, "starts without finish or finishes without start"
    assert all(f.get("bp") == "e" for f in finishes)


def test_one_arrow_start_per_launch_and_the_bare_launch_is_shown_unlinked(run, trace):
    in_op = [k for k in run.launched if k["in_op"]]
    starts = flow_events(trace, "s")
    assert len(starts) == len(run.launched)  # every launch, the bare one included, has its arrow
    linked_launches = [e for e in launches(trace) if e["args"].get("External id")]
    assert len(linked_launches) == len(in_op)
    # each start sits on a launch event (same lane, same ts) whose correlation is the flow id
    by_corr = {e["args"]["correlation"]: e for e in launches(trace)}
    by_flow = {flow_id(c): e for c, e in by_corr.items()}
    for s in starts:
        launch_ev = by_flow.get(s["id"])
        assert launch_ev is not None, f"flow start {s} has no launch event with that correlation"
        assert (launch_ev["pid"], launch_ev["tid"]) == (s["pid"], s["tid"])
        assert launch_ev["ts"] == pytest.approx(s["ts"], abs=TS_TOL_US)
        assert "stream" not in launch_ev["args"]
    # the kernel launched outside any op is credited to no op, but its launch is shown: an event on
    # the launching thread at the call's time, with an arrow and without External id
    bare = [k for k in kernels(trace) if k["name"] == "Housekeeping"]
    assert len(bare) == 1
    assert "External id" not in bare[0]["args"] and bare[0]["args"]["link"] == "no_op_on_thread"
    bare_launch = by_corr[bare[0]["args"]["correlation"]]
    assert "External id" not in bare_launch["args"] and bare_launch["args"]["link"] == "no_op_on_thread"
    assert bare_launch["ts"] <= bare[0]["ts"] + TS_TOL_US


def test_multi_kernel_launch_has_one_start_and_a_finish_on_each_kernel(trace):
    fused = [k for k in kernels(trace) if k["name"] == "FusedTriple"]
    assert len(fused) == 3
    assert len({k["args"]["correlation"] for k in fused}) == 1
    corr = fused[0]["args"]["correlation"]
    assert len([s for s in flow_events(trace, "s") if s["id"] == flow_id(corr)]) == 1
    f_ts = sorted(f["ts"] for f in flow_events(trace, "f") if f["id"] == flow_id(corr))
    assert f_ts == pytest.approx(sorted(k["ts"] for k in fused), abs=TS_TOL_US)


def test_no_arrow_points_backwards_in_time(trace):
    starts = {s["id"]: s for s in flow_events(trace, "s")}
    for f in flow_events(trace, "f"):
        assert f["ts"] >= starts[f["id"]]["ts"] - TS_TOL_US, (starts[f["id"]], f)


def test_arrow_ends_lie_on_different_lanes(trace):
    starts = {s["id"]: s for s in flow_events(trace, "s")}
    device = simrun.device_pids(trace)
    for f in flow_events(trace, "f"):
        s = starts[f["id"]]
        assert s["pid"] != f["pid"], (s, f)
        assert f["pid"] in device and s["pid"] in simrun.cpu_pids(trace)


def test_arrow_finishes_sit_on_kernels_that_agree_with_the_launch(trace):
    by_flow = {flow_id(e["args"]["correlation"]): e for e in launches(trace)}
    for f in flow_events(trace, "f"):
        ks = [
            k
            for k in kernels(trace)
            if flow_id(k["args"]["correlation"]) == f["id"]
            and (k["pid"], k["tid"]) == (f["pid"], f["tid"])
            and abs(k["ts"] - f["ts"]) <= TS_TOL_US
        ]
        assert len(ks) == 1, f"flow finish {f} does not sit on exactly one kernel: {ks}"
        assert ks[0]["args"].get("External id") == by_flow[f["id"]]["args"].get("External id")


def test_arrow_op_ids_are_ops_torch_recorded(run, trace):
    ops = _op_by_external_id(trace)
    torch_op_ids = {o["id"]: o["name"] for o in run.profiles[0]["ops"]}
    by_flow = {flow_id(e["args"]["correlation"]): e for e in launches(trace)}
    for s in flow_events(trace, "s"):
        eid = by_flow[s["id"]]["args"].get("External id")
        if eid is None:  # the bare launch
            continue
        assert eid in ops, f"launch for flow {s['id']} names op {eid}, not a cpu_op of this trace"
        assert ops[eid]["name"] == "simrun::launch"
        assert torch_op_ids.get(eid) == "simrun::launch", f"op {eid} not among prof.events() ops"
    # each simrun::launch op launched its own kernels: 2, 2, 2, 2 and 3
    per_op = Counter(k["args"]["External id"] for k in kernels(trace) if "External id" in k["args"])
    assert sorted(per_op.values()) == [2, 2, 2, 2, 3]
    assert all(ops[e]["name"] == "simrun::launch" for e in per_op)


def test_every_launch_event_nests_inside_its_op_on_the_same_thread(trace):
    ops = _op_by_external_id(trace)
    for ev in launches(trace):
        eid = ev["args"].get("External id")
        if not eid:
            continue
        op = ops[eid]
        assert (ev["pid"], ev["tid"]) == (op["pid"], op["tid"]), (ev, op)
        assert ev["ts"] >= op["ts"] - TS_TOL_US and end(ev) <= end(op) + TS_TOL_US, (ev, op)
        assert ev["dur"] > 0


def test_everything_lies_on_one_timeline(trace):
    lo, hi = simrun.cpu_time_range(trace)
    by_corr = {e["args"]["correlation"]: e for e in launches(trace)}
    for k in kernels(trace):
        assert lo - TS_TOL_US <= k["ts"] <= hi + TS_TOL_US, (lo, k, hi)
        launch_ev = by_corr.get(k["args"]["correlation"])
        if launch_ev is not None:
            # device start follows its host launch closely (µs, not clock offsets of seconds)
            assert launch_ev["ts"] - TS_TOL_US <= k["ts"] <= launch_ev["ts"] + 1e6, (launch_ev, k)


def test_events_kernels_are_privateuse1_with_device_index_and_linked_op(run):
    prof = run.profiles[0]
    kern = prof["kernels"]
    assert Counter(k["name"] for k in kern) == _expected_kernel_names(run.launched)
    op_ids = {o["id"] for o in prof["ops"] if o["name"] == "simrun::launch"}
    for k in kern:
        assert k["is_privateuse1"], k
        assert k["device_index"] == 0, k
        if k["name"] == "Housekeeping":
            assert k["linked_correlation_id"] == 0, k
        else:
            assert k["linked_correlation_id"] in op_ids, k


def test_op_self_device_time_equals_the_sum_of_its_own_kernels(run):
    prof = run.profiles[0]
    own: dict[int, float] = {}
    for k in prof["kernels"]:
        if k["linked_correlation_id"]:
            own[k["linked_correlation_id"]] = own.get(k["linked_correlation_id"], 0.0) + k["duration_us"]
    launch_ops = [o for o in prof["ops"] if o["name"] == "simrun::launch"]
    assert len(launch_ops) == 5
    for op in launch_ops:
        total = own.get(op["id"], 0.0)
        assert total > 0, op
        assert op["self_device_time_total"] == pytest.approx(total, rel=1e-3), op
        assert sum(k["duration_us"] for k in op["kernels"]) == pytest.approx(total, rel=1e-3), op
    # and the simulator ran each kernel for exactly the requested time: 2 x 20 µs or 3 x 30 µs
    assert sorted(round(o["self_device_time_total"], 3) for o in launch_ops) == [40.0] * 4 + [90.0]
