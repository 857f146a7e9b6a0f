"""``torch-mspti demo``: profile a demo workload (real NPU when available, else the simulated
one) and write its trace. The workloads and their defaults are :mod:`torch_mspti.sim.workloads`;
``--help`` must not import torch, so it shows a copy of those defaults (tests/test_layering.py
checks that the copy equals the library's ``DEFAULTS``)."""

from __future__ import annotations

import argparse
import sys

from ._output import PROG, one_line

#: workload -> (size, profiled steps) when the command line gives none: for --help only (unset
#: options are not passed, so the library's own defaults apply); equal to
#: torch_mspti.sim.workloads.DEFAULTS.
WORKLOAD_DEFAULTS: dict[str, tuple[int, int]] = {
    "phases": (1024, 1),
    "mlp": (256, 3),
    "transformer": (128, 3),
    "ddp": (256, 2),
}
DEVICES = ("auto", "sim", "real")
LAUNCH_MODES = ("direct", "queued")


def _defaults_text(index: int) -> str:
    return ", ".join(f"{w} {d[index]}" for w, d in WORKLOAD_DEFAULTS.items())


def add_arguments(p: argparse.ArgumentParser, count_arg) -> None:
    p.add_argument(
        "--workload", choices=tuple(WORKLOAD_DEFAULTS), default="phases", help="what to profile (default: phases)"
    )
    p.add_argument(
        "--steps",
        type=count_arg(1),
        metavar="N",
        help=(
            f"profiled steps, N >= 1 (default: {_defaults_text(1)}); mlp and transformer run one "
            "unprofiled warm-up step first"
        ),
    )
    p.add_argument("--size", type=count_arg(1), metavar="N", help=f"problem size (default: {_defaults_text(0)})")
    p.add_argument("--out", metavar="PATH", help="where to write the Chrome trace (default: trace.json)")
    p.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="real: the Ascend NPU (torch_npu); sim: the simulated NPU; auto: real when torch_npu "
        "and CANN are installed, else sim (default: auto)",
    )
    p.add_argument(
        "--launch-mode",
        dest="launch_mode",
        choices=LAUNCH_MODES,
        default="direct",
        help="simulator: launch inside the op (direct) or from a task-queue thread (queued) (default: direct)",
    )
    p.add_argument(
        "--ranks", type=count_arg(1), metavar="N", help="ddp: ranks, one process and one device each (default: 2)"
    )
    p.add_argument(
        "--memcpy",
        action="store_true",
        help="show memory copies and memsets: MSPTI reports them only when its library is in LD_PRELOAD "
        "from process start, so the demo restarts itself with it (the simulator, or the libmspti.so "
        "the plugin finds); the workloads then copy their inputs from host memory and read results "
        "back (default: off)",
    )
    p.add_argument(
        "--cann-root",
        dest="cann_root",
        metavar="DIR",
        help="simulator: report its kernels and mstx markers through the fake CANN layer of DIR (laid out "
        "by the real-MSPTI test fixture's make_root.sh DIR) to Huawei's real MSPTI, DIR/lib64/libmspti.so, "
        "which the plugin reads; one device, no copies or collectives (default: $TORCH_MSPTI_SIM_CANN_ROOT, "
        "else the simulated MSPTI)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        from torch_mspti.sim import demo
    except Exception as exc:  # not built, wrong torch, no simulator: one line, no traceback
        print(f"{PROG} demo: the demo cannot run: {one_line(exc)}", file=sys.stderr)
        return 1
    # Unset options are left out so the demo's own defaults apply.
    kwargs = {
        k: getattr(args, k)
        for k in ("workload", "steps", "size", "out", "device", "launch_mode", "ranks", "cann_root")
        if getattr(args, k) is not None
    }
    if args.memcpy:
        kwargs["memcpy"] = True
    return int(demo.run(**kwargs) or 0)
