"""stop() drains: kernel records that arrive long after the workload still reach the trace.

The simulator delivers each kernel record 200 ms after the kernel ends. With ``disable_pulls=0``
and ``drop_after_disable=1`` a Disable pulls nothing from the device and discards whatever becomes
due afterwards (the behaviour of MSPTI generations before 26.1), so only polling FlushAll while the
kinds are still enabled can collect them. The workload synchronises the device before the profile
ends, so every kernel has run: after a balanced drain the kernel set must be exactly the launched one.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from simrun import kernels

from torch_mspti.check import check_trace

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
