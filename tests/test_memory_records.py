"""MSPTI MEMORY records: the runtime's device allocations and releases (mspti.md 5.8).

The simulated NPU's caching allocator takes device memory in 2 MiB segments with aclrtMalloc when
its allocated bytes outgrow what it holds, and gives segments back with aclrtFree in
``torch.npu.empty_cache()`` (src/sim/device/NpuSimMemory.cpp), as torch_npu's does. With the
simulator in ``LD_PRELOAD`` MSPTI's hooks write one MEMORY record per call, and the trace must show:

* each record as an instant on its device's "NPU memory" lane with its bytes and address, linked
  to the op (or user range) whose thread made the call;
* a counter track of the net bytes allocated since the session began, one sample per record,
  ending at the growth of ``memory_reserved()`` over the session (kineto counter events, where
  the torch build has them);
* the counts in the health report (``memory``) and MEMORY in ``records_by_kind``;
* as MSPTI does, a release of memory allocated before MEMORY was collected reports 0 bytes.

Without the preload there are no MEMORY records, and the capability notes say why and how to fix it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks, simulator_library_path

CHECKS = r"""
import json, tempfile
import torch_mspti
from torch.profiler import ProfilerActivity, profile, record_function

ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
MIB = 1 << 20

def _trace(prof):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        return json.load(open(f.name))

def check_memory_step():
    torch.npu.synchronize()
    before = torch.npu.memory_reserved()
    with profile(activities=ACT) as prof:
        with record_function("grow"):
            held = [torch.empty(3 * MIB, dtype=torch.uint8, device="npu") for _ in range(3)]
        grown = torch.npu.memory_reserved()
        del held
        with record_function("release"):
            torch.npu.empty_cache()
        torch.npu.synchronize()
    after = torch.npu.memory_reserved()
    data = _trace(prof)
    ev = data["traceEvents"]
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    ops = {e["args"]["External id"]: e["name"] for e in ev
           if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})}
    instants = [{"name": e["name"], "pid": e["pid"], "tid": e["tid"], "ts": e["ts"], "args": e["args"],
                 "lane": lanes.get((e["pid"], e["tid"]))}
                for e in ev if e.get("ph") == "X" and e["name"] in ("Memory Allocation", "Memory Release")]
    counters = [{"name": e["name"], "pid": e["pid"], "ts": e["ts"], "args": e["args"]}
                for e in ev if e.get("ph") == "C"]
    d = torch_mspti.diagnostics().to_dict()
    averages = {e.key: (e.count, e.self_device_time_total) for e in prof.key_averages()}
    return {"before": before, "grown": grown, "after": after, "instants": instants, "counters": counters,
            "counter_row": averages.get("NPU runtime memory"),
            "ops": {str(k): v for k, v in ops.items()}, "session": d["last_session"],
            "counter_events": d["torch"]["counter_events"], "notes": d["library"]["capability_notes"]}

def check_host_clock_times():
    # Every record on MSPTI's host clock (memory events, copies, host markers) lands where it
    # happened, whichever clock the library reports that clock on (run with api_clock=0 and 1).
    import ctypes, os, time
    sim = ctypes.CDLL(torch_mspti.simulator_library())
    sim.msptiSimSetOption.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    assert sim.msptiSimSetOption(b"api_clock", int(os.environ["SIM_API_CLOCK"])) == 0
    torch.npu.synchronize()
    torch.npu.empty_cache()
    before = time.time_ns()
    with profile(activities=ACT) as prof:
        held = torch.empty(3 * MIB, dtype=torch.uint8, device="npu")
        held.copy_(torch.ones(3 * MIB, dtype=torch.uint8))
        r = torch.npu.mstx.range_start("host-range")
        torch.npu.mstx.mark("host-mark")
        torch.npu.mstx.range_end(r)
        del held
        torch.npu.empty_cache()
        torch.npu.synchronize()
    after = time.time_ns()
    data = _trace(prof)
    ev, base = data["traceEvents"], data.get("baseTimeNanoseconds", 0)  # ts is µs after the base
    before, after = before - base, after - base
    rows = [{"name": e["name"], "cat": e.get("cat"), "ts": e["ts"]} for e in ev if e.get("ph") == "X" and (
        e["name"] in ("Memory Allocation", "Memory Release") or e.get("cat") == "gpu_memcpy"
        or "marker id" in e.get("args", {}))]
    d = torch_mspti.diagnostics().to_dict()["last_session"]
    return {"before_us": before / 1e3, "after_us": after / 1e3, "rows": rows, "host_clock": d["host_clock"],
            "dropped": d["dropped"]}

def check_release_of_earlier_allocation():
    # Segments taken before any session (MEMORY off): MSPTI never recorded them, so their release
    # inside the session reports 0 bytes.
    torch.npu.empty_cache()
    held = torch.empty(5 * MIB, dtype=torch.uint8, device="npu")
    reserved = torch.npu.memory_reserved()
    del held
    with profile(activities=ACT) as prof:
        with record_function("release"):
            torch.npu.empty_cache()
    data = _trace(prof)
    releases = [e["args"] for e in data["traceEvents"] if e.get("ph") == "X" and e["name"] == "Memory Release"]
    counters = [e["args"]["allocated"] for e in data["traceEvents"] if e.get("ph") == "C"]
    d = torch_mspti.diagnostics().to_dict()
    return {"reserved": reserved, "after": torch.npu.memory_reserved(), "releases": releases,
            "counters": counters, "memory": d["last_session"]["memory"]}
"""


@pytest.fixture(scope="module")
def preloaded_results():
    require_simulator()
    return run_checks(CHECKS, {"launch_mode": "direct"}, env={"LD_PRELOAD": simulator_library_path()})


@pytest.fixture(scope="module")
def preloaded(preloaded_results):
    return result(preloaded_results, "memory_step")


@pytest.fixture(scope="module")
def plain():
    require_simulator()
    return result(run_checks(CHECKS, {"launch_mode": "direct"}), "memory_step")


@pytest.mark.parametrize("api_clock, clock", [(0, "realtime"), (1, "monotonic_raw")])
def test_host_clock_records_are_on_the_sessions_clock(api_clock, clock):
    # MSPTI builds that report host times on raw CLOCK_MONOTONIC_RAW do so for every host-side
    # record (mspti.md 4): memory events, copies and host markers are converted as API records are,
    # not dropped as outside the window or drawn near 1970.
    env = {"LD_PRELOAD": simulator_library_path(), "SIM_API_CLOCK": str(api_clock)}
    r = result(run_checks(CHECKS, {"launch_mode": "direct"}, env=env), "host_clock_times")
    assert r["host_clock"] == clock, r
    kinds = {row["name"] if row["cat"] != "gpu_memcpy" else "copy" for row in r["rows"]}
    assert {"Memory Allocation", "Memory Release", "copy", "host-range", "host-mark"} <= kinds, r["rows"]
    for row in r["rows"]:
        assert r["before_us"] <= row["ts"] <= r["after_us"], row
    assert r["dropped"]["out_of_window"] == 0, r["dropped"]


def test_a_release_of_memory_allocated_before_the_session_reports_no_bytes(preloaded_results):
    r = result(preloaded_results, "release_of_earlier_allocation")
    assert r["reserved"] > 0 and r["after"] == 0
    assert r["releases"] and all(x["bytes"] == 0 for x in r["releases"])
    assert r["memory"]["releases"] == len(r["releases"]) == r["memory"]["releases_without_bytes"]
    assert all(v == 0 for v in r["counters"])  # the counter cannot fall by bytes it was not told


def _segments(r):
    allocs = [i for i in r["instants"] if i["name"] == "Memory Allocation"]
    releases = [i for i in r["instants"] if i["name"] == "Memory Release"]
    return allocs, releases


def test_each_runtime_allocation_is_an_instant_on_the_npu_memory_lane_with_bytes_and_address(preloaded):
    r = preloaded
    allocs, releases = _segments(r)
    # The segments the allocator took during "grow" add up to the growth of its reserved memory.
    assert allocs and sum(a["args"]["bytes"] for a in allocs) == r["grown"] - r["before"]
    assert all(a["args"]["bytes"] % (2 << 20) == 0 for a in allocs)
    # empty_cache() gave every segment back: one release per allocation, same address and bytes.
    assert r["after"] == 0
    assert sorted((a["args"]["address"], a["args"]["bytes"]) for a in allocs) == sorted(
        (x["args"]["address"], x["args"]["bytes"]) for x in releases
    )
    assert {(i["pid"], i["lane"]) for i in r["instants"]} == {(0, "NPU memory")}
    assert len({a["args"]["address"] for a in allocs}) == len(allocs)
    assert all(int(a["args"]["address"], 16) > 0 for a in allocs)


def test_memory_events_are_linked_to_the_op_whose_thread_made_the_call(preloaded):
    r = preloaded
    allocs, releases = _segments(r)
    assert all(i["args"]["link"] == "verified" for i in allocs + releases), [i["args"] for i in allocs + releases]
    # An allocation happens inside aten::empty (under "grow"); empty_cache() runs in no aten op,
    # so its releases belong to the innermost range open on the thread: "release".
    assert {r["ops"][str(a["args"]["op"])] for a in allocs} == {"aten::empty"}
    assert {r["ops"][str(x["args"]["op"])] for x in releases} == {"release"}


def test_the_counter_track_follows_the_net_bytes_allocated(preloaded):
    r = preloaded
    s = r["session"]
    n = len(r["instants"])
    if not r["counter_events"]:
        # The documented behaviour where kineto has no counter events: no track, none counted.
        assert r["counters"] == [] and s["memory"]["counter_samples"] == 0 and r["counter_row"] is None
        return
    track = [c for c in r["counters"] if c["name"] == "NPU runtime memory"]
    assert len(track) == n == s["memory"]["counter_samples"]
    values = [c["args"]["allocated"] for c in sorted(track, key=lambda c: c["ts"])]
    assert max(values) == r["grown"] - r["before"] and values[-1] == r["after"] - r["before"]
    assert {c["pid"] for c in track} == {0}
    # torch lists the samples as device events of that name, with no device time.
    assert r["counter_row"] == [n, 0.0]


def test_the_health_report_counts_the_memory_records(preloaded):
    s = preloaded["session"]
    allocs, releases = _segments(preloaded)
    assert s["records_by_kind"]["MEMORY"] == len(allocs) + len(releases)
    assert s["memory"]["allocations"] == len(allocs) and s["memory"]["releases"] == len(releases)
    assert s["memory"]["releases_without_bytes"] == 0
    assert s["memory"]["linked_to_op"] == len(allocs) + len(releases)
    assert s["rows"]["memory_events"] == len(allocs) + len(releases)
    assert "MEMORY" in s["enabled_kinds"] and s["errors"] == []
    assert s["drain"]["exit_reason"] == "balanced"


def test_without_the_preload_there_are_no_memory_records_and_the_notes_say_why(plain):
    r = plain
    assert r["instants"] == [] and r["counters"] == []
    assert r["grown"] > r["before"]  # the allocator did take segments
    note = r["notes"].get("memory", "")
    assert "MEMORY" in note and "LD_PRELOAD" in note, r["notes"]
    assert r["session"]["errors"] == []
