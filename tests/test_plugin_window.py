"""The profiling window and the lanes of the exported trace (README "Fault handling").

* Window: a row belongs to the session when its launch call started inside [start(), stop()]
  (LaunchTable.h, rule 4), wherever the device ran it. torch.profiler synchronises only the current
  device, so kernels launched in the window on another device may still be running at stop(): they
  are kept. What is still dropped is counted in the trace's health report (``dropped``), warned
  about once and reported by ``torch-mspti check``.
* Lanes: no two device rows of one stream overlap and every user-range span encloses its rows,
  compared in exact ns (simrun.exact_slices: the trace's decimals, not floats). Rows MSPTI reports
  overlapping (the simulator's ``early_start_every``) are moved to the previous row's end and
  counted (``repaired.overlaps``, ``repaired.max_shift_ns``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import native_launcher
import simrun
from sim_support import require_simulator, result, run_checks
from simrun import kernels

from torch_mspti_cli.check import check_trace

# ---------------------------------------------------------------------------------------------
# A device torch.profiler does not synchronise

LONG_NS = 300_000_000  # every simulated-NPU kernel of these checks lasts 300 ms

EDGE = (
    native_launcher.LOAD
    + r"""
import json, os, time
from torch.profiler import profile, ProfilerActivity
import torch_mspti
ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
OUT = os.environ["EDGE_OUT"]

class StderrFile:
    # TORCH_WARN writes to fd 2: catch it in a file for the test to count
    def __init__(self, path):
        self.path = path
    def __enter__(self):
        import sys
        sys.stderr.flush()
        self.saved = os.dup(2)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 2); os.close(fd)
    def __exit__(self, *exc):
        os.dup2(self.saved, 2); os.close(self.saved)

def _profile(name, body):
    a = torch.ones(4, device="npu:0"); b = torch.ones(4, device="npu:1")
    torch.npu.synchronize(0); torch.npu.synchronize(1)
    stamps = {}
    with StderrFile(os.path.join(OUT, name + ".stderr")):
        with profile(activities=ACT) as prof:
            body(a, b)
            stamps["before_stop"] = time.time_ns()
        stamps["after_stop"] = time.time_ns()
        path = os.path.join(OUT, name + ".json")
        prof.export_chrome_trace(path)
    s = torch_mspti.diagnostics(load_library=False).to_dict()["last_session"]
    return path, s, stamps

def _two_devices(a, b):
    c = b * 3   # npu:1, 300 ms
    c = c * 2   # npu:1, another 300 ms: still running when torch.profiler has synchronised npu:0
    a + 1       # npu:0, 300 ms: the current device, which torch.profiler synchronises

def check_unsynchronized_device():
    path, s, _ = _profile("unsynchronized", _two_devices)
    return {"trace": path, "session": s}

def check_launches_after_stop():
    # a runtime thread of our own (native_launcher.py) that keeps launching while stop() runs
    lib = launcher(os.environ["EDGE_LAUNCHER"])
    rc = lib.launcher_start(torch_mspti.sim.simulator_library().encode(), 200, 0)
    assert rc == 0, rc
    try:
        path, s, stamps = _profile("after_stop", _two_devices)
    finally:
        n = lib.launcher_stop()
    launches = [(lib.launcher_start_ns(i), lib.launcher_id(i)) for i in range(n)]
    return {"trace": path, "session": s, "stamps": stamps, "launches": launches}
"""
)


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    require_simulator()
    out = tmp_path_factory.mktemp("edge")
    launcher = native_launcher.compile(out)
    source = EDGE if launcher else EDGE.split("def check_launches_after_stop")[0]
    env = {"EDGE_OUT": str(out), "EDGE_LAUNCHER": str(launcher or "")}
    enable = {"launch_mode": "direct", "fixed_duration_ns": LONG_NS}
    return out, run_checks(source, enable, env=env, timeout=300)


def _names(trace_path) -> Counter:
    return Counter(k["name"] for k in kernels(json.loads(Path(trace_path).read_text())))


def test_kernels_still_running_on_a_device_torch_profiler_did_not_synchronize_are_in_the_trace(edge):
    # torch.profiler waited for npu:0 only; the second Mul on npu:1 ends 300 ms after stop().
    # MSPTI 26.1 (the default simulator) discards what has not ended when it is disabled, so the
    # plugin must wait for npu:1 although no record of it had arrived yet.
    v = result(edge[1], "unsynchronized_device")
    s = v["session"]
    assert _names(v["trace"]) == Counter({"Mul": 2, "Add": 1}), (s["drain"], s["warnings"])
    assert s["drain"]["order"] == "disable_first" and s["drain"]["pending_launches"] == 0, s["drain"]
    assert s["dropped"]["out_of_window"] == 0 and s["warnings"] == [], s
    report = check_trace(v["trace"])
    assert report.ok and report.warnings == [], report.to_dict()


def test_long_kernel_ending_after_stop_is_kept_by_its_launch_time(tmp_path):
    # No device synchronisation at all (simrun's npu module syncs nothing here, and simrun's
    # process has no PrivateUse1 device guard): the drain polls until the record of the 300 ms
    # kernel arrives, well after stop(); its launch lies in the window, so it is kept.
    workload = """
torch.npu.synchronize = lambda *a, **k: None
launch({"name": "Short0", "device": 0})
launch({"name": "Long1", "device": 1, "dur_ns": 300_000_000})
"""
    run = simrun.run(workload, tmp_path, config={"drain_order": "poll_first"})
    session = run.diagnostics["last_session"]
    assert Counter(k["name"] for k in kernels(run.trace)) == Counter({"Short0": 1, "Long1": 1}), session
    long1 = next(k for k in kernels(run.trace) if k["name"] == "Long1")
    assert simrun.end(long1) > simrun.cpu_time_range(run.trace)[1]  # it really ended after the profile
    assert session["dropped"]["out_of_window"] == 0 and session["drain"]["exit_reason"] == "balanced", session
    assert not run.doctor_warnings(), run.doctor_warnings()


def test_launches_after_stop_are_dropped_counted_warned_once_and_reported_by_check(edge):
    out, results = edge
    if "launches_after_stop" not in results:
        pytest.skip("no C compiler for the native launch thread")
    v = result(results, "launches_after_stop")
    s, stamps = v["session"], v["stamps"]
    minted = [(t, cid) for t, cid in v["launches"] if cid]
    in_trace = _names(v["trace"])["NativeK"]
    # The plugin waited ~300 ms for npu:1 inside stop(): the native thread launched meanwhile.
    assert sum(1 for t, _ in minted if t > stamps["after_stop"]) == 0  # no id once collection stopped
    before = sum(1 for t, _ in minted if t < stamps["before_stop"])
    assert in_trace >= before, (in_trace, before)  # every launch that surely lies in the window is kept
    out_of_window = s["dropped"]["out_of_window"]
    assert out_of_window > 0, s
    # nothing lost silently: each launch that got an id is a row, a counted drop, or a pending launch.
    # A launch between start()'s Enable(KERNEL) and Enable(API) has a kernel record and no launch
    # record, below the session's first own id: it is counted as an earlier session's record.
    edge_launches = s["dropped"]["earlier_session"]
    assert edge_launches <= 2, s["dropped"]
    # launches made after stop() began (the native thread goes on while the drain keeps KERNEL on for
    # the window's launches): a row outside the window, or counted as unanswered after stop()
    accounted = (
        in_trace + out_of_window + s["drain"]["pending_launches"] + s["drain"]["unanswered_after_stop"] + edge_launches
    )
    assert accounted == len(minted), (in_trace, out_of_window, edge_launches, len(minted), s["drain"], s["dropped"])
    assert _names(v["trace"])["Mul"] == 2
    # the health report in the trace carries the count
    health = json.loads(Path(v["trace"]).read_text())["torch_mspti"]
    assert health["dropped"]["out_of_window"] == out_of_window
    # one warning, naming the count and the cause
    warned = [ln for ln in (out / "after_stop.stderr").read_text().splitlines() if "profiling window" in ln]
    assert len(warned) == 1 and f"{out_of_window} records were dropped as outside the profiling window" in warned[0], (
        warned
    )
    assert s["warnings"].count("window") == 1
    # `torch-mspti check` passes (nothing is malformed) but says what is missing
    proc = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "check", v["trace"]],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "1000"},  # one line per row
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "records-dropped" in proc.stdout and f"{out_of_window} out_of_window" in proc.stdout, proc.stdout


# ---------------------------------------------------------------------------------------------
# Overlapping rows on one stream


def _early_starts(tmp_path, count: int, early_ns: int):
    """One launch of ``count`` 20 µs kernels back to back on a fresh stream; the simulator reports
    every second one (ordinals 2, 4, ... of that stream) starting ``early_ns`` early. Returns the
    run, the stream's rows in exact ns (sorted by start) and the session's repair counters."""
    workload = f"""
launch({{"name": "Early", "count": {count}, "stream": 7, "dur_ns": 20000}})
sync()
"""
    run = simrun.run(workload, tmp_path, sim_options={"early_start_every": 2, "early_start_ns": early_ns})
    rows = [r for r in simrun.exact_slices(run.trace_paths[0], ("kernel",)) if r["tid"] == 7]
    rows.sort(key=lambda r: (r["start_ns"], r["end_ns"]))
    assert len(rows) == count
    assert not simrun.lane_violations(rows), simrun.lane_violations(rows)[:3]
    return run, rows, run.diagnostics["last_session"]["repaired"]


def test_early_starts_are_moved_to_the_previous_end_and_counted_with_the_largest_shift(tmp_path):
    # 5 µs early: each early row starts inside its predecessor
    run, rows, repaired = _early_starts(tmp_path, 10, 5000)
    # each early row lost exactly the 5 µs it overlapped: the rows are back to back again, 20 µs each
    for a, b in zip(rows, rows[1:], strict=False):
        assert b["start_ns"] == a["end_ns"], (a, b)
    assert {r["end_ns"] - r["start_ns"] for r in rows} == {20000}
    assert repaired["overlaps"] == 5 and repaired["max_shift_ns"] == 5000, repaired
    health = run.trace["torch_mspti"]
    assert health["repaired"]["overlaps"] == 5 and health["repaired"]["max_shift_ns"] == 5000
    assert check_trace(run.trace).ok


def test_a_row_reported_before_its_predecessor_keeps_its_place_its_length_and_every_row(tmp_path):
    # 30 µs early with 20 µs kernels: each early row is reported starting before the row it
    # follows. The stream ran them in order, so the rows stay in launch order, back to back,
    # 20 µs each: no device time moves from one row (and its op) to another.
    run, rows, repaired = _early_starts(tmp_path, 8, 30000)
    for a, b in zip(rows, rows[1:], strict=False):
        assert b["start_ns"] == a["end_ns"], (a, b)
    assert {r["end_ns"] - r["start_ns"] for r in rows} == {20000}, rows
    assert repaired["overlaps"] == 4 and repaired["max_shift_ns"] == 30000, repaired
    report = check_trace(run.trace)  # rows emptied by the repair are accounted for in the report
    assert report.ok, report.to_dict()


def test_user_range_spans_enclose_their_rows_exactly_on_the_stream_lane(tmp_path):
    # Back-to-back ranges whose kernels touch across the range boundary: kineto's writer widens
    # every GPU_USER_ANNOTATION by 1 ns on each side, so unless the plugin narrows the span first,
    # a range's span overlaps the last kernel of the range before it.
    workload = """
for r in range(3):
    with record_function(f"range{r}"):
        launch({"name": f"R{r}", "count": 3, "stream": 4, "dur_ns": 200000})
sync()
"""
    run = simrun.run(workload, tmp_path)
    slices = [s for s in simrun.exact_slices(run.trace_paths[0]) if s["tid"] == 4]
    spans = [s for s in slices if s["cat"] == "gpu_user_annotation"]
    rows = [s for s in slices if s["cat"] == "kernel"]
    assert len(rows) == 9 and {s["name"] for s in spans} == {"range0", "range1", "range2"}, spans
    assert not simrun.lane_violations(slices), simrun.lane_violations(slices)[:3]
    for span in spans:
        inside = [r for r in rows if r["name"] == "R" + span["name"][-1]]
        assert span["start_ns"] == min(r["start_ns"] for r in inside), span
        assert span["end_ns"] == max(r["end_ns"] for r in inside), span
