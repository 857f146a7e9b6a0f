"""Trace processing through torch (B3py): what collecting N kernels adds to the profiler's exit, events() and
export_chrome_trace(), next to what torch spends on N CPU ops, all in one process.

    python benchmarks/trace_processing.py [--n N] [--reps R] [--json out]

Arms, interleaved (rotating order) over R repeats, each with ``gc.collect()`` first:
  torch_ops   profile([CPU]) around N ``torch.empty(0)``: torch's own cost per CPU op
  npu_cpu     profile([CPU]) around N ``x.zero_()`` on the simulated NPU (direct launch, one
              kernel each): the same ops without kernel collection
  npu_plugin  profile([CPU, PrivateUse1]) around the same N ops: torch-mspti collects the N kernels
For each arm three timings: ``__exit__`` (torch's stop, kineto's processing, our stop() drain and
processTrace, torch's result building), ``events()`` (Python event list) and
``export_chrome_trace()``. The plugin's per-kernel share is (npu_plugin - npu_cpu) / N, compared
with torch's per-op cost torch_ops / N (target: per-kernel cost no higher than per-op cost, for
the exit; events() and export are torch's own code handling our activities, reported). The exit's
added cost is also split: ours (our stop() and processTrace, from the session's timings in
``torch_mspti.diagnostics()``, same repeat) and the rest, torch and kineto turning our activities
into their events: the ratio a plugin emitting the same activities at no cost of its own would have.
Simulator: records are delivered 2 ms after each kernel and the driver flush takes 1 ms, so the
drain inside the exit is a few ms (B2 measures the drain itself).
Completeness: the plugin's session reports exactly N kernels, each linked to its op and verified,
events() holds N PrivateUse1 kernel events, and the exported trace holds N "kernel" events.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CompletenessError, check_session, emit, npu_zero_ops, setup_simulator, summarize


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    import torch_mspti

    setup_simulator()

    n = a.n
    x = torch.zeros(1, device="npu")
    torch.npu.synchronize()
    tmpdir = tempfile.mkdtemp(prefix="tm_bench_")

    def timed(activities, body, check=None):
        """One profile of ``body``: the seconds of __exit__, events() and export_chrome_trace(), and
        (plugin arm) our stop() + processTrace inside that exit, in seconds, from the session's timings."""
        gc.collect()
        p = profile(activities=activities)
        p.__enter__()
        body()
        t0 = time.perf_counter()
        p.__exit__(None, None, None)
        t1 = time.perf_counter()
        ours = None
        if ProfilerActivity.PrivateUse1 in activities:
            timings = torch_mspti.diagnostics().last_session.to_dict()["timings"]
            ours = (timings["stop_ms"] + timings["process_trace_ms"]) / 1e3
        evs = p.events()
        t2 = time.perf_counter()
        path = os.path.join(tmpdir, "trace.json")
        p.export_chrome_trace(path)
        t3 = time.perf_counter()
        if check:
            check(p, evs, path)
        os.unlink(path)
        del evs, p
        return t1 - t0, t2 - t1, t3 - t2, ours

    def torch_ops():
        for _ in range(n):
            torch.empty(0)

    def npu_ops():
        npu_zero_ops(x, n)

    def check_plugin(p, evs, path):
        check_session(n, "npu_plugin")
        in_events = sum(1 for e in evs if e.device_type == torch.autograd.DeviceType.PrivateUse1)
        with open(path) as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        exported = sum(1 for e in events if e.get("cat") == "kernel")
        if not (in_events == n and exported == n):
            raise CompletenessError(f"npu_plugin: {n} kernels launched; events() {in_events}, export {exported}")

    arms = {
        "torch_ops": lambda: timed([ProfilerActivity.CPU], torch_ops),
        "npu_cpu": lambda: timed([ProfilerActivity.CPU], npu_ops),
        "npu_plugin": lambda: timed([ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], npu_ops, check_plugin),
    }
    names = list(arms)
    res = {k: {"exit": [], "events": [], "export": []} for k in names}
    ours_in_exit = []  # per repeat: our stop() + processTrace inside the npu_plugin arm's exit, s
    for r in range(a.reps):
        for k in names[r % 3 :] + names[: r % 3]:
            e, v, x_, ours = arms[k]()
            res[k]["exit"].append(e)
            res[k]["events"].append(v)
            res[k]["export"].append(x_)
            if ours is not None:
                ours_in_exit.append(ours)
    os.rmdir(tmpdir)

    out = {"bench": "trace_processing", "params": {"n": n, "reps": a.reps}, "arms": {}, "per_unit_us": {}, "ok": True}
    for k in names:
        out["arms"][k] = {phase: summarize(v) for phase, v in res[k].items()}
    for phase in ("exit", "events", "export"):
        plugin_share = [
            (p - c) / n * 1e6 for p, c in zip(res["npu_plugin"][phase], res["npu_cpu"][phase], strict=False)
        ]
        torch_op = [t / n * 1e6 for t in res["torch_ops"][phase]]
        out["per_unit_us"][phase] = {
            "plugin_per_kernel": summarize(plugin_share),
            "torch_per_op": summarize(torch_op),
            "ratio": summarize([p / t for p, t in zip(plugin_share, torch_op, strict=False) if t]),
        }
    # The exit's added cost split into ours (stop() + processTrace, the session's own timings of
    # the same repeat) and the rest: torch and kineto turning our activities into their events,
    # what the added cost would be if the plugin's own work took no time.
    exit_added = [(p - c) / n * 1e6 for p, c in zip(res["npu_plugin"]["exit"], res["npu_cpu"]["exit"], strict=False)]
    ours_us = [o / n * 1e6 for o in ours_in_exit]
    rest_us = [e - o for e, o in zip(exit_added, ours_us, strict=False)]
    torch_op = [t / n * 1e6 for t in res["torch_ops"]["exit"]]
    out["exit_split_us"] = {
        "ours_per_kernel": summarize(ours_us),
        "torch_kineto_per_kernel": summarize(rest_us),
        "ours_ratio": summarize([o / t for o, t in zip(ours_us, torch_op, strict=False) if t]),
        "torch_kineto_ratio": summarize([r / t for r, t in zip(rest_us, torch_op, strict=False) if t]),
    }
    emit(out, a.json)


if __name__ == "__main__":
    main()
