"""The ``torch-mspti`` command line: ``doctor``, ``check`` and ``demo``.

Exit codes: 0 success; 1 a finding (trace problems, NPU collection not possible, demo failure);
2 bad usage or an unreadable trace. Expected conditions print one line, never a traceback.
Human output is rendered with rich at no more than 80 columns; ``--json`` prints one JSON
document on stdout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

PROG = "torch-mspti"
MAX_WIDTH = 80
TRANSFER_TO_NPU = "torch_npu.contrib.transfer_to_npu"


# ------------------------------------------------------------------------------ shared helpers


def _console(stream) -> Console:
    width = min(MAX_WIDTH, shutil.get_terminal_size((MAX_WIDTH, 24)).columns)
    # markup/emoji/highlight off: trace names and paths contain "[...]" and ":" freely.
    return Console(file=stream, width=width, markup=False, emoji=False, highlight=False, soft_wrap=False)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch-mspti")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) if value else "-"
    return str(value)


def _grid(rows: Sequence[tuple[str, Any]]) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(k, _fmt(v))
    return t


def _table(*columns: str) -> Table:
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for c in columns:
        t.add_column(c, overflow="fold")
    return t


def _section(con: Console, title: str) -> None:
    con.print()
    con.print(Text(title, style="bold underline"))


def _dump(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


# ------------------------------------------------------------------------------ check


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def cmd_check(args: argparse.Namespace) -> int:
    from .check import TraceFileError, check_trace

    try:
        report = check_trace(args.trace, min_link_ratio=args.min_link_ratio, max_problems=args.max_problems)
    except (TraceFileError, TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:
        # TraceFileError: unreadable file; the others: JSON whose events have values of the wrong
        # type (a list where a string belongs, ...) or nesting too deep to parse.
        message = str(exc) if isinstance(exc, TraceFileError) else (f"{args.trace}: malformed trace ({_one_line(exc)})")
        print(f"{PROG} check: {message}", file=sys.stderr)
        if args.json:
            _dump({"trace": args.trace, "ok": False, "error": message})
        return 2
    if args.json:
        _dump({"trace": args.trace, **report.to_dict()})
        return 0 if report.ok else 1

    con = _console(sys.stdout)
    s = report.stats
    con.print(Text(f"trace {args.trace}  ({s.events} events)", style="bold"))
    con.print(
        _grid(
            [
                ("kernels", f"{s.kernels}  (linked {s.linked_kernels}, {_ratio(s.link_ratio)})"),
                ("launches", s.launches),
                ("arrows", f"{s.flows} starts, {s.flow_finishes} finishes"),
                ("device lanes", f"{s.device_lanes} devices, {s.streams} streams"),
                ("health report", "present" if report.health is not None else "absent"),
            ]
        )
    )
    if report.ok:
        con.print(Text("OK: no problems found", style="bold green"))
        return 0
    table = _table("rule", "problem")
    table.columns[0].no_wrap = True
    for p in report.problems:
        table.add_row(p.rule, p.message + (f" [event #{p.event['index']}]" if p.event else ""))
    con.print()
    con.print(table)
    if report.omitted:
        con.print(f"... and {report.omitted} more")
    counts = ", ".join(f"{rule} {n}" for rule, n in sorted(report.counts_by_rule.items()))
    con.print(Text(f"FAILED: {report.problem_count} problems ({counts})", style="bold red"))
    return 1


# ------------------------------------------------------------------------------ doctor


def bypass_findings(plugin: dict | None) -> list[dict[str, str]]:
    """Setups in this process that route profiling around our plugin."""
    found = []
    if TRANSFER_TO_NPU in sys.modules:
        found.append(
            {
                "kind": "transfer_to_npu",
                "message": f"{TRANSFER_TO_NPU} is imported; it swaps torch.profiler for torch_npu's profiler",
                "fix": f"do not import {TRANSFER_TO_NPU} in the profiled program",
            }
        )
    torch = sys.modules.get("torch")
    profile = getattr(getattr(torch, "profiler", None), "profile", None)
    module = getattr(profile, "__module__", None) or ""
    if profile is not None and not module.startswith("torch.profiler"):
        found.append(
            {
                "kind": "profiler_replaced",
                "message": f"torch.profiler.profile comes from {module or '?'}, not torch",
                "fix": "use torch's own torch.profiler.profile",
            }
        )
    if plugin and plugin.get("other_profiler"):
        found.append(
            {
                "kind": "other_privateuse1_profiler",
                "message": "another PrivateUse1 profiler (e.g. torch_npu's) is registered with kineto",
                "fix": "profile with torch.profiler and let torch-mspti own the PrivateUse1 profiler",
            }
        )
    return found


def verdict(d: dict) -> tuple[bool, str]:
    """(collection possible, one-line reason and fix)."""
    lib, plugin = d.get("library") or {}, d.get("plugin") or {}
    if not lib.get("available"):
        reason = lib.get("reason") or "libmspti.so is not available"
        fix = lib.get("fix") or "source CANN's set_env.sh or set TORCH_MSPTI_LIBRARY"
        return False, f"{reason}: {fix}"
    if not plugin.get("registered"):
        if plugin.get("mode") == "off":
            return False, "the torch-mspti plugin is switched off (mode=off): set its mode to auto or mspti"
        return False, (
            "the torch-mspti profiler is not registered with kineto: import torch_mspti before "
            "profiling and check that TORCH_MSPTI_DISABLE is unset"
        )
    return True, f"NPU collection is possible (libmspti at {lib.get('path') or '?'})"


def _doctor_failure(args: argparse.Namespace, line: str) -> int:
    if args.json:
        _dump(
            {
                "ok": False,
                "error": line,
                "library": None,
                "plugin": None,
                "last_session": None,
                "totals": None,
                "bypass": bypass_findings(None),
            }
        )
    print(f"{PROG} doctor: {line}", file=sys.stderr)
    return 1


def cmd_doctor(args: argparse.Namespace) -> int:
    try:
        import torch_mspti

        diagnostics = torch_mspti.diagnostics
    except Exception as exc:  # an import failure is an expected, reportable state here
        return _doctor_failure(args, f"torch_mspti cannot be used: {_one_line(exc)}")
    try:
        d = dict(diagnostics().to_dict())
    except Exception as exc:
        return _doctor_failure(args, f"torch_mspti.diagnostics() failed: {_one_line(exc)}")
    ok, line = verdict(d)
    d["bypass"] = bypass_findings(d.get("plugin"))
    d["ok"] = ok
    if args.json:
        _dump(d)
        if not ok:
            print(line, file=sys.stderr)
        return 0 if ok else 1
    con = _console(sys.stdout)
    _render_doctor(con, d)
    con.print()
    # soft_wrap: the verdict stays on one line whatever the width, so it can be grepped.
    con.print(Text(("OK: " if ok else "NOT READY: ") + line, style="bold green" if ok else "bold red"), soft_wrap=True)
    return 0 if ok else 1


def _render_doctor(con: Console, d: dict) -> None:
    con.print(Text(f"{PROG} {_version()}", style="bold"))
    lib = d.get("library") or {}
    _section(con, "Library (libmspti)")
    con.print(
        _grid(
            [
                ("available", lib.get("available")),
                ("path", lib.get("path")),
                ("found by", lib.get("found_by")),
                ("version", lib.get("version")),
            ]
            + ([("reason", lib.get("reason")), ("fix", lib.get("fix"))] if not lib.get("available") else [])
        )
    )
    cands = lib.get("candidates") or []
    if cands:
        con.print()
        t = _table("candidate", "source", "outcome", "reason")
        for c in cands:
            t.add_row(_fmt(c.get("path")), _fmt(c.get("source")), _fmt(c.get("outcome")), _fmt(c.get("reason")))
        con.print(t)
    sym = lib.get("symbols") or {}
    caps = lib.get("capabilities") or {}
    con.print(
        _grid(
            [
                ("symbols", f"{len(sym.get('resolved') or [])} resolved"),
                ("missing required", sym.get("missing_required")),
                ("missing optional", sym.get("missing_optional")),
                ("capabilities", "  ".join(f"{k} {_fmt(v)}" for k, v in caps.items()) or None),
            ]
        )
    )

    plugin = d.get("plugin") or {}
    backend = plugin.get("privateuse1_backend")
    if backend is not None and plugin.get("backend_named") is False:
        backend = f"{backend} (not renamed: torch_npu not loaded?)"
    _section(con, "Plugin")
    con.print(
        _grid(
            [
                ("registered", plugin.get("registered")),
                ("forwarded to kineto", plugin.get("forwarded_to_kineto")),
                ("PrivateUse1 backend", backend),
                ("other profiler", plugin.get("other_profiler")),
                ("mode", plugin.get("mode")),
                ("sessions", plugin.get("sessions")),
                ("last trace used ours", plugin.get("last_trace_used_ours")),
            ]
        )
    )

    last = d.get("last_session")
    _section(con, "Last session")
    if not last:
        con.print("no profiling session in this process")
    else:
        _render_session(con, last)

    totals = d.get("totals") or {}
    if totals:
        con.print(
            _grid(
                [
                    (
                        "all sessions",
                        f"kernels {_fmt(totals.get('kernels'))} (linked "
                        f"{_fmt(totals.get('linked_kernels'))}, {_ratio(totals.get('link_ratio'))}); "
                        f"records dropped {_fmt(totals.get('records_dropped'))}",
                    )
                ]
            )
        )

    if d.get("bypass"):
        _section(con, "Warnings")
        for b in d["bypass"]:
            con.print(Text(f"! {b['message']}; fix: {b['fix']}", style="yellow"))


def _render_session(con: Console, s: dict) -> None:
    buf, drain = s.get("buffers") or {}, s.get("drain") or {}
    con.print(
        _grid(
            [
                ("state", s.get("state")),
                ("errors", s.get("errors")),
                (
                    "kernels",
                    f"{_fmt(s.get('kernels'))}  (linked {_fmt(s.get('linked_kernels'))}, "
                    f"{_ratio(s.get('link_ratio'))}; unlinked {_fmt(s.get('unlinked_kernels'))})",
                ),
                (
                    "rejected",
                    f"out of window {_fmt(s.get('out_of_window'))}, invalid timing "
                    f"{_fmt(s.get('invalid_timing'))}, duplicates {_fmt(s.get('duplicates'))}, "
                    f"mislinks {_fmt(s.get('mislinks_rejected'))}",
                ),
                (
                    "buffers",
                    f"requested {_fmt(buf.get('requested'))}, completed {_fmt(buf.get('completed'))}, "
                    f"declined {_fmt(buf.get('declined'))}; records dropped {_fmt(s.get('records_dropped'))}",
                ),
                (
                    "drain",
                    f"{_fmt(drain.get('exit_reason'))} after {_fmt(drain.get('flushes'))} flushes, "
                    f"{_fmt(drain.get('ms'))} ms",
                ),
                (
                    "during drain",
                    f"records {_fmt(drain.get('records_during_drain'))}, pending launches "
                    f"{_fmt(drain.get('pending_launches'))}, late records {_fmt(drain.get('late_records'))}",
                ),
            ]
        )
    )
    kinds = s.get("records_by_kind") or {}
    if kinds:
        t = _table("record kind", "count")
        t.columns[1].justify = "right"
        for k, n in sorted(kinds.items()):
            t.add_row(str(k), _fmt(n))
        con.print(t)


# ------------------------------------------------------------------------------ demo


def cmd_demo(args: argparse.Namespace) -> int:
    try:
        from .sim import demo
    except ImportError as exc:
        print(f"{PROG} demo: the simulator is not available: {_one_line(exc)}", file=sys.stderr)
        return 1
    # Unset options are left out so the demo's own defaults apply.
    kwargs = {
        k: getattr(args, k)
        for k in ("workload", "steps", "size", "out", "device", "launch_mode", "ranks")
        if getattr(args, k) is not None
    }
    return int(demo.run(**kwargs) or 0)


# ------------------------------------------------------------------------------ parser


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
    p = argparse.ArgumentParser(prog=PROG, description="Ascend NPU kernels in torch.profiler traces via MSPTI.")
    p.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    d = sub.add_parser("doctor", help="can this process collect NPU kernels? (exit 1 if not)")
    d.add_argument("--json", action="store_true", help="print the diagnostics as JSON")
    d.set_defaults(func=cmd_doctor)

    c = sub.add_parser("check", help="validate the structure of an exported Chrome trace")
    c.add_argument("trace", metavar="TRACE.json", help="trace file (JSON, optionally gzip)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument(
        "--min-link-ratio",
        type=_ratio_arg,
        metavar="R",
        help="fail when fewer than this share (0..1) of kernels is linked to an op",
    )
    c.add_argument(
        "--max-problems", type=_count_arg(0), default=20, metavar="N", help="list at most N problems (default 20)"
    )
    c.set_defaults(func=cmd_check)

    m = sub.add_parser("demo", help="profile a demo workload and write its trace")
    m.add_argument("--workload", choices=("phases", "mlp", "transformer", "ddp"), default="phases")
    m.add_argument("--steps", type=_count_arg(1), metavar="N", help="profiled steps")
    m.add_argument("--size", type=_count_arg(1), metavar="N", help="problem size")
    m.add_argument("--out", metavar="PATH", help="where to write the Chrome trace")
    m.add_argument("--device", choices=("auto", "sim", "real"), default="auto")
    m.add_argument(
        "--launch-mode",
        dest="launch_mode",
        choices=("direct", "queued"),
        default="direct",
        help="simulator: launch inside the op (direct) or from a task-queue thread (queued)",
    )
    m.add_argument("--ranks", type=_count_arg(1), metavar="N", help="ddp: ranks, one process each (default 2)")
    m.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return args.func(args)
