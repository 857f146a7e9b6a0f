"""Per-process session rules: CPU-side correlation ids, CPU-only profiling, an unnamed backend."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from simrun import flow_events, kernels, launches

from torch_mspti_cli.check import check_trace

WORKLOAD = """
with record_function(f"profile{profile_index}"):
    for i in range(3):
        launch(f"P{profile_index}_K{i}")
    torch.ones(3) * 2
launch_bare(f"P{profile_index}_bare")
sync()
"""

NO_DEVICE_CALL = ("buffers_requested", "kernel_records", "external_records", "api_records", "buffers_completed")


def test_cpu_side_correlation_ids_are_unique_over_five_profiles_and_below_uint32_max(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, profiles=5)
    assert len(run.profiles) == 5
    ids = [i for p in run.profiles for i in p["cpu_correlation_ids"]]
    assert all(p["cpu_correlation_ids"] for p in run.profiles)
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes, f"CPU-side correlation ids repeat across profiles: {sorted(dupes)[:10]}"
    assert all(0 < i < 2**32 - 1 for i in ids), [i for i in ids if not 0 < i < 2**32 - 1]
    # the launch events are CPU-typed too: their ids are the plugin's, in [2^30, 2^31), all distinct
    launch_ids = [e["args"]["correlation"] for t in run.traces for e in launches(t)]
    assert launch_ids and all(2**30 <= i < 2**31 for i in launch_ids)
    assert set(launch_ids) <= set(ids)
    # every profile collected its own kernels
    for p, t in zip(run.profiles, run.traces, strict=True):
        names = {k["name"] for k in kernels(t)}
        assert set(names) and all(n.startswith(f"P{p['index']}_") for n in names), names


def test_cpu_only_profiling_after_registration_makes_no_mspti_call_and_adds_no_device_event(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, profiles=2, activities=("CPU",))
    before, after = run.sim_stats_before, run.sim_stats_after
    for key in NO_DEVICE_CALL:
        assert after[key] == before[key] == 0, (key, before, after)
    assert after["external_stack_depth"] == 0
    # kernel collection never enabled: the simulator minted no correlation id for any launch
    assert run.launched and all(k["correlation"] == 0 for k in run.launched)
    for trace in run.traces:
        assert simrun.cpu_ops(trace), "no cpu_op events in a CPU-only trace"
        assert not kernels(trace) and not launches(trace)
        assert not flow_events(trace, "s") and not flow_events(trace, "f")
        assert check_trace(trace, allow_empty=True).ok
    assert all(p["kernels"] == [] for p in run.profiles)
    assert run.diagnostics["last_session"] is None
    assert run.diagnostics["plugin"]["device_sessions"] == 0


def test_cpu_only_profiling_after_a_device_profile_makes_no_mspti_call(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, profiles=2, activities=[("CPU", "PrivateUse1"), ("CPU",)])
    device, cpu_only = run.profiles
    assert kernels(run.traces[0]), "the device profile collected nothing"
    for key in NO_DEVICE_CALL:
        assert cpu_only["sim_stats"][key] == device["sim_stats"][key], (key, device["sim_stats"], cpu_only["sim_stats"])
    assert all(k["correlation"] == 0 for k in run.launched if k["profile_index"] == 1)
    trace = run.traces[1]
    assert not kernels(trace) and not launches(trace) and not flow_events(trace, "s")
    assert cpu_only["kernels"] == []
    assert run.diagnostics["plugin"]["device_sessions"] == 1


def test_unnamed_privateuse1_backend_is_reported_in_diagnostics(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, rename=False, profiles=0)
    plugin = run.diagnostics["plugin"]
    assert plugin["registered"] is True
    assert plugin["backend_named"] is False, plugin


def test_named_privateuse1_backend_is_reported_in_diagnostics(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, profiles=0)
    plugin = run.diagnostics["plugin"]
    assert plugin["backend_named"] is True, plugin
    assert plugin["privateuse1_backend"] == "npu"


RELEASE = """
import ctypes
import torch_mspti
from torch.profiler import ProfilerActivity, profile

def check_release():
    # MSPTI's Unsubscribe waits out its channel poller's poll (the simulator's unsubscribe_poll_ns,
    # 300 ms here; about 1 s on the real library over its fake driver, docs/mspti.md 2.2)
    sim = ctypes.CDLL(torch_mspti.sim.settings()["simulator_library"])
    assert sim.msptiSimSetOption(b"unsubscribe_poll_ns", ctypes.c_int64(300_000_000)) == 0
    out = []
    for i in range(2):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            for n in range(20):
                torch.ops.npu_sim.launch_kernel(f"K{i}_{n}", 0, 1000)
            torch.npu.synchronize()
        d = torch_mspti.diagnostics(load_library=False).to_dict()
        device = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
        out.append({"release": d["plugin"]["release"], "session": d["last_session"],
                    "kernels": sorted(n for n in device if n.startswith(f"K{i}_"))})
    return out
"""


def test_stop_leaves_msptis_slow_unsubscribe_to_the_release_and_the_next_profile_waits_for_it():
    from sim_support import require_simulator, result, run_checks

    require_simulator()
    first, second = result(run_checks(RELEASE, {"launch_mode": "direct"}), "release")
    # stop() returned while the Unsubscribe still ran on the release thread ...
    assert first["release"]["in_flight"] is True, first["release"]
    # ... and the next profile's configure waited for it, then collected everything
    assert second["session"]["timings"]["release_wait_ms"] > 0, second["session"]["timings"]
    for i, r in enumerate((first, second)):
        assert r["kernels"] == sorted(f"K{i}_{n}" for n in range(20)), r["kernels"]
        assert r["session"]["errors"] == [] and r["session"]["drain"]["pending_launches"] == 0, r["session"]
