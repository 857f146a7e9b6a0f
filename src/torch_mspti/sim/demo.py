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
    "External id" in args), the kernels' streams and devices, memory copies (cat "gpu_memcpy",
    also per "copy kind") and memsets (cat "gpu_memset")."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    linked = [k for k in kernels if "External id" in (k.get("args") or {})]
    streams = sorted({(k.get("pid"), k.get("tid")) for k in kernels}, key=str)
    copies = [e for e in events if e.get("cat") == "gpu_memcpy" and e.get("ph") == "X"]
    kinds: dict[str, int] = {}
    for c in copies:
        kind = str((c.get("args") or {}).get("copy kind", "?"))
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "ops": len(ops),
        "kernels": len(kernels),
        "linked": len(linked),
        "linked_ratio": (len(linked) / len(kernels)) if kernels else 0.0,
        "lanes": len(streams),
        "devices": len({k.get("pid") for k in kernels}),
        "memcpys": len(copies),
        "copy_kinds": dict(sorted(kinds.items())),
        "memsets": sum(1 for e in events if e.get("cat") == "gpu_memset" and e.get("ph") == "X"),
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
    linked to an op (the plugin's link states, README "Links: what an arrow means"). Launches from threads
    that ran no op are blamed on a task queue only when the plugin said most rows came from one
    (its "task-queue" warning); a few, such as the allocator's housekeeping memsets, are named as
    what they are."""
    from torch_mspti import link_states

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
    for s in link_states():
        state = s["name"]
        if not s["linked"] and state != "no_op_on_thread" and links.get(state):
            fix = "; set torch_mspti.config.enable_api_records = True" if state == "ambiguous" else ""
            lines.append(f"unlinked {links[state]} row(s): {s['meaning']} ({state}){fix}")
    return lines


def _cann_root_wanted(cann_root: str | None) -> str | None:
    """The CANN root of the real-MSPTI mode the demo runs with: ``cann_root``, else
    ``TORCH_MSPTI_SIM_CANN_ROOT`` (as ``torch_mspti.sim.enable`` reads it); None when neither is set."""
    return cann_root or os.environ.get("TORCH_MSPTI_SIM_CANN_ROOT", "").strip() or None


def select_device(device: str, launch_mode: str = "direct", cann_root: str | None = None) -> str:
    """Make ``device`` ("auto", "sim" or "real") the process's ``npu``; returns "sim" or "real".

    "auto" is "real" when :func:`real_npu_available` and no CANN root is wanted, else "sim"
    (``torch_mspti.sim.enable(launch_mode=launch_mode, cann_root=cann_root)``). Raises ValueError
    for another name, or "real" with a CANN root; RuntimeError when torch_npu sees no NPU or the
    simulator refuses (see ``torch_mspti.sim.enable``).
    """
    if device not in ("auto", "sim", "real"):
        raise ValueError(f"device must be auto, sim or real, got {device!r}")
    root = _cann_root_wanted(cann_root)
    if root and device == "real":
        raise ValueError(
            "a CANN root (--cann-root, TORCH_MSPTI_SIM_CANN_ROOT) runs the simulated NPU over the real MSPTI; "
            "it does not apply to the real device (use --device sim or auto)"
        )
    if device == "auto":
        device = "real" if real_npu_available() and not root else "sim"
    if device == "real":
        import torch
        import torch_npu  # noqa: F401  (registers torch.npu)

        if not torch.npu.is_available():
            raise RuntimeError("torch_npu is installed but no Ascend NPU is available")
        return "real"
    from torch_mspti import sim

    sim.enable(launch_mode=launch_mode, cann_root=root)
    return "sim"


def _preload_library(device: str) -> str:
    """The MSPTI library ``--memcpy`` preloads: the simulator the demo will use, or for the real
    NPU the libmspti.so the plugin's library search finds. Raises RuntimeError when there is none."""
    if device == "auto":
        device = "real" if real_npu_available() else "sim"
    if device == "sim":
        from . import _simulator_for_plugin

        return _simulator_for_plugin()
    import torch_mspti

    lib = torch_mspti.diagnostics(load_library=True).library
    if not lib.available or not lib.path:
        raise RuntimeError(f"no libmspti.so to preload: {lib.reason} ({lib.fix})")
    return lib.path


# The options of run() that a command line (main, the --memcpy restart) passes, and their types.
_OPTIONS: dict[str, type] = {
    "workload": str,
    "steps": int,
    "size": int,
    "out": str,
    "device": str,
    "launch_mode": str,
    "ranks": int,
    "memcpy": bool,
    "cann_root": str,
}


def _command_line(**options: Any) -> list[str]:
    """``python -m torch_mspti.sim.demo`` (:func:`main`) with ``options`` (None values left out):
    the library's own entry point, so that the restart needs no command-line package."""
    argv = [sys.executable, "-m", "torch_mspti.sim.demo"]
    for key, value in options.items():
        if value is True:
            argv.append("--" + key.replace("_", "-"))
        elif value is not None and value is not False:
            argv += ["--" + key.replace("_", "-"), str(value)]
    return argv


def _restart_for_copies(device: str, **options: Any) -> int:
    """With the MSPTI library in LD_PRELOAD already: 0 (go on). Otherwise restart the demo with it
    (does not return), or print why not and return 1."""
    from . import preload

    try:
        library = _preload_library(device)
        if preload.is_preloaded(library):
            return 0
        print(
            f"torch-mspti demo: restarting with LD_PRELOAD={library}: MSPTI reports memory copies "
            "and memsets only when it is preloaded at process start"
        )
        preload.restart(library, _command_line(device=device, memcpy=True, **options))
    except (OSError, RuntimeError) as exc:
        print(f"torch-mspti demo: --memcpy: {exc}", file=sys.stderr)
    return 1


def run(
    workload: str = "phases",
    steps: int | None = None,
    size: int | None = None,
    out: str = "trace.json",
    device: str = "auto",
    launch_mode: str = "direct",
    ranks: int = 2,
    memcpy: bool = False,
    cann_root: str | None = None,
) -> int:
    """Run ``workload`` on the selected NPU, write the trace to ``out`` and print a summary.

    ``memcpy``: show memory copies. MSPTI reports them only with its library in ``LD_PRELOAD``
    from process start (mspti.md 5.5), so without it the demo restarts itself (``os.execve``, see
    :mod:`torch_mspti.sim.preload`) with the simulator (``device="sim"``) or the libmspti.so the
    plugin finds (``device="real"``) preloaded; the phases, mlp and transformer workloads then take
    their inputs from host memory and read results back (HtoD and DtoH copies).

    ``ranks`` (workload ``ddp`` only): number of ranks, one process and one device each
    (:mod:`torch_mspti.sim.multirank`); the summary then has one line per rank.

    ``launch_mode`` (simulator only): ``"direct"`` launches kernels inside the op that issued
    them; ``"queued"`` launches them later from a worker thread, as torch_npu's task queue does
    (TASK_QUEUE_ENABLE=1). That thread runs no op, so the kernels are linked to none (never to
    the wrong one): their launches are shown on the worker's own lane, and the summary says why
    they are unlinked (from the plugin's link states in diagnostics).

    ``cann_root`` (simulator only; None reads ``TORCH_MSPTI_SIM_CANN_ROOT``): a CANN root laid out
    by the real-MSPTI fixture's ``make_root.sh DIR``; the simulated NPU then reports its kernels
    through that root's fake CANN layer to Huawei's real MSPTI, which the plugin reads (see
    ``torch_mspti.sim.enable``). The layer has one device and no copies or collectives, so the
    ``ddp`` workload and ``memcpy`` are refused (exit code 2).

    ``steps`` (>= 1) is the number of profiled steps, ``size`` (>= 1) the problem size; None
    takes the workload's default (``workloads.DEFAULTS``).

    Returns a process exit code: 0 on success, 1 if the run failed, 2 for bad arguments.
    """
    from . import workloads

    root = _cann_root_wanted(cann_root)
    if root and (memcpy or workload == "ddp"):
        what = "the ddp workload (collectives)" if workload == "ddp" else "--memcpy (copies and memsets)"
        print(
            f"torch-mspti demo: {what} cannot run over the real MSPTI: the fake CANN layer of {root} models "
            "kernel launches and mstx markers only",
            file=sys.stderr,
        )
        return 2
    if memcpy:
        extra = {"ranks": ranks} if workload == "ddp" else {}
        options = dict(workload=workload, steps=steps, size=size, out=out, launch_mode=launch_mode, **extra)
        if _restart_for_copies(device, **options):
            return 1
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
        chosen = select_device(device, launch_mode, root)
    except Exception as exc:
        print(f"torch-mspti demo: cannot use device {device!r}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1

    if chosen == "sim":
        from torch_mspti import sim
        from torch_mspti._paths import simulator_generation_of

        s = sim.settings()
        if s.get("mspti") == "real":
            mspti = f"the real MSPTI {s.get('mspti_library')} over the fake CANN layer of {s.get('cann_root')}"
        else:
            mspti = f"simulated MSPTI {simulator_generation_of(s.get('simulator_library') or '') or '?'}"
        print(
            f"torch-mspti demo: SIMULATED NPU ({s.get('device_count')} device{'' if s.get('device_count') == 1 else 's'}, "
            f"launch mode {s.get('launch_mode')}, {mspti}); no Ascend hardware "
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
            path = workloads.run(workload, size=size, steps=steps, out=out, copies=memcpy)
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
    print(f"  linked   {summary['linked']} ({summary['linked_ratio']:.1%} of kernels have an arrow from an op)")
    if memcpy or summary["memcpys"] or summary["memsets"]:
        kinds = ", ".join(f"{k} {n}" for k, n in summary["copy_kinds"].items())
        print(f"  copies   {summary['memcpys']} memcpy ({kinds or 'none'}), {summary['memsets']} memset")
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


def main(argv: list[str] | None = None) -> int:
    """``python -m torch_mspti.sim.demo [--workload W] [--steps N] ...``: :func:`run` with the
    options :func:`_command_line` writes (the ``--memcpy`` restart runs it). Users run the same
    demo as ``torch-mspti demo``, whose ``--help`` describes the options."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m torch_mspti.sim.demo", description=run.__doc__.splitlines()[0])
    for key, kind in _OPTIONS.items():
        flag = "--" + key.replace("_", "-")
        if kind is bool:
            parser.add_argument(flag, dest=key, action="store_true")
        else:
            parser.add_argument(flag, dest=key, type=kind)
    args = parser.parse_args(argv)
    return run(**{k: v for k, v in vars(args).items() if v is not None})


if __name__ == "__main__":
    sys.exit(main())
