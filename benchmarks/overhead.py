"""Host overhead of profiling small ops on the simulated NPU, plugin on versus off (B1b).

Run by run.py in a fresh interpreter (torch_mspti.sim.enable() renames PrivateUse1 for good):

    python benchmarks/overhead.py --consumer <libbench_consumer.so> [--ops N] [--reps R] [--json out]

Workload: N tiny in-place ops (``x.zero_()`` on a 1-element npu tensor: ~3 us of host work, one
kernel each) on the simulated NPU in direct launch mode (the launch runs inside the op, on its
thread, as torch_npu with TASK_QUEUE_ENABLE=0), then ``torch.npu.synchronize()``; the timed
region is that loop plus the synchronize, inside the ``with profile(...)`` block (profiler start
and stop/processing are not timed: the drain and trace-processing benchmarks measure them).
``gc.collect()`` runs before each timed loop: the previous arm's profiler results are cyclic
garbage whose collection would otherwise land in whichever arm comes next.

Arms, order rotated over R rounds after one discarded warm-up round:
  plugin    profile(activities=[CPU, PrivateUse1]): torch-mspti's session collects the kernels
            (correlation push/pop on every op, EXTERNAL_CORRELATION and RUNTIME_API records)
  cpu_only  profile(activities=[CPU]) while a bare MSPTI consumer (benchmarks/cpp/bench_consumer.c:
            Subscribe, RegisterCallbacks, Enable(KERNEL) only) keeps the simulator minting ids and
            writing kernel records, so both arms pay the simulator's own cost
  pu1_idle  profile(activities=[CPU, PrivateUse1]) with the consumer holding MSPTI's only
            subscriber, so torch-mspti's session cannot arm and collects nothing: torch's and
            kineto's PrivateUse1-mode cost with the simulator recording as in cpu_only
Time: the CPU time of the op thread over the loop (time.thread_time()): on a shared machine the
wall time of a 40 ms loop mostly measures other processes' scheduling (wall-time ratios are
reported too). The simulator's own threads (delivery, completions) are not in it, in either arm.
Figure: median over rounds of t(plugin) / t(cpu_only); target <= 1.05. Split into
t(pu1_idle) / t(cpu_only) (torch + kineto) and t(plugin) / t(pu1_idle) (the plugin's collection:
push/pop into MSPTI, EXTERNAL_CORRELATION and RUNTIME_API records, buffer completions).
Completeness: the plugin's session reports exactly the kernels the device launched in its arm
(``diagnostics().to_dict()["last_session"]["rows"]["kernels"]``), each linked to its op and
verified (``["links"]["verified"]``), and the consumer counted every kernel of its arm; anything
else fails the benchmark.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CompletenessError, emit, ratio_summary, summarize


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--consumer", required=True)
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json")
    a = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    import torch_mspti
    import torch_mspti.sim as sim

    sim.enable(device_count=1, launch_mode="direct", housekeeping_every=0)
    lib = ctypes.CDLL(sim.simulator_library())
    lib.msptiSimSetOption.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    # Records arrive 20 ms after the kernel: shortens the untimed stop, changes nothing timed.
    lib.msptiSimSetOption(b"delivery_delay_ns", 20_000_000)

    consumer = ctypes.CDLL(a.consumer)
    consumer.bench_consumer_load.argtypes = [ctypes.c_char_p]
    consumer.bench_consumer_stop.restype = ctypes.c_int64
    consumer.bench_consumer_stop.argtypes = [ctypes.c_int64]
    if consumer.bench_consumer_load(sim.simulator_library().encode()) != 0:
        raise SystemExit("bench_consumer: cannot resolve MSPTI from the simulator")

    x = torch.zeros(1, device="npu")
    torch.npu.synchronize()

    wall = [0.0]  # wall time of the last loop; loop() returns the thread's CPU time

    def loop() -> float:
        # The previous arm's profiler results are cyclic garbage; collecting them here keeps
        # the interpreter's GC passes over them out of this arm's timing.
        gc.collect()
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(a.ops):
            x.zero_()
        torch.npu.synchronize()
        wall[0] = time.perf_counter() - t0
        return time.thread_time() - c0

    def arm_plugin() -> float:
        k0 = sim.device_counters()["kernels"]
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            t = loop()
        launched = sim.device_counters()["kernels"] - k0
        last = torch_mspti.diagnostics(load_library=False).to_dict()["last_session"]
        got, verified = last["rows"]["kernels"], last["links"]["verified"]
        if got != launched or launched != a.ops or verified != got:
            raise CompletenessError(f"plugin arm: {launched} kernels launched, {got} collected, {verified} verified")
        return t

    def arm_cpu_only() -> float:
        k0 = sim.device_counters()["kernels"]
        rc = consumer.bench_consumer_start()
        if rc != 0:
            raise SystemExit(f"bench_consumer_start failed: {rc}")
        with profile(activities=[ProfilerActivity.CPU]):
            t = loop()
        got = consumer.bench_consumer_stop(a.ops)
        launched = sim.device_counters()["kernels"] - k0
        if got != launched or launched != a.ops:
            raise CompletenessError(f"cpu_only arm: {launched} kernels launched, consumer received {got}")
        return t

    def arm_pu1_idle() -> float:
        # torch and kineto in PrivateUse1 mode, the plugin's session present but idle: the
        # consumer holds MSPTI's only subscriber, so the session cannot arm (it warns and collects
        # nothing; push/pop take the disarmed path) while the simulator records as in cpu_only.
        k0 = sim.device_counters()["kernels"]
        rc = consumer.bench_consumer_start()
        if rc != 0:
            raise SystemExit(f"bench_consumer_start failed: {rc}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
                t = loop()
        got = consumer.bench_consumer_stop(a.ops)
        launched = sim.device_counters()["kernels"] - k0
        if got != launched or launched != a.ops:
            raise CompletenessError(f"pu1_idle arm: {launched} kernels launched, consumer received {got}")
        return t

    arms = {"plugin": arm_plugin, "cpu_only": arm_cpu_only, "pu1_idle": arm_pu1_idle}
    for fn in arms.values():  # warm-up round, discarded
        fn()
    times: dict[str, list[float]] = {k: [] for k in arms}
    names = list(arms)
    walls: dict[str, list[float]] = {k: [] for k in arms}
    for r in range(a.reps):
        for k in names[r % 3 :] + names[: r % 3]:  # rotate the order
            times[k].append(arms[k]())
            walls[k].append(wall[0])
    plugin, cpu_only, idle = times["plugin"], times["cpu_only"], times["pu1_idle"]
    emit(
        {
            "bench": "overhead",
            "params": {"ops": a.ops, "reps": a.reps, "op": "x.zero_() on npu (1 element), direct launch"},
            "plugin_us_per_op": summarize([t / a.ops * 1e6 for t in plugin]),
            "cpu_only_us_per_op": summarize([t / a.ops * 1e6 for t in cpu_only]),
            "pu1_idle_us_per_op": summarize([t / a.ops * 1e6 for t in idle]),
            "ratio": ratio_summary(plugin, cpu_only),
            "ratio_pu1_idle_vs_cpu_only": ratio_summary(idle, cpu_only),
            "ratio_plugin_vs_pu1_idle": ratio_summary(plugin, idle),
            "wall_ratio": ratio_summary(walls["plugin"], walls["cpu_only"]),
            "wall_us_per_op": {k: summarize([t / a.ops * 1e6 for t in v]) for k, v in walls.items()},
            "ok": True,
        },
        a.json,
    )


if __name__ == "__main__":
    main()
