"""torch_mspti_cli.check: each structural rule on hand-made traces, one broken trace per rule."""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys
import textwrap

import collective_traces as coll
import pytest
import sim_support

from torch_mspti_cli import _health
from torch_mspti_cli.check import RULES, WARNINGS, CheckReport, TraceFileError, check_trace, load_trace

HOST = 4242  # host pid == tid of the launching thread
NPU = 0  # logical device index == device pid
STREAM = 7
CORR0 = 0x40000000


def make_trace(ops: int = 3, base: float = 0.0) -> dict:
    """A well-formed plugin trace: per op one launch, one kernel on STREAM and one ac2g arrow.

    Op i spans [base+100i+10, +50]; its launch [+2, +3]; its kernel [base+100i+16, +5].
    """
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": HOST, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_sort_index", "pid": HOST, "tid": 0, "args": {"sort_index": HOST}},
        {"ph": "M", "name": "thread_name", "pid": HOST, "tid": HOST, "args": {"name": f"thread {HOST} (python3)"}},
        {"ph": "M", "name": "process_name", "pid": NPU, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": NPU, "tid": 0, "args": {"labels": f"NPU {NPU}"}},
        {"ph": "M", "name": "process_sort_index", "pid": NPU, "tid": 0, "args": {"sort_index": NPU + 5_000_000}},
        {"ph": "M", "name": "thread_name", "pid": NPU, "tid": STREAM, "args": {"name": f"stream {STREAM}"}},
        {"ph": "M", "name": "thread_sort_index", "pid": NPU, "tid": STREAM, "args": {"sort_index": STREAM}},
    ]
    for i in range(ops):
        t = base + 100 * i
        ext, corr = i + 1, CORR0 + i
        ev += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": HOST,
                "tid": HOST,
                "ts": t + 10,
                "dur": 50,
                "args": {"External id": ext, "Record function id": 0},
            },
            {
                "ph": "X",
                "cat": "privateuse1_runtime",
                "name": "aclnnMm",
                "pid": HOST,
                "tid": HOST,
                "ts": t + 12,
                "dur": 3,
                "args": {"External id": ext, "correlation": corr},
            },
            {"ph": "s", "id": corr, "pid": HOST, "tid": HOST, "ts": t + 12, "cat": "ac2g", "name": "ac2g"},
            {
                "ph": "X",
                "cat": "kernel",
                "name": "MatMulV2",
                "pid": NPU,
                "tid": STREAM,
                "ts": t + 16,
                "dur": 5,
                "args": {"External id": ext, "device": NPU, "stream": STREAM, "correlation": corr, "type": "kernel"},
            },
            {"ph": "f", "id": corr, "pid": NPU, "tid": STREAM, "ts": t + 16, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
    ev.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": base + 100 * ops})
    return {
        "schemaVersion": 1,
        "deviceProperties": [],
        "traceEvents": ev,
        "torch_mspti": {"library": {"available": True}},
    }


def find(trace: dict, n: int = 0, **match) -> dict:
    """The n-th event whose fields equal ``match``."""
    hits = [e for e in trace["traceEvents"] if isinstance(e, dict) and all(e.get(k) == v for k, v in match.items())]
    return hits[n]


def drop(trace: dict, event: dict) -> None:
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e is not event]


# ----------------------------------------------------------------------------- broken traces
# Each mutation breaks exactly one rule; the test checks that rule fires and no other.


def _append_non_object(t):
    t["traceEvents"].append(42)


def _list_pid(t):
    t["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": [HOST], "tid": HOST, "ts": 5, "dur": 1}
    )


def _string_ts(t):
    t["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": HOST, "tid": HOST, "ts": "5", "dur": 1}
    )


def _nan_dur(t):
    t["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": HOST, "tid": HOST, "ts": 5, "dur": float("nan")}
    )


def _bool_ts_on_flow(t):
    t["traceEvents"].append({"ph": "s", "id": 99, "pid": HOST, "tid": HOST, "ts": True, "cat": "ac2g", "name": "ac2g"})


def _zero_kernel(t):
    find(t, cat="kernel")["dur"] = 0


def _negative_launch(t):
    find(t, cat="privateuse1_runtime")["dur"] = -1.0


def _kernel_without_stream(t):
    del find(t, cat="kernel")["args"]["stream"]


def _kernel_wrong_device(t):
    find(t, cat="kernel")["args"]["device"] = 3


def _launch_with_stream(t):
    find(t, cat="privateuse1_runtime")["args"]["stream"] = STREAM


def _launch_without_correlation(t):
    del find(t, cat="privateuse1_runtime")["args"]["correlation"]


def _duplicate_start(t):
    t["traceEvents"].append(dict(find(t, ph="s")))


def _start_without_finish(t):
    drop(t, find(t, ph="f", n=1))


def _finish_without_start(t):
    drop(t, find(t, ph="s", n=1))


def _backwards(t):
    # the launch (and its arrow start) moves after the kernel start, still inside its op
    find(t, cat="privateuse1_runtime")["ts"] = 18
    find(t, ph="s")["ts"] = 18


def _start_outside_host_slice(t):
    find(t, ph="s")["ts"] = 5


def _start_on_device_pid(t):
    find(t, ph="s").update(pid=NPU, tid=STREAM, ts=16)


def _finish_between_kernels(t):
    find(t, ph="f")["ts"] = 30


def _finish_on_host_pid(t):
    find(t, ph="f").update(pid=HOST, tid=HOST)


def _finish_without_bp(t):
    del find(t, ph="f")["bp"]


def _correlation_mismatch(t):
    find(t, cat="kernel")["args"]["correlation"] = CORR0 + 77


def _external_id_mismatch(t):
    find(t, cat="kernel")["args"]["External id"] = 77


def _kernels_overlap(t):
    find(t, cat="kernel")["dur"] = 101  # [16, 117] runs into the next kernel at 116


def _range_crosses_op(t):
    # a range [5, 25] on the op's lane: the op [10, 60] starts inside it and ends after it
    t["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": HOST, "tid": HOST, "ts": 5, "dur": 20}
    )


def _launch_outside_op(t):
    find(t, cat="cpu_op")["dur"] = (
        1  # op [10, 11], launch [12, 15] (a launch crossing the op's end is lane-not-nested too)
    )


def _no_process_label(t):
    drop(t, find(t, name="process_labels", pid=NPU))


def _no_stream_name(t):
    drop(t, find(t, name="thread_name", pid=NPU))


def _device_sorted_first(t):
    find(t, name="process_sort_index", pid=NPU)["args"]["sort_index"] = 0


def _device_sort_missing(t):
    drop(t, find(t, name="process_sort_index", pid=NPU))


def _unlinked_kernel(t):
    del find(t, cat="kernel")["args"]["External id"]


def _health_not_object(t):
    t["torch_mspti"] = 5


def _empty(t):
    t["traceEvents"] = []


def _no_device_activity(t):
    # what a CPU-only profile holds: ops, but no launch, kernel or arrow
    t["traceEvents"] = [e for e in t["traceEvents"] if e.get("cat") not in ("kernel", "privateuse1_runtime", "ac2g")]


def _session_failed(t):
    t["torch_mspti"] = {"state": "failed", "errors": ["MSPTI unavailable: libmspti.so not found"]}


BROKEN = [
    ("event-malformed", _append_non_object, {}),
    ("event-malformed", _list_pid, {}),
    ("timestamp-not-numeric", _string_ts, {}),
    ("timestamp-not-numeric", _nan_dur, {}),
    ("timestamp-not-numeric", _bool_ts_on_flow, {}),
    ("duration-not-positive", _zero_kernel, {}),
    ("duration-not-positive", _negative_launch, {}),
    ("kernel-args", _kernel_without_stream, {}),
    ("kernel-args", _kernel_wrong_device, {}),
    ("launch-args", _launch_with_stream, {}),
    ("launch-args", _launch_without_correlation, {}),
    ("flow-duplicate-start", _duplicate_start, {}),
    ("flow-unpaired", _start_without_finish, {}),
    ("flow-unpaired", _finish_without_start, {}),
    ("flow-backwards", _backwards, {}),
    ("flow-start-not-on-host-slice", _start_outside_host_slice, {}),
    ("flow-start-not-on-host-slice", _start_on_device_pid, {}),
    ("flow-end-not-on-device-slice", _finish_between_kernels, {}),
    ("flow-end-not-on-device-slice", _finish_on_host_pid, {}),
    ("flow-end-binding", _finish_without_bp, {}),
    ("flow-link-mismatch", _correlation_mismatch, {}),
    ("flow-link-mismatch", _external_id_mismatch, {}),
    ("kernel-overlap-in-stream", _kernels_overlap, {}),
    ("lane-not-nested", _range_crosses_op, {}),
    ("launch-not-nested-in-op", _launch_outside_op, {}),
    ("npu-lane-unnamed", _no_process_label, {}),
    ("npu-lane-unnamed", _no_stream_name, {}),
    ("npu-lane-sorted-above-cpu", _device_sorted_first, {}),
    ("npu-lane-sorted-above-cpu", _device_sort_missing, {}),
    ("link-ratio-below-min", _unlinked_kernel, {"min_link_ratio": 0.9}),
    ("health-report-malformed", _health_not_object, {}),
    ("trace-empty", _empty, {}),
    ("trace-empty", _empty, {"allow_empty": True}),
    ("no-device-activity", _no_device_activity, {}),
    ("session-failed", _session_failed, {}),
    ("session-failed", _session_failed, {"allow_empty": True}),
    ("collective-args", coll.break_args, {}),
    ("collective-group-mismatch", coll.break_group, {}),
    ("collective-nelems-mismatch", coll.break_nelems, {}),
    ("collective-seq-order", coll.break_seq, {}),
    ("collective-no-distributed-info", coll.break_distributed_info, {}),
    ("collective-count-mismatch", coll.break_counts, {}),
]


@pytest.mark.parametrize("rule, mutate, kwargs", BROKEN, ids=[f"{r}:{m.__name__.strip('_')}" for r, m, _ in BROKEN])
def test_each_broken_trace_is_rejected_for_its_rule(rule, mutate, kwargs):
    trace = make_trace()
    mutate(trace)
    report = check_trace(trace, **kwargs)
    assert not report.ok
    assert set(report.counts_by_rule) == {rule}, [p.message for p in report.problems]
    problem = report.problems[0]
    assert problem.rule == rule and problem.message
    assert problem.rule in RULES


def test_every_rule_has_a_broken_trace():
    assert {rule for rule, _, _ in BROKEN} == set(RULES)


def _no_health_report(t):
    del t["torch_mspti"]


def _no_kernel_linked(t):
    for e in t["traceEvents"]:
        if e.get("cat") == "kernel":
            del e["args"]["External id"]


def _set_links(t, states):
    """Kernel i gets link state states[i]; an unlinked state also unlinks the kernel and its launch."""
    corr = {}
    for e in t["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"]["link"] = states[len(corr)]
            corr[e["args"]["correlation"]] = e["args"]["link"]
    for e in t["traceEvents"]:
        if e.get("cat") in ("kernel", "privateuse1_runtime") and corr[e["args"]["correlation"]] not in (
            "verified",
            "recovered",
            "unverified",
        ):
            del e["args"]["External id"]


def _launches_without_op(t):
    _set_links(t, ["no_op_on_thread", "no_op_on_thread", "verified"])


def _links_ambiguous(t):
    _set_links(t, ["ambiguous", "unverified", "unverified"])


def _session_errors(t):
    t["torch_mspti"] = {"state": "processed", "errors": ["Disable(KERNEL): MSPTI_ERROR_INNER"]}


def _launches_pending(t):
    t["torch_mspti"] = {"state": "stopped", "drain": {"exit_reason": "timeout", "pending_launches": 3}}


def _records_dropped(t):
    t["torch_mspti"] = {"state": "processed", "dropped": {"out_of_window": 2, "duplicates": 5, "orphan": 0}}


def _kinds_not_collected(t):
    t["torch_mspti"] = {
        "state": "processed",
        "not_collected": ["COMMUNICATION: HCCL/LCCL collectives are not collected, so the trace has ..."],
    }


WARNED = [
    ("health-report-missing", _no_health_report),
    ("no-kernel-linked", _no_kernel_linked),
    ("launches-without-op", _launches_without_op),
    ("links-ambiguous", _links_ambiguous),
    ("session-errors", _session_errors),
    ("launches-pending", _launches_pending),
    ("records-dropped", _records_dropped),
    ("kinds-not-collected", _kinds_not_collected),
    ("collectives-not-joined", coll.warn_not_joined),
    ("collective-group-not-in-pg-config", coll.warn_group_made_after_start),
]


def test_dropped_records_warning_names_each_counter_and_its_meaning():
    trace = make_trace()
    _records_dropped(trace)
    (warning,) = check_trace(trace).warnings
    assert warning.message.startswith("2 MSPTI record(s) are not in this trace: 2 out_of_window (launched outside")
    assert "duplicates" not in warning.message and "orphan" not in warning.message  # copies and zeros are no loss
    trace["torch_mspti"]["dropped"] = {"duplicates": 5}
    assert check_trace(trace).warnings == []


def test_zero_length_kernels_pass_only_as_many_as_the_health_report_accounts_for():
    trace = make_trace()
    for n in (0, 1):
        find(trace, cat="kernel", n=n)["dur"] = 0
    trace["torch_mspti"] = {"repaired": {"zero_duration": 2}}
    assert check_trace(trace).ok
    trace["torch_mspti"] = {"repaired": {"zero_duration": 1, "overlaps": 1}}  # a repair can empty a row
    assert check_trace(trace).ok
    trace["torch_mspti"] = {"repaired": {"zero_duration": 1}}
    report = check_trace(trace)
    assert report.counts_by_rule == {"duration-not-positive": 2}, report.to_dict()
    assert "the health report accounts for 1" in report.problems[0].message


@pytest.mark.parametrize("rule, mutate", WARNED, ids=[r for r, _ in WARNED])
def test_each_warning_is_reported_without_failing_the_check(rule, mutate):
    trace = make_trace()
    assert check_trace(trace).warnings == []
    mutate(trace)
    report = check_trace(trace)
    assert report.ok, [p.message for p in report.problems]
    assert [w.rule for w in report.warnings] == [rule]
    assert report.warnings[0].message and rule in WARNINGS
    assert report.to_dict()["warnings"] == [report.warnings[0].to_dict()]


def test_every_warning_has_a_trace():
    assert {rule for rule, _ in WARNED} == set(WARNINGS)


def test_the_link_states_of_the_rows_are_counted_and_name_why_no_kernel_is_linked():
    trace = make_trace()
    _set_links(trace, ["ambiguous", "no_record", "ambiguous"])
    report = check_trace(trace)
    assert report.stats.link_states == {"ambiguous": 2, "no_record": 1}
    warned = {w.rule: w.message for w in report.warnings}
    assert set(warned) == {"links-ambiguous", "no-kernel-linked"}, warned
    assert "enable_api_records" in warned["links-ambiguous"]
    assert "TASK_QUEUE" not in warned["no-kernel-linked"] and "(ambiguous)" in warned["no-kernel-linked"]


def test_a_failed_session_names_its_error():
    trace = make_trace()
    _session_failed(trace)
    (problem,) = check_trace(trace).problems
    assert "libmspti.so not found" in problem.message


def test_no_device_activity_says_whether_the_plugin_served_the_trace():
    served = make_trace()
    _no_device_activity(served)
    assert "session ran" in check_trace(served).problems[0].message
    _no_health_report(served)
    (problem,) = check_trace(served).problems
    assert problem.rule == "no-device-activity" and "did not serve" in problem.message
    assert check_trace(served, allow_empty=True).ok and check_trace(served, allow_empty=True).warnings == []


def test_health_summary_covers_drops_repairs_drain_and_unknown_keys():
    health = {
        "library": {"available": True, "path": "/opt/cann/lib64/libmspti.so", "version": "26.1", "found_by": "env"},
        "state": "processed",
        "errors": [],
        "enabled_kinds": ["KERNEL", "RUNTIME_API"],
        "records_by_kind": {"KERNEL": 7, "RUNTIME_API": 7},
        "dropped": {"out_of_window": 3, "invalid_timing": 1, "duplicates": 0},
        "repaired": {"overlaps": 0, "max_shift_ns": 0},
        "drain": {"order": "poll_first", "exit_reason": "quiet", "flushes": 4, "ms": 12.5, "pending_launches": 0},
        "capabilities": {"memcpy_memset": {"ok": False, "reason": "needs LD_PRELOAD"}},
        "a_new_counter": 5,
        "a_new_section": {"x": 1, "y": 0},
    }
    rows = dict(_health.summary_rows(health))
    assert rows["library"] == "/opt/cann/lib64/libmspti.so (26.1; found by env)"
    assert rows["records"] == "14 (KERNEL 7, RUNTIME_API 7)"
    assert rows["dropped"] == "4 in all: out_of_window 3, invalid_timing 1 (other 1 0)"
    assert rows["repaired"] == "none (overlaps, max_shift_ns all 0)"
    assert rows["drain"].startswith("quiet (poll_first) after 4 flushes, 12.5 ms")
    assert "needs LD_PRELOAD" in rows["capabilities"]
    assert rows["other counters"] == "a_new_counter 5"
    assert rows["a new section"] == "x 1 (other 1 0)"


def test_well_formed_trace_is_accepted_with_its_stats():
    report = check_trace(make_trace(ops=4), min_link_ratio=1.0)
    assert report.ok, [p.message for p in report.problems]
    s = report.stats
    assert (s.kernels, s.linked_kernels, s.link_ratio) == (4, 4, 1.0)
    assert (s.launches, s.flows, s.flow_finishes, s.device_lanes, s.streams) == (4, 4, 4, 1, 1)
    assert report.health == {"library": {"available": True}}
    assert report.to_dict()["ok"] is True


def test_bare_event_list_is_accepted_with_a_warning_about_its_missing_health_report():
    report = check_trace(make_trace()["traceEvents"])
    assert report.ok and report.stats.kernels == 3 and report.health is None
    assert [w.rule for w in report.warnings] == ["health-report-missing"]


def test_health_report_written_as_json_string_is_read():
    trace = make_trace()
    trace["torch_mspti"] = json.dumps({"drain": {"flushes": 2}})
    assert check_trace(trace).health == {"drain": {"flushes": 2}}


def test_kernels_that_touch_exactly_do_not_overlap():
    trace = make_trace()
    find(trace, cat="kernel")["dur"] = 100  # ends at 116, where the next kernel starts
    assert check_trace(trace).ok


def test_overlap_tolerates_microsecond_rounding_on_epoch_timestamps():
    base = 5202930741764.462  # absolute µs, as torch writes them
    trace = make_trace(base=base)
    k0, k1 = find(trace, cat="kernel"), find(trace, cat="kernel", n=1)
    k0["dur"] = round(k1["ts"] + 0.001 - k0["ts"], 3)
    assert check_trace(trace).ok
    k0["dur"] = round(k1["ts"] + 0.010 - k0["ts"], 3)
    assert set(check_trace(trace).counts_by_rule) == {"kernel-overlap-in-stream"}


# ----------------------------------------------------------------------------- lanes that nest


def _slice(name: str, ts: float, dur: float, cat: str = "user_annotation", pid=HOST, tid=HOST, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _mstx_range(ts: float, dur: float) -> dict:
    """A "communication" mstx range on STREAM, as torch-mspti writes the device side of one."""
    return _slice("{/'opName/': /'HcclAllreduce/'}", ts, dur, "gpu_user_annotation", NPU, STREAM, **{"marker id": 1})


def test_a_lane_that_does_not_nest_is_one_problem_with_its_count_and_first_crossing():
    trace = make_trace(ops=3)  # ops [10, 60], [110, 160], [210, 260] on the host lane, kernels [16, 21], ... on STREAM
    trace["traceEvents"] += [
        _slice("fwd", 5, 20),  # the first op starts inside it and ends after it
        _slice("bwd", 250, 30),  # starts inside the third op and ends after it
        _mstx_range(14, 6),  # [14, 20] on the stream: the first kernel [16, 21] ends after it
    ]
    report = check_trace(trace)
    assert report.counts_by_rule == {"lane-not-nested": 2}, [p.message for p in report.problems]
    host, device = sorted(report.problems, key=lambda p: p.message.startswith("on device"))
    flat = " ".join(host.message.split())
    assert "on pid 4242 tid 4242, 2 slice(s) start inside another slice and end after it" in flat, flat
    assert (
        "the first: 'aten::mm' (cpu_op, 10.000 to 60.000) starts inside 'fwd' (user_annotation, 5.000 to 25.000) "
        "and ends 35.000 µs after it" in flat
    ), flat
    assert "Perfetto" in flat and "must nest or be disjoint" in flat, flat
    assert host.event["name"] == "aten::mm" and host.event["ts"] == 10
    assert "on device 0 stream 7, 1 slice(s)" in device.message and "'MatMulV2' (kernel, 16.000" in device.message
    assert not report.ok and "lane-not-nested" in RULES


def test_slices_that_touch_share_an_end_or_start_together_nest_despite_float_rounding():
    base = 5202930741764.462  # absolute µs, as torch writes them: ts + dur is off in the last float bit
    trace = make_trace(base=base)
    op = find(trace, cat="cpu_op")  # [base + 10, +50]
    start, end = op["ts"], round(op["ts"] + op["dur"], 3)
    trace["traceEvents"] += [
        _slice("before", round(start - 7.251, 3), 7.251),  # ends where the op starts
        _slice("after", end, 3.5),  # starts where the op ends
        _slice("tail", round(end - 0.333, 3), 0.333),  # shares the op's end
        _slice("same", start, 50),  # the op's own span
        _slice("head", start, 0.001),  # shares its start, 1 ns long
        _slice("empty", round(start + 20.001, 3), 0),
    ]
    report = check_trace(trace)
    assert report.ok, [p.message for p in report.problems]
    trace["traceEvents"].append(_slice("late", round(end - 0.005, 3), 1))  # 5 ns before the op's end
    assert check_trace(trace).counts_by_rule == {"lane-not-nested": 1}


def test_a_crossing_of_one_ns_is_found_where_the_floats_hold_ns():
    trace = make_trace()  # op [10, 60]
    trace["traceEvents"].append(_slice("late", 60, 1))  # touches
    assert check_trace(trace).ok
    trace["traceEvents"][-1]["ts"] = 59.999  # starts 1 ns before the op's end
    assert check_trace(trace).counts_by_rule == {"lane-not-nested": 1}


def test_two_device_rows_that_overlap_are_reported_once_by_the_stream_rule():
    trace = make_trace()
    find(trace, cat="kernel")["dur"] = 101  # [16, 117] crosses the next kernel's start at 116
    assert set(check_trace(trace).counts_by_rule) == {"kernel-overlap-in-stream"}


def test_torchs_python_frames_that_straddle_a_range_are_left_out():
    """torch's Python tracer: record_function's range opens inside _record_function_enter_new's frame."""
    trace = make_trace()
    frame = _slice("<built-in method _record_function_enter_new>", 5, 6, cat="python_function")  # [5, 11]
    trace["traceEvents"].append(frame)
    assert check_trace(trace).ok
    frame["cat"] = "user_annotation"  # the same span as a range of the lane crosses the op [10, 60]
    assert check_trace(trace).counts_by_rule == {"lane-not-nested": 1}


def test_c10d_work_ranges_that_outlive_their_op_are_left_out():
    """ProcessGroupGloo's send: torch opens "gloo:send" inside the c10d op and closes it when the work
    completes, after the op (seen in the simulated hccl backend's traces, which send through gloo)."""
    trace = make_trace()  # op [10, 60]
    work = _slice("gloo:send", 40, 100)  # [40, 140]
    trace["traceEvents"].append(work)
    assert check_trace(trace).ok
    work["name"] = "send"  # a range of anyone else that crosses the op's end
    assert check_trace(trace).counts_by_rule == {"lane-not-nested": 1}


def test_a_lane_of_many_crossings_is_swept_once():
    # 200k slices, each starting inside the one before and ending after it: a pairwise scan would not finish
    events = [_slice(f"r{i}", i * 10, 15) for i in range(200_000)]
    report = check_trace(events, allow_empty=True)
    assert report.counts_by_rule == {"lane-not-nested": 1}
    assert "199999 slice(s) start inside another slice" in report.problems[0].message


def test_an_arrow_to_a_row_shortened_to_1_ns_binds_to_that_row_not_the_next():
    # The lane repair can shorten a row to 1 ns (its start moved to the previous row's end); on
    # epoch timestamps the next row then starts inside the checker's tolerance (seen on the real
    # MSPTI, whose fake driver overlaps a stream's kernels). Each finish sits at its own row's start.
    base = 5726557235500.0
    trace = make_trace(base=base)
    k0, k1 = find(trace, cat="kernel"), find(trace, cat="kernel", n=1)
    f0, f1 = find(trace, ph="f"), find(trace, ph="f", n=1)
    k0["ts"] = f0["ts"] = base + 150
    k0["dur"] = 0.001  # [base+150, base+150.001]
    k1["ts"] = f1["ts"] = round(base + 150.001, 3)  # the next row starts 1 ns later
    assert check_trace(trace).ok, check_trace(trace).to_dict()


def test_arrow_start_binds_to_innermost_slice_for_link_check():
    # the op carries a different correlation; the start must bind to the launch nested in it
    trace = make_trace()
    find(trace, cat="cpu_op")["args"]["correlation"] = 12345
    assert check_trace(trace).ok


def test_several_finishes_per_start_are_fine():
    trace = make_trace()
    k0 = find(trace, cat="kernel")
    k0["dur"] = 2  # [16, 18]; a second kernel of the same launch at [18, 21]
    k_extra = copy.deepcopy(k0)
    k_extra.update(ts=18, dur=3)
    f_extra = dict(find(trace, ph="f"), ts=18)
    trace["traceEvents"] += [k_extra, f_extra]
    report = check_trace(trace)
    assert report.ok and report.stats.flows == 3 and report.stats.flow_finishes == 4


def test_other_flow_categories_are_ignored():
    trace = make_trace()
    trace["traceEvents"].append(
        {"ph": "s", "id": 1, "pid": HOST, "tid": HOST, "ts": 11, "cat": "fwdbwd", "name": "fwdbwd"}
    )
    assert check_trace(trace).ok


def test_link_ratio_without_kernels_fails_only_when_a_minimum_is_asked():
    trace = {"traceEvents": [e for e in make_trace()["traceEvents"] if e.get("ph") == "M"]}
    assert check_trace(trace, allow_empty=True).ok and check_trace(trace, allow_empty=True).stats.link_ratio is None
    assert set(check_trace(trace, min_link_ratio=0.5, allow_empty=True).counts_by_rule) == {"link-ratio-below-min"}


def test_invalid_min_link_ratio_is_a_value_error():
    with pytest.raises(ValueError, match="min_link_ratio"):
        check_trace(make_trace(), min_link_ratio=1.5)


def test_problem_list_is_capped_but_counted():
    trace = make_trace(ops=10)
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            del e["args"]["stream"]
    report = check_trace(trace, max_problems=3)
    assert len(report.problems) == 3 and report.problem_count == 10 and report.omitted == 7
    d = report.to_dict()
    assert d["problem_count"] == 10 and d["omitted"] == 7 and d["counts_by_rule"] == {"kernel-args": 10}
    assert set(d["problems"][0]) == {"rule", "message", "event"}
    assert d["problems"][0]["event"]["cat"] == "kernel" and "index" in d["problems"][0]["event"]


def test_large_trace_is_checked_in_one_sweep():
    # 100k kernels, launches, ops and arrows (~500k events): must finish without quadratic work.
    trace = make_trace(ops=100_000)
    report = check_trace(trace, min_link_ratio=1.0)
    assert report.ok
    assert report.stats.kernels == 100_000 and report.stats.flows == 100_000


def test_large_trace_with_many_problems_stays_capped():
    trace = make_trace(ops=20_000)
    for e in trace["traceEvents"]:
        if e.get("ph") == "f":
            e["ts"] += 10  # all finishes fall into gaps between kernels
    report = check_trace(trace, max_problems=5)
    assert report.counts_by_rule == {"flow-end-not-on-device-slice": 20_000}
    assert len(report.problems) == 5


# ----------------------------------------------------------------------------- files


def test_path_and_gzip_inputs_are_loaded(tmp_path):
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_text(json.dumps(make_trace()))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert check_trace(plain).ok and check_trace(str(packed)).ok


@pytest.mark.parametrize(
    "content, match",
    [
        (None, "no such file"),
        (b"", "empty"),
        (b'{"traceEvents": [', "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not"),
        (b"42", "not a Chrome trace"),
        (b'{"events": []}', "not a Chrome trace"),
    ],
    ids=["missing", "empty", "truncated", "binary", "number", "no-traceEvents"],
)
def test_unreadable_input_raises_trace_file_error(tmp_path, content, match):
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TraceFileError, match=match) as info:
        check_trace(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_load_trace_on_a_directory(tmp_path):
    with pytest.raises(TraceFileError, match="directory"):
        load_trace(tmp_path)


def test_real_cpu_only_torch_trace_is_accepted(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "cpu.json"
    script = textwrap.dedent(f"""
        import torch
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
            x = torch.randn(32, 32, requires_grad=True)
            (x @ x).sum().backward()
        p.export_chrome_trace({str(out)!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    assert set(check_trace(out).counts_by_rule) == {"no-device-activity"}
    report = check_trace(out, allow_empty=True)
    assert isinstance(report, CheckReport)
    assert report.ok, [p.message for p in report.problems]
    assert report.stats.kernels == 0 and report.stats.device_lanes == 0 and report.warnings == []


def test_real_cpu_only_torch_trace_with_python_frames_and_nested_ranges_nests(tmp_path):
    """torch's own CPU lanes: ops and nested record_function ranges nest; the Python tracer's frames
    (with_stack) straddle the ranges and are left out of the rule."""
    pytest.importorskip("torch")
    out = tmp_path / "cpu.json"
    script = textwrap.dedent(f"""
        import torch
        from torch.profiler import profile, record_function, ProfilerActivity
        model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True,
                     profile_memory=True) as p:
            for _ in range(2):
                with record_function("step"):
                    with record_function("forward"):
                        y = model(torch.randn(8, 32))
                    with record_function("backward"):
                        y.sum().backward()
                    opt.step()
                    opt.zero_grad()
        p.export_chrome_trace({str(out)!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    events = load_trace(out)["traceEvents"]
    assert {"cpu_op", "user_annotation", "python_function"} <= {e.get("cat") for e in events}
    report = check_trace(out, allow_empty=True)
    assert report.ok and report.counts_by_rule == {}, [p.message for p in report.problems]


def test_a_simulated_npu_trace_nests(tmp_path):
    """A profile of ops and nested ranges on the simulated NPU (direct launches, so kineto projects the
    ranges onto the streams): host and stream lanes nest."""
    sim_support.require_simulator()
    out = tmp_path / "npu.json"
    script = textwrap.dedent(f"""
        import torch, torch_mspti.sim
        from torch.profiler import profile, record_function, ProfilerActivity
        torch_mspti.sim.enable(launch_mode="direct")
        model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("npu")
        x = torch.randn(8, 32, device="npu")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], with_stack=True) as p:
            for _ in range(2):
                with record_function("step"):
                    with record_function("forward"):
                        y = model(x)
                    with record_function("backward"):
                        y.sum().backward()
            torch.npu.synchronize()
        p.export_chrome_trace({str(out)!r})
    """)
    proc = sim_support.run_child(script, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = load_trace(out)["traceEvents"]
    assert any(e.get("cat") == "gpu_user_annotation" and e.get("pid") == 0 for e in events)  # ranges on a stream
    report = check_trace(out)
    assert report.ok and report.stats.linked_kernels > 0, [p.message for p in report.problems]


def test_launches_on_a_process_without_ops_are_on_a_host_process():
    # threads torch did not record (profile_all_threads off) launch with no cpu_op around: their
    # launch events are the host side of the arrows, unlinked but valid
    trace = make_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "cpu_op"]
    for e in trace["traceEvents"]:
        e.get("args", {}).pop("External id", None)
    report = check_trace(trace)
    assert "flow-start-not-on-host-slice" not in report.counts_by_rule, [p.message for p in report.problems]
    assert any(e.get("cat") == "privateuse1_runtime" for e in trace["traceEvents"])


def _cpu_only(t):
    _no_device_activity(t)


def test_device_work_without_kernels_is_device_activity():
    """A profile whose only NPU work is mstx markers on a stream, or runtime memory (MEMORY records), has
    device activity: check accepts it (no --allow-empty), while the same trace without them is CPU-only."""
    marker = {
        "ph": "X", "cat": "gpu_user_annotation", "name": "step", "pid": NPU, "tid": STREAM, "ts": 20.0, "dur": 5.0,
        "args": {"marker id": 1, "domain": "default"},
    }  # fmt: skip
    memory = {
        "ph": "X", "cat": "privateuse1_driver", "name": "Memory Allocation", "pid": NPU, "tid": 1, "ts": 30.0,
        "dur": 1.0, "args": {"bytes": 2097152, "address": 4096, "link": "outside_op"},
    }  # fmt: skip
    for extra in (marker, memory):
        trace = make_trace()
        _cpu_only(trace)
        assert set(check_trace(copy.deepcopy(trace)).counts_by_rule) == {"no-device-activity"}
        trace["traceEvents"].append(extra)
        report = check_trace(trace)
        assert "no-device-activity" not in report.counts_by_rule, [p.message for p in report.problems]
    # a host-side marker (privateuse1_driver span of the thread) is not device work
    trace = make_trace()
    _cpu_only(trace)
    trace["traceEvents"].append(dict(marker, cat="privateuse1_driver", pid=HOST, tid=HOST))
    assert "no-device-activity" in check_trace(trace).counts_by_rule


def test_a_block_total_sums_counts_not_maxima():
    text = _health.counted({"overlaps": 5, "max_shift_ns": 7940752, "zero_duration": 0}, total=True)
    assert "in all" not in text and "overlaps 5" in text, text
    assert _health.counted({"a": 2, "b": 3}, total=True).startswith("5 in all"), _health.counted({"a": 2, "b": 3})


# ----------------------------------------------------------------------------- collectives


def _collective_trace() -> dict:
    return coll.add_collectives(make_trace())


def test_a_joined_two_group_trace_passes_with_its_collective_counts():
    trace = _collective_trace()
    report = check_trace(trace)
    assert report.ok and report.warnings == [], report.to_dict()
    assert report.stats.collectives == {"rows": 8, "joined": 8, "with_seq": 8}
    assert report.to_dict()["stats"]["collectives"] == {"rows": 8, "joined": 8, "with_seq": 8}
    # torch writes distributedInfo as JSON; a copy that kept it as a JSON string is read the same
    trace["distributedInfo"] = json.dumps(trace["distributedInfo"])
    assert check_trace(trace).ok


def test_a_trace_without_collectives_has_no_new_output():
    before = check_trace(make_trace()).to_dict()
    assert "collectives" not in before["stats"] and before["warnings"] == [] and before["ok"]
    trace = make_trace()  # distributed, but no collective ran: nothing to check, nothing to say
    trace["distributedInfo"] = {"backend": "hccl", "rank": 0, "world_size": 2, "pg_config": []}
    trace["torch_mspti"]["collectives"] = {"rows": 0, "joined": 0, "unjoined": 0, "no_group": 0}
    assert check_trace(trace).to_dict() == {**before, "health": trace["torch_mspti"]}


def _drop_key(name, key):
    return lambda t: t and coll.row(t, name)["args"].pop(key)


def _set_arg(name, key, value):
    return lambda t: coll.row(t, name)["args"].__setitem__(key, value)


def _set_args(name, **values):
    return lambda t: coll.row(t, name)["args"].update({k.replace("_", " "): v for k, v in values.items()})


def _unjoined_with(key, value):
    def mutate(t):
        r = coll.row(t, "allreduce")
        coll.unjoin(r)
        r["args"][key] = value
        coll.set_counts(t, joined=len(coll.ROWS) - 1, unjoined=1, no_group=1)

    return mutate


def _rank_not_in_group(t):
    # pg_config has this process in group "1" no more: its rows there cannot name its Rank
    t["distributedInfo"]["pg_config"][1]["ranks"] = [0, 3]


def _without(key):
    return lambda t: t["distributedInfo"].pop(key)


def _counts(**counts):
    return lambda t: coll.set_counts(t, **counts)


# (rule, mutation of the valid two-group trace, words the one problem's message must hold)
COLLECTIVE_BROKEN = [
    ("collective-args", _drop_key("allreduce", "Rank"), "lacks Rank"),
    ("collective-args", _drop_key("allgather", "Out msg nelems"), "lacks Out msg nelems"),
    ("collective-args", _drop_key("send", "Src Rank"), "lacks Src Rank"),
    ("collective-args", _drop_key("recv", "comm name"), "lacks comm name"),
    ("collective-args", _set_arg("allreduce", "Group size", "4"), "Group size '4' is a string, not an integer"),
    ("collective-args", _set_arg("allreduce", "Rank", True), "Rank True is a boolean, not an integer"),
    ("collective-args", _set_arg("allreduce", "Process Group Ranks", [0, 1, 2, 3]), "Process Group Ranks [0, 1, 2, 3] is a list"),
    ("collective-args", _set_arg("allreduce", "Seq", -1), "Seq -1 is not an integer >= 1"),
    ("collective-args", _set_arg("allreduce", "Seq", 0), "Seq 0 is not an integer >= 1"),
    ("collective-args", _set_arg("allreduce", "In msg nelems", -8), "In msg nelems -8 is negative"),
    ("collective-args", _set_arg("allreduce", "Collective name", "foo"), "Collective name 'foo' is none that torch-mspti writes"),
    ("collective-args", _set_arg("allreduce", "Collective name", ["allreduce"]),
     "Collective name ['allreduce'] is a list, not a string"),
    ("collective-args", _set_arg("allreduce", "type", "KERNEL"), "type 'KERNEL' is not \"COMMUNICATION\""),
    ("collective-args", _set_args("allreduce", Src_Rank=1), "carries Src Rank, which only send and recv rows carry"),
    ("collective-args", _unjoined_with("Seq", 0), "carries Seq of the join but no Process Group Description"),
    ("collective-args", _unjoined_with("Process Group Name", "0"), "Process Group Name '0' is not its comm name"),
    ("collective-group-mismatch", _set_arg("allreduce", "Process Group Description", "dp"),
     "Process Group Description 'dp' is not pg_config's pg_desc 'default_pg'"),
    ("collective-group-mismatch", _set_arg("allreduce", "Process Group Ranks", "[0, 1, 2]"),
     "Process Group Ranks '[0, 1, 2]' is not pg_config's ranks '[0, 1, 2, 3]'"),
    ("collective-group-mismatch", _set_arg("allreduce", "Group size", 2), "Group size 2 is not pg_config's pg_size 4"),
    ("collective-group-mismatch", _set_arg("allreduce", "Rank", 2), "Rank 2 is not this process's rank in the group (1"),
    ("collective-group-mismatch", _set_args("send", Dst_Rank=2), "Dst Rank 2 is outside [0, Group size 2)"),
    ("collective-group-mismatch", _set_args("send", Src_Rank=1, Dst_Rank=0), "Src Rank 1 of a send is not its Rank 0"),
    ("collective-group-mismatch", _set_args("recv", Dst_Rank=1), "Dst Rank 1 of a recv is not its Rank 0"),
    ("collective-group-mismatch", _set_args("send", Dst_Rank=0), "its Src Rank and Dst Rank are both 0"),
    ("collective-nelems-mismatch", _set_arg("allreduce", "Out msg nelems", 512),
     "Out msg nelems 512 is not In msg nelems 1024, which Collective name 'allreduce'"),
    ("collective-nelems-mismatch", _set_arg("allgather", "Out msg nelems", 256),
     "Out msg nelems 256 is not In msg nelems 256 x Group size 4 = 1024"),
    ("collective-nelems-mismatch", _set_arg("reduce_scatter", "In msg nelems", 256),
     "In msg nelems 256 is not Out msg nelems 256 x Group size 4 = 1024"),
    ("collective-nelems-mismatch", _set_arg("all_to_all", "Out msg nelems", 64), "Out msg nelems 64 is not In msg nelems 128"),
    ("collective-seq-order",
     lambda t: (_set_arg("reduce_scatter", "Seq", 2)(t), _set_arg("all_to_allv", "Seq", 3)(t), _set_arg("broadcast", "Seq", 4)(t)),
     "in group '0' has Seq 2, as has collective 'hcom_allgather"),
    ("collective-seq-order", lambda t: (_set_arg("recv", "Seq", 1)(t), _set_arg("all_to_all", "Seq", 2)(t)),
     "'hcom_recv__430_0_1' at ts 430.000 in group '1' has Seq 1, as has"),
    ("collective-seq-order", lambda t: (_set_arg("allgather", "Seq", 3)(t), _set_arg("reduce_scatter", "Seq", 2)(t)),
     "'hcom_reduce_scatter__440_0_1' at ts 440.000 in group '0' has Seq 2, below Seq 3 of collective 'hcom_allgather"),
    ("collective-seq-order", _set_arg("broadcast", "Seq", 9), "group '0' has Seq 4 and then 9"),
    ("collective-seq-order", lambda t: (_drop_key("broadcast", "Seq")(t), _counts(no_seq=1)(t)),
     "group '0' has 4 row(s) with Seq and 1 without"),
    ("collective-no-distributed-info", lambda t: t.pop("distributedInfo"), "the trace has no distributedInfo"),
    ("collective-no-distributed-info", _without("pg_config"), "a distributedInfo without a pg_config list"),
    ("collective-no-distributed-info", _without("rank"), "a distributedInfo whose rank is None, not an integer"),
    ("collective-count-mismatch", _counts(rows=9, unjoined=1, no_group=1),
     "counts 9 collective rows (collectives.rows) but the trace holds 8"),
    ("collective-count-mismatch", _counts(joined=7, unjoined=1, no_group=1),
     "counts 7 joined collective rows (collectives.joined) but the trace holds 8"),
    ("collective-count-mismatch", _counts(no_seq=3), "joined 8 - no_seq 3 = 5 rows should carry Seq, but 8 do"),
    ("collective-count-mismatch", _counts(unjoined=2), "unjoined 2 is not rows 8 - joined 8"),
    ("collective-count-mismatch", _counts(no_marker=1, no_group=-1), "no integers >= 0: no_group -1"),
    ("collective-group-mismatch",  # group "1" made after start: not in pg_config, its own ranks still checked
     lambda t: (
         t["distributedInfo"].__setitem__("pg_config", t["distributedInfo"]["pg_config"][:1]),
         _set_arg("all_to_all", "Group size", 3)(t),
     ),
     "Group size 3 is not the 2 ranks of Process Group Ranks '[1, 3]'"),
    ("collective-count-mismatch", _counts(rows="8"), "collectives.rows is '8', not an integer"),
]  # fmt: skip


@pytest.mark.parametrize(
    "rule, mutate, words", COLLECTIVE_BROKEN, ids=[f"{r}:{w[:40]}" for r, _, w in COLLECTIVE_BROKEN]
)
def test_each_broken_collective_fails_naming_the_field(rule, mutate, words):
    trace = _collective_trace()
    assert check_trace(trace).ok
    mutate(trace)
    report = check_trace(trace)
    assert report.counts_by_rule == {rule: 1}, [p.message for p in report.problems]
    (problem,) = report.problems
    assert words in problem.message, problem.message
    assert "re-profile" in problem.message
    assert [w.rule for w in report.warnings] in ([], ["collectives-not-joined"], ["collective-group-not-in-pg-config"])


def test_a_row_in_error_is_named_with_its_time_and_event():
    trace = _collective_trace()
    _set_arg("allgather", "Rank", 3)(trace)
    (problem,) = check_trace(trace).problems
    assert problem.message.startswith("collective 'hcom_allgather__420_0_1' at ts 420.000: Rank 3")
    assert "communicator map disagrees with torch.distributed" in problem.message
    assert (problem.event["name"], problem.event["ts"]) == ("hcom_allgather__420_0_1", 420.0)


def test_this_rank_outside_a_group_is_a_mismatch_on_each_of_its_rows():
    trace = _collective_trace()
    _rank_not_in_group(trace)
    report = check_trace(trace)
    assert report.counts_by_rule == {"collective-group-mismatch": 3}, [p.message for p in report.problems]
    assert all("distributedInfo.rank 1 is not among the group's ranks [0, 3]" in p.message for p in report.problems)


def test_a_groups_rows_on_two_streams_may_start_out_of_seq_order():
    # one stream runs its collectives in launch order; two streams of one group need not
    trace = _collective_trace()
    allgather = coll.row(trace, "allgather")
    allgather.update(tid=11, ts=446.0)  # Seq 1 starts after Seq 2 (reduce_scatter at 440), on another stream
    allgather["args"]["stream"] = 11
    trace["traceEvents"].append({"ph": "M", "name": "thread_name", "pid": NPU, "tid": 11, "args": {"name": "s 11"}})
    assert check_trace(trace).ok, [p.message for p in check_trace(trace).problems]
    allgather.update(tid=9)  # on the group's one stream, the same order is broken
    allgather["args"]["stream"] = 9
    assert check_trace(trace).counts_by_rule == {"collective-seq-order": 1}


def test_seq_numbers_each_group_on_its_own():
    trace = _collective_trace()  # both groups have a Seq 0, 1 and 2
    assert {(r["args"]["Process Group Name"], r["args"].get("Seq")) for r in coll.rows(trace)} >= {("0", 1), ("1", 1)}
    assert check_trace(trace).ok


def test_an_unjoined_only_trace_passes_with_the_warning_and_why():
    trace = make_trace()
    coll.warn_not_joined(trace)
    coll.set_counts(trace, no_group=6, bad_message=2, no_marker=0)
    report = check_trace(trace)
    assert report.ok, [p.message for p in report.problems]
    (warning,) = report.warnings
    assert warning.rule == "collectives-not-joined"
    assert warning.message.startswith("8 of 8 collective rows are not joined with their process group")
    assert "carry only MSPTI's fields" in warning.message
    assert "counts why: unjoined 8, bad_message 2 (the range's message is not torch_npu's JSON" in warning.message
    assert warning.message.endswith("no_group 6 (a communicator of no torch.distributed process group of this process)")
    assert "no_marker" not in warning.message  # a reason that counts 0 is none
    assert report.stats.collectives == {"rows": 8, "joined": 0, "with_seq": 0}


def test_some_rows_unjoined_are_counted_in_the_warning_and_checked_against_the_health_report():
    trace = _collective_trace()
    for name in ("send", "recv"):
        coll.unjoin(coll.row(trace, name))
    report = check_trace(trace)
    assert report.counts_by_rule == {"collective-count-mismatch": 1}, [p.message for p in report.problems]
    assert "counts 8 joined collective rows (collectives.joined) but the trace holds 6" in report.problems[0].message
    coll.set_counts(trace, joined=6, unjoined=2, no_group=2)
    report = check_trace(trace)
    assert report.ok and [w.message[:50] for w in report.warnings] == [
        "2 of 8 collective rows are not joined with their p"
    ]
    assert report.stats.collectives == {"rows": 8, "joined": 6, "with_seq": 6}


def test_rows_of_a_torch_mspti_before_the_join_only_warn():
    trace = _collective_trace()
    del trace["torch_mspti"]["collectives"], trace["distributedInfo"]
    for r in coll.rows(trace):
        coll.old_format(r)
    # the HTA-style rows of an older writer carried some of kineto's names, but no description
    coll.row(trace, "allreduce")["args"].update({"Out msg nelems": 1024, "Group size": 4, "Process Group Ranks": "x"})
    report = check_trace(trace)
    assert report.ok, [p.message for p in report.problems]
    (warning,) = report.warnings
    assert warning.rule == "collectives-not-joined" and "predates the join" in warning.message
    del trace["torch_mspti"]
    assert "no health report to say why" in check_trace(trace).warnings[-1].message


def test_a_malformed_collectives_block_of_the_health_report_fails():
    trace = _collective_trace()
    trace["torch_mspti"]["collectives"] = [8, 8]
    report = check_trace(trace)
    assert report.counts_by_rule == {"collective-count-mismatch": 1}
    assert '"collectives" is a list, not an object of counts' in report.problems[0].message


def test_lost_collective_rows_fail_against_the_health_report():
    trace = _collective_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e not in coll.rows(trace)]
    report = check_trace(trace)
    assert report.counts_by_rule == {"collective-count-mismatch": 2}, [p.message for p in report.problems]
    assert "but the trace holds 0" in report.problems[0].message
