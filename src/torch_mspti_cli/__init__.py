"""The ``torch-mspti`` command line: ``doctor``, ``check``, ``ranks`` and ``demo``.

A top-level package outside torch_mspti and free of torch: importing any ``torch_mspti.<sub>``
runs ``torch_mspti/__init__.py``, which imports torch (seconds). So ``--help``, ``--version`` and
``check`` (whose engine, :mod:`torch_mspti_cli.check`, is pure Python) never import torch;
``doctor`` and ``demo`` import torch_mspti inside their own ``try``, so a package that cannot be
imported (not built, a torch of another minor) gives a one-line reason and exit status 1, never a
traceback.

Exit codes: 0 success; 1 a finding (trace problems, NPU collection not possible, demo failure);
2 bad usage or an unreadable trace. Human output uses the terminal's full width and wraps at
spaces only; ``--json`` prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]

PROG = "torch-mspti"


class _VersionAction(argparse.Action):
    """``--version``, reading the installed version only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .cmd_doctor import version

        print(f"{PROG} {version()}")
        parser.exit()


def _ratio_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within [0, 1], got {text}")
    return v


def _count_arg(minimum: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {v}")
        return v

    return parse


def build_parser() -> argparse.ArgumentParser:
    from . import cmd_demo

    p = argparse.ArgumentParser(prog=PROG, description="Ascend NPU kernels in torch.profiler traces via MSPTI.")
    p.add_argument("--version", action=_VersionAction, help="print the installed version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser(
        "doctor",
        help="can NPU kernels be collected here? why is my NPU lane empty? (exit 1 if not possible)",
        description="Without arguments: this machine's libmspti search, plugin registration and settings. "
        "--probe: profile a few ops in a child process and report that session instead. "
        "TRACE.json: explain the health report torch-mspti embedded in an exported trace.",
    )
    d.add_argument("trace", metavar="TRACE.json", nargs="?", help="explain this trace's health report")
    d.add_argument(
        "--probe",
        action="store_true",
        help="run a short profile in a child process (the real NPU when torch_npu and CANN are "
        "installed, else the simulated NPU) and report its link ratio, drain and capabilities",
    )
    d.add_argument(
        "--device",
        choices=cmd_demo.DEVICES,
        default="auto",
        help="the device --probe profiles on (default: auto)",
    )
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.set_defaults(command_module="cmd_doctor")

    c = sub.add_parser("check", help="validate an exported Chrome trace (structure, device activity, health report)")
    c.add_argument("trace", metavar="TRACE.json", help="trace file (JSON, optionally gzip)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument(
        "--min-link-ratio",
        type=_ratio_arg,
        metavar="R",
        help="fail when fewer than this share (0..1) of kernels is linked to an op (default: no minimum)",
    )
    c.add_argument(
        "--max-problems", type=_count_arg(0), default=20, metavar="N", help="list at most N problems (default: 20)"
    )
    c.add_argument(
        "--allow-empty",
        action="store_true",
        help="accept a trace without kernels, copies or memsets (a CPU-only profile)",
    )
    c.set_defaults(command_module="cmd_check")

    r = sub.add_parser(
        "ranks",
        help="compare one trace per rank of one run: the same Seq of a group names the same collective on every rank",
    )
    r.add_argument(
        "traces", metavar="TRACE", nargs="+", help="one trace per rank (JSON, optionally gzip), or a directory of them"
    )
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument(
        "--max-problems", type=_count_arg(0), default=20, metavar="N", help="list at most N disagreements (default: 20)"
    )
    r.set_defaults(command_module="cmd_ranks")

    m = sub.add_parser("demo", help="profile a demo workload and write its trace")
    cmd_demo.add_arguments(m, _count_arg)
    m.set_defaults(command_module="cmd_demo")
    return p


def _escape_unencodable_output() -> None:
    # Paths need not be UTF-8 (they arrive surrogate-escaped from diagnostics); a stream that would
    # refuse them (PYTHONIOENCODING=utf-8, a strict locale) writes them backslash-escaped instead
    # of failing the command.
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _escape_unencodable_output()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "doctor" and args.trace is not None and args.probe:
        print(f"{PROG} doctor: give either TRACE.json or --probe, not both", file=sys.stderr)
        return 2
    return importlib.import_module(f".{args.command_module}", __name__).run(args)


if __name__ == "__main__":
    sys.exit(main())
