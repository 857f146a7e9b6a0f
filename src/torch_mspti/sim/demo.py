"""``torch-mspti demo``: profile a workload on an NPU (real when available, simulated otherwise),
write its chrome trace and print a short summary. The CLI calls :func:`run`."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import warnings
from typing import Any

__all__ = ["run", "summarize_trace", "real_npu_available", "select_device"]

_VIEWERS = "open it at https://ui.perfetto.dev (drag the file in) or in chrome://tracing"


def real_npu_available() -> bool:
    """torch_npu importable and a CANN install visible, without importing torch_npu."""
    if importlib.util.find_spec("torch_npu") is None:
        return False
    cann = os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")
    return bool(cann and os.path.isdir(cann)) or os.path.isdir("/usr/local/Ascend")


def summarize_trace(path: str) -> dict[str, Any]:
    """Counts from a chrome trace: ops (cpu_op), kernels (cat "kernel") and linked kernels (with an
    "External id" in args), plus the kernels' streams and devices."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    linked = [k for k in kernels if "External id" in (k.get("args") or {})]
    streams = sorted({(k.get("pid"), k.get("tid")) for k in kernels}, key=str)
    return {
        "ops": len(ops),
        "kernels": len(kernels),
        "linked": len(linked),
        "linked_ratio": (len(linked) / len(kernels)) if kernels else 0.0,
        "lanes": len(streams),
        "devices": len({k.get("pid") for k in kernels}),
    }


def _last_session() -> dict[str, Any]:
    """The plugin's report of the last profiling session ({} when the plugin or a session is absent)."""
    try:
        import torch_mspti

        return torch_mspti.diagnostics().to_dict().get("last_session") or {}
    except Exception:  # plugin absent, older plugin, no session yet
        return {}


def _unlinked_lines(session: dict[str, Any]) -> list[str]:
    """One summary line per reason device rows of ``session`` (a ``last_session`` report) are not
    linked to an op (the plugin's link states, README "What a link means"). Launches from threads
    that ran no op are blamed on a task queue only when the plugin said most rows came from one
    (its "task-queue" warning); a few, such as the allocator's housekeeping memsets, are named as
    what they are."""
    from torch_mspti_cli._content_rules import UNLINKED_STATES

    links = session.get("links") or {}
    lines = []
    no_op = int(links.get("no_op_on_thread") or 0)
    if no_op and "task-queue" in (session.get("warnings") or []):
        lines.append(
            f"unlinked {no_op} row(s) launched from a task-queue thread, which runs no op (queued launches): "
            "shown on that thread's lane, credited to no op; on torch_npu set TASK_QUEUE_ENABLE=0 for op links"
        )
    elif no_op:
        lines.append(
            f"unlinked {no_op} row(s) launched from a thread that ran no op (e.g. the allocator's housekeeping): "
            "shown on that thread's lane, credited to no op"
        )
    for state, meaning in UNLINKED_STATES.items():
        if state != "no_op_on_thread" and links.get(state):
            fix = "; set torch_mspti.config.enable_api_records = True" if state == "ambiguous" else ""
            lines.append(f"unlinked {links[state]} row(s): {meaning} ({state}){fix}")
    return lines


def select_device(device: str, launch_mode: str = "direct") -> str:
    """Make ``device`` ("auto", "sim" or "real") the process's ``npu``; returns "sim" or "real".

    "auto" is "real" when :func:`real_npu_available`, else "sim" (``torch_mspti.sim.enable(
    launch_mode=launch_mode)``). Raises ValueError for another name, RuntimeError when torch_npu
    sees no NPU or the simulator refuses (see ``torch_mspti.sim.enable``).
    """
    if device not in ("auto", "sim", "real"):
        raise ValueError(f"device must be auto, sim or real, got {device!r}")
    if device == "auto":
        device = "real" if real_npu_available() else "sim"
    if device == "real":
        import torch
        import torch_npu  # noqa: F401  (registers torch.npu)

        if not torch.npu.is_available():
            raise RuntimeError("torch_npu is installed but no Ascend NPU is available")
        return "real"
    from torch_mspti import sim

    sim.enable(launch_mode=launch_mode)
    return "sim"


def run(
    workload: str = "phases",
    steps: int | None = None,
    size: int | None = None,
    out: str = "trace.json",
    device: str = "auto",
    launch_mode: str = "direct",
    ranks: int = 2,
) -> int:
    """Run ``workload`` on the selected NPU, write the trace to ``out`` and print a summary.

    ``ranks`` (workload ``ddp`` only): number of ranks, one process and one device each
    (:mod:`torch_mspti.sim.multirank`); the summary then has one line per rank.

    ``launch_mode`` (simulator only): ``"direct"`` launches kernels inside the op that issued
    them; ``"queued"`` launches them later from a worker thread, as torch_npu's task queue does
    (TASK_QUEUE_ENABLE=1). That thread runs no op, so the kernels are linked to none (never to
    the wrong one): their launches are shown on the worker's own lane, and the summary says why
    they are unlinked (from the plugin's link states in diagnostics).

    ``steps`` (>= 1) is the number of profiled steps, ``size`` (>= 1) the problem size; None
    takes the workload's default (``workloads.DEFAULTS``).

    Returns a process exit code: 0 on success, 1 if the run failed, 2 for bad arguments.
    """
    from . import workloads

    if workload == "ddp" and device in ("auto", "sim", "real"):
        from .multirank import run_demo

        chosen = "real" if device == "real" or (device == "auto" and real_npu_available()) else "sim"
        return run_demo(ranks=ranks, steps=steps, size=size, out=out, device=chosen, launch_mode=launch_mode)

    if workload not in workloads.WORKLOADS:
        print(
            f"torch-mspti demo: unknown workload {workload!r} (choose from {', '.join(sorted(workloads.WORKLOADS))})",
            file=sys.stderr,
        )
        return 2
    for name, value in (("steps", steps), ("size", size)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            print(f"torch-mspti demo: {name} must be an integer >= 1, got {value!r}", file=sys.stderr)
            return 2
    try:
        chosen = select_device(device, launch_mode)
    except Exception as exc:
        print(f"torch-mspti demo: cannot use device {device!r}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1

    if chosen == "sim":
        from torch_mspti import sim
        from torch_mspti._paths import simulator_generation_of

        s = sim.settings()
        generation = simulator_generation_of(s.get("simulator_library") or "") or "?"
        print(
            f"torch-mspti demo: SIMULATED NPU ({s.get('device_count')} devices, "
            f"launch mode {s.get('launch_mode')}, simulated MSPTI {generation}); no Ascend hardware "
            "is used, kernel times are modelled from host compute time."
        )
    else:
        print("torch-mspti demo: real Ascend NPU (torch_npu)")
    d_size, d_steps = workloads.DEFAULTS[workload]
    size = d_size if size is None else size
    steps = d_steps if steps is None else steps
    print(f"running workload {workload!r} (size {size}, steps {steps}) ...", flush=True)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
            path = workloads.run(workload, size=size, steps=steps, out=out)
    except Exception as exc:
        print(f"torch-mspti demo: workload {workload!r} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - t0
    try:
        summary = summarize_trace(path)
    except (OSError, ValueError) as exc:
        print(f"torch-mspti demo: could not read the trace {path}: {exc}", file=sys.stderr)
        return 1

    print(f"done in {elapsed:.1f} s")
    print(f"  ops      {summary['ops']}")
    print(f"  kernels  {summary['kernels']}  on {summary['lanes']} stream lane(s), {summary['devices']} device(s)")
    print(f"  linked   {summary['linked']} ({summary['linked_ratio']:.0%} of kernels have an arrow from an op)")
    session = _last_session()
    drain = session.get("drain")
    if drain:
        print(
            "  drain    " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in drain.items())
        )
    for line in _unlinked_lines(session):
        print(f"  {line}")
    if summary["kernels"] == 0:
        print(f"  note: no kernels in the trace; `torch-mspti doctor {path}` explains why")
    if workload != "phases":
        tb = f"{os.path.splitext(path)[0]}_tb"
        print(f"  TensorBoard copy: {tb}/ (with torch-tb-profiler installed: tensorboard --logdir {tb})")
    print(f"trace: {os.path.abspath(path)}")
    print(f"  {_VIEWERS}")
    return 0
