"""stop() drains: kernel records that arrive long after the workload still reach the trace.

The simulator delivers each kernel record 200 ms after the kernel ends. With ``disable_pulls=0``
and ``drop_after_disable=1`` a Disable pulls nothing from the device and discards whatever becomes
due afterwards (the behaviour of MSPTI generations before 26.1), so only polling FlushAll while the
kinds are still enabled can collect them. The workload synchronises the device before the profile
ends, so every kernel has run: after a balanced drain the kernel set must be exactly the launched one.

Launches whose work makes no KERNEL record (collectives, runtime calls that launch nothing, kernels
of a CANN that needs the preload) must not keep the drain waiting for its timeout.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from sim_support import require_simulator, result, run_checks
from simrun import kernels

from torch_mspti_cli.check import check_trace

LATE_DELAY_NS = 200_000_000
NO_PULL = {"disable_pulls": 0, "drop_after_disable": 1}

WORKLOAD = """
for i in range(6):
    launch(f"Late_{i}", {"name": f"LateVec_{i}", "type": "KERNEL_AIVEC", "stream": 2})
launch_bare({"name": "LateBare", "stream": 3})
sync()
out["stats_at_exit"] = sim_stats()
"""

MULTI_WORKLOAD = """
for i in range(3):
    launch({"name": f"Multi_{i}", "count": 4, "stream": 1 + i})
sync()
"""


def _expected(run) -> Counter:
    return Counter(k["name"] for k in run.launched for _ in range(k["count"]))


def _assert_complete(run):
    drain = run.diagnostics["last_session"]["drain"]
    assert all(k["correlation"] > 0 for k in run.launched), "the simulator did not record every launch"
    got = Counter(k["name"] for k in kernels(run.trace))
    expected = _expected(run)
    assert got == expected, (
        f"missing {expected - got}, extra {got - expected}; drain {drain}; sim {run.sim_stats_after}"
    )
    assert drain["exit_reason"] == "balanced", drain
    assert drain["pending_launches"] == 0, drain
    report = check_trace(run.trace)
    assert report.ok, report.to_dict()
    return drain


def test_poll_first_drain_collects_every_kernel_delivered_200ms_late_when_disable_pulls_nothing(tmp_path):
    run = simrun.run(
        WORKLOAD, tmp_path, delay_ns=LATE_DELAY_NS, sim_options=NO_PULL, config={"drain_order": "poll_first"}
    )
    drain = _assert_complete(run)
    assert drain["order"] == "poll_first"
    # the records really were late: still in flight when the workload left the profile
    assert run.extra["stats_at_exit"]["records_pending"] >= 1, run.extra
    assert drain["records_during_drain"] >= 1, drain
    assert run.sim_stats_after["records_dropped"] == 0, run.sim_stats_after
    assert run.sim_stats_after["records_pending"] == 0, run.sim_stats_after


def test_poll_first_drain_collects_every_kernel_of_multi_kernel_launches(tmp_path):
    # one launch, four kernels: the ledger is satisfied by the first; the siblings must follow
    run = simrun.run(
        MULTI_WORKLOAD, tmp_path, delay_ns=LATE_DELAY_NS, sim_options=NO_PULL, config={"drain_order": "poll_first"}
    )
    _assert_complete(run)
    assert run.sim_stats_after["records_dropped"] == 0, run.sim_stats_after


def test_auto_drain_with_a_261_library_disables_first_and_collects_late_kernels(tmp_path):
    # the simulator is a 26.1-generation library (msptiActivityIsEnabled, Disable pulls)
    run = simrun.run(WORKLOAD, tmp_path, delay_ns=LATE_DELAY_NS)
    assert "26.1" in (run.diagnostics["library"]["version"] or ""), run.diagnostics["library"]
    drain = _assert_complete(run)
    assert drain["order"] == "disable_first"


def test_auto_drain_with_a_260_library_polls_first_and_collects_late_kernels(tmp_path):
    # the 26.0-generation simulator: no msptiActivityIsEnabled, and its Disable pulls nothing
    # (disable_pulls defaults to 0 there), so only polling before Disable collects the late records
    run = simrun.run(WORKLOAD, tmp_path, delay_ns=LATE_DELAY_NS, generation="26.0")
    assert not (run.diagnostics["library"]["version"] or "").startswith(">=26.1"), run.diagnostics["library"]
    assert "msptiActivityIsEnabled" not in run.diagnostics["library"]["symbols"]["resolved"]
    drain = _assert_complete(run)
    assert drain["order"] == "poll_first"


# ---------------------------------------------------------------------------------------------
# Ids that never get a KERNEL record do not hold the drain (CorrelationLedger: only the launch
# classes being collected are waited for)

COLLECTIVE_WORKLOAD = """
import ctypes
comm = sim.msptiSimLaunchCommunication
comm.restype = ctypes.c_uint64
comm.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64,
                 ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_char_p]
sim.msptiSimRuntimeCall.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
sim.msptiSimRuntimeCall(b"aclrtSynchronizeDevice", 0)  # carries the previous session's id, or 0
launch("Before")
out.setdefault("collectives", []).append(
    comm(b"hcom_allReduce__1_0_1", b"ring", b"group0", 4, 1024, 0, 6, 30000, None))
sim.msptiSimRuntimeCall(b"aclrtSynchronizeStream", 0)  # carries the collective's id
launch("After")
sync()
"""


@pytest.mark.parametrize(
    "order, communication",
    [("disable_first", True), ("poll_first", True), ("disable_first", False)],
    ids=["disable-first", "poll-first", "communication-not-collected"],
)
def test_collectives_and_runtime_calls_do_not_hold_the_drain(order, communication, tmp_path):
    # api_records_per_launch: six runtime API records around each kernel launch, half of them
    # with the previous launch's id, half sharing the new one (the CANN runtime's pattern)
    run = simrun.run(
        COLLECTIVE_WORKLOAD,
        tmp_path,
        profiles=2,
        sim_options={"api_records_per_launch": 6},
        config={"drain_order": order, "enable_communication": communication},
    )
    minted = [cid for cid in run.extra["collectives"] if cid]
    assert len(minted) == (2 if communication else 0), run.extra  # the collective had an id of its own
    for profile, trace in zip(run.profiles, run.traces, strict=True):
        drain = profile["session"]["drain"]
        assert drain["exit_reason"] == "balanced" and drain["pending_launches"] == 0, drain
        names = Counter(k["name"] for k in kernels(trace))
        expected = {"Before": 1, "After": 1} | ({"hcom_allReduce__1_0_1": 1} if communication else {})
        assert names == Counter(expected), names
        assert profile["session"]["warnings"] == [], profile["session"]["warnings"]
    assert not run.doctor_warnings(), run.doctor_warnings()  # no "kernels missing", no timeout


def test_collectives_of_the_simulated_device_do_not_hold_the_drain():
    source = """
    from torch.profiler import profile, ProfilerActivity
    import torch_mspti
    def check_collective():
        x = torch.ones(4, device="npu")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            for _ in range(3):
                x = x + 1
                stream = torch.ops.npu_sim.communication_stream(0)
                torch.ops.npu_sim.launch_communication("hcom_allReduce__9_0_1", "ring", "world", 4, 4, 0, stream,
                                                       20000, "")
            torch.npu.synchronize()
        s = torch_mspti.diagnostics(load_library=False).to_dict()["last_session"]
        names = sorted(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
                       and not e.is_user_annotation)
        return {"drain": s["drain"], "warnings": s["warnings"], "communications": s["rows"]["communications"],
                "names": names}
    """
    require_simulator()
    v = result(run_checks(source, {"launch_mode": "direct"}), "collective")
    assert v["drain"]["exit_reason"] == "balanced" and v["drain"]["pending_launches"] == 0, v["drain"]
    assert v["communications"] == 3 and v["names"].count("hcom_allReduce__9_0_1") == 3, v
    assert v["warnings"] == [], v["warnings"]


@pytest.mark.parametrize("order", ["poll_first", "disable_first"])
def test_kernels_needing_the_preload_end_the_drain_at_once_and_the_warning_names_ld_preload(order, tmp_path):
    # A library before 26.0 knows a device only through the preloaded library's aclrtSetDevice
    # (mspti.md 5.5; the 8.x simulators default to kernels_need_preload=1): ids, external and API
    # records, never a KERNEL record. That is evidence that no row can come: no wait.
    run = simrun.run(WORKLOAD, tmp_path, generation="8.2", config={"drain_order": order})
    session = run.diagnostics["last_session"]
    drain = session["drain"]
    assert not kernels(run.trace) and session["records_by_kind"].get("KERNEL", 0) == 0
    assert drain["order"] == order and drain["exit_reason"] == "no_row_can_come", drain
    assert drain["evidence"] == "kernels_need_preload" and drain["pending_launches"] == len(run.launched), drain
    assert drain["flushes"] == 2, drain  # the one that found no kernel, the one after the Disables
    warnings = run.doctor_warnings()
    assert len(warnings) == 1, warnings
    assert "no KERNEL" in warnings[0] and "LD_PRELOAD=" + run.diagnostics["library"]["path"] in warnings[0], warnings
    assert "predates 26.0" in warnings[0], warnings
    # check and doctor name the same cause and fix, not "did the code run on the NPU?"
    report = check_trace(run.trace)
    (problem,) = [p for p in report.problems if p.rule == "no-device-activity"]
    assert "predates 26.0" in problem.message and "LD_PRELOAD=" + run.diagnostics["library"]["path"] in problem.message


def test_the_same_library_preloaded_is_waited_for_and_loses_nothing(tmp_path):
    # the evidence is the missing preload, not the generation: preloaded, 8.2 delivers every kernel
    run = simrun.run(WORKLOAD, tmp_path, generation="8.2", delay_ns=LATE_DELAY_NS, preload=True)
    drain = _assert_complete(run)
    assert drain["evidence"] == "" and drain["order"] == "poll_first", drain


def test_a_26_library_without_kernel_records_is_waited_for_until_the_timeout(tmp_path):
    # From 26.0 a device is known without the preload (libprofapi's device callback): no evidence,
    # so the launches hold the drain to drain_timeout_ms, and the warning names both causes.
    run = simrun.run(WORKLOAD, tmp_path, sim_options={"kernels_need_preload": 1}, config={"drain_timeout_ms": 300})
    session = run.diagnostics["last_session"]
    drain = session["drain"]
    assert not kernels(run.trace)
    assert drain["exit_reason"] == "timeout" and drain["evidence"] == "", drain
    assert drain["pending_launches"] == len(run.launched), drain
    (warning,) = run.doctor_warnings()
    assert "no KERNEL record within drain_timeout_ms=300" in warning and "LD_PRELOAD" in warning, warning


# ---------------------------------------------------------------------------------------------
# A launch the session saw holds the drain until its row arrives (issue: the drain gave up on
# launches it knew were pending when Disable pulled nothing)

LATE_WORKLOAD = """
for i in range(20):
    launch({"name": f"Late_{i}", "stream": 1 + i % 3})
launch({"name": "LateTriple", "count": 3, "stream": 4})
launch_bare({"name": "LateBare", "stream": 5})
launch_bare({"name": "LateBare2", "stream": 5})
sync()
out["stats_at_exit"] = sim_stats()
"""


@pytest.mark.parametrize("order", ["auto", "poll_first"])
def test_an_is_enabled_library_whose_disable_pulls_nothing_loses_no_late_kernel(order, tmp_path):
    # msptiActivityIsEnabled exists (auto picks disable_first), but Disable pulls nothing from the
    # driver (every library before 26.1, or a 26.1 with a slow driver): the records keep coming
    # ~200 ms after their kernels ended. Every one of the 23 launches must reach the trace.
    config = {} if order == "auto" else {"drain_order": order}
    run = simrun.run(
        LATE_WORKLOAD,
        tmp_path,
        delay_ns=LATE_DELAY_NS,
        sim_options={"disable_pulls": 0, "drop_after_disable": 0},
        config=config,
    )
    drain = _assert_complete(run)
    assert drain["order"] == ("disable_first" if order == "auto" else "poll_first"), drain
    assert len(run.launched) == 23
    # the records were still on their way when the profile ended, and came during the drain
    assert run.extra["stats_at_exit"]["records_pending"] >= 20, run.extra
    assert drain["records_during_drain"] >= 20, drain
    # the drain waited for them, not for the timeout: it ended balanced, KERNEL on all along (the
    # pull was tried with COMMUNICATION, which no launch of the session needed)
    assert drain["pulled_by"] == ("COMMUNICATION" if order == "auto" else ""), drain
    assert run.sim_stats_after["records_dropped"] == 0, run.sim_stats_after


@pytest.mark.parametrize("order", ["auto", "poll_first"])
def test_a_library_that_discards_after_disable_keeps_records_of_work_still_running(order, tmp_path):
    # 26.1's Disable pulls what has ended and stops its parser: a kernel still running then (a
    # device torch.profiler did not synchronise) would be lost. The drain keeps KERNEL on (the pull
    # is made by COMMUNICATION's Disable with disable_first) until its row arrives.
    workload = """
torch.npu.synchronize = lambda *a, **k: None
launch({"name": "Short0", "device": 0})
launch({"name": "Long1", "device": 1, "dur_ns": 300_000_000})
"""
    config = {"synchronize_devices": False} | ({} if order == "auto" else {"drain_order": order})
    run = simrun.run(workload, tmp_path, delay_ns=LATE_DELAY_NS, config=config)
    session = run.diagnostics["last_session"]
    drain = session["drain"]
    assert Counter(k["name"] for k in kernels(run.trace)) == Counter({"Short0": 1, "Long1": 1}), drain
    assert drain["exit_reason"] == "balanced" and drain["pending_launches"] == 0, drain
    assert drain["pulled_by"] == ("COMMUNICATION" if order == "auto" else ""), drain
    assert not run.doctor_warnings(), run.doctor_warnings()


def test_the_drain_still_ends_at_once_when_disable_pulls_everything(tmp_path):
    # the default simulator (26.1, Disable pulls; its reader parses after the Disable returned):
    # COMMUNICATION's Disable pulls the kernels' records while KERNEL stays on, and the drain ends
    # balanced on them. The device would hand nothing over for 30 s (far past drain_timeout_ms), so
    # a complete trace proves that the pull brought every record and the drain did not wait for
    # MSPTI's own delivery. (The number of flushes depends on when the reader thread runs: on a
    # loaded machine one more flush may come before its parse.)
    run = simrun.run(LATE_WORKLOAD, tmp_path, delay_ns=30_000_000_000)
    drain = _assert_complete(run)
    assert drain["order"] == "disable_first" and drain["pulled_by"] == "COMMUNICATION", drain
    assert run.sim_stats_after["records_dropped"] == 0, run.sim_stats_after


COPIES_ON_THE_DEVICE = """
import torch_mspti
from torch.profiler import profile, ProfilerActivity
def check_copies():
    torch_mspti.config.enable_api_records = False
    torch_mspti.config.enable_memcpy_memset = False
    torch_mspti.config.drain_order = "poll_first"
    x = torch.ones(1024)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(4):
            y = x.to("npu") + 1  # a copy (an id, no row) and a kernel
        torch.npu.synchronize()
    s = torch_mspti.diagnostics(load_library=False).to_dict()["last_session"]
    names = sorted(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
                   and not e.is_user_annotation)
    return {"drain": s["drain"], "warnings": s["warnings"], "names": names}
"""


def test_without_api_records_a_copy_that_is_not_collected_does_not_hold_the_drain_to_the_timeout():
    # API records off: every launch is known only from its external-correlation record, so its
    # class is unknown. With the library preloaded, copies mint ids too, and with copies not
    # collected they never get a row. The devices were synchronised, so once every row is due
    # (MSPTI's delay, bounded by the rows that came during the drain) they are let go, and every
    # late kernel is kept.
    require_simulator()
    from sim_support import simulator_library_path

    v = result(
        run_checks(COPIES_ON_THE_DEVICE, {"launch_mode": "direct"}, env={"LD_PRELOAD": simulator_library_path()}),
        "copies",
    )
    drain = v["drain"]
    assert v["names"].count("Add") == 4, v  # every kernel kept
    assert drain["exit_reason"] == "no_row_can_come" and drain["evidence"] == "unclassified_quiet", drain
    assert drain["pending_launches"] >= 4, drain  # the copies
    assert drain["ms"] < 1000 * 0.9, drain  # not the timeout (drain_timeout_ms 1000)
    assert "unclassified" in v["warnings"], v["warnings"]


BLIND_WORKLOAD = """
with record_function("op"):
    for i in range(3):
        launch({"name": f"Seen_{i}", "stream": 1})
launch_bare({"name": "Unseen", "stream": 2, "dur_ns": 50_000_000})  # outside any op: no external record
sync()
"""


@pytest.mark.parametrize("generation", ["8.0.RC3", "26.0"])
def test_without_api_records_no_late_kernel_is_lost_even_when_no_record_announced_it(generation, tmp_path):
    # No API records: on 8.0.RC3 nothing announces a launch (no external correlation), on 26.0 a
    # launch outside any op leaves no record. The drain cannot know those rows are coming, so it
    # waits until every row is due; with nothing that proves it here (no device guard: simrun's
    # launches are not through a backend) that is the timeout (README, Known limitations (7)), and
    # the one warning about API records names the fix.
    run = simrun.run(
        BLIND_WORKLOAD,
        tmp_path,
        generation=generation,
        delay_ns=LATE_DELAY_NS,
        preload=generation == "8.0.RC3",
        config={"enable_api_records": False, "drain_timeout_ms": 600},
    )
    drain = run.diagnostics["last_session"]["drain"]
    got = Counter(k["name"] for k in kernels(run.trace))
    assert got == _expected(run), (got, drain, run.sim_stats_after)
    assert run.sim_stats_after["records_dropped"] == 0, run.sim_stats_after
    assert drain["exit_reason"] == "timeout" and drain["pending_launches"] == 0, drain
    assert sum("enable_api_records" in w for w in run.doctor_warnings()) <= 1, run.doctor_warnings()


def test_without_api_records_late_kernels_hold_the_drain_when_no_copy_can_be_rowless(tmp_path):
    # the same kind of launches without the preload: no copy mints an id, so every unclassified
    # launch is a kernel or a collective and holds the drain; and since without API records some
    # launches are invisible (launch_bare: outside any op), the drain also waits until every row
    # is due, here (no device guard to synchronise) until the timeout: nothing is lost
    run = simrun.run(
        LATE_WORKLOAD,
        tmp_path,
        delay_ns=LATE_DELAY_NS,
        sim_options={"disable_pulls": 0, "drop_after_disable": 1},
        config={"drain_order": "poll_first", "enable_api_records": False, "drain_timeout_ms": 600},
    )
    drain = run.diagnostics["last_session"]["drain"]
    got = Counter(k["name"] for k in kernels(run.trace))
    assert got == _expected(run), (got, drain)
    assert drain["exit_reason"] == "timeout" and drain["pending_launches"] == 0, drain
    assert drain["records_during_drain"] >= 20, drain
    assert run.sim_stats_after["records_dropped"] == 0, run.sim_stats_after
