"""``torch-mspti check TRACE.json``: validate an exported trace (pure Python, no torch).

Exit 0 when no rule is broken (warnings do not fail), 1 when some are, 2 when the file cannot be
read as a trace. ``--json`` prints the :meth:`CheckReport.to_dict` document plus ``trace``.
"""

from __future__ import annotations

import argparse
import sys

from . import _health
from ._output import PROG, Out, dump_json, one_line, plural, ratio


def checked(args: argparse.Namespace, command: str, **options):
    """``check_trace(args.trace, **options)``, or None after reporting an unreadable or malformed
    trace in one line on stderr (and as JSON with ``--json``)."""
    from .check import TraceFileError, check_trace

    try:
        return check_trace(args.trace, **options)
    except (TraceFileError, TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:
        # TraceFileError: unreadable file; the others: JSON whose events have values of the wrong
        # type (a list where a string belongs, ...) or nesting too deep to parse.
        message = str(exc) if isinstance(exc, TraceFileError) else f"{args.trace}: malformed trace ({one_line(exc)})"
        print(f"{PROG} {command}: {message}", file=sys.stderr)
        if args.json:
            dump_json({"trace": args.trace, "ok": False, "error": message})
        return None


def run(args: argparse.Namespace) -> int:
    report = checked(
        args,
        "check",
        min_link_ratio=args.min_link_ratio,
        max_problems=args.max_problems,
        allow_empty=args.allow_empty,
    )
    if report is None:
        return 2
    if args.json:
        dump_json({"trace": args.trace, **report.to_dict()})
        return 0 if report.ok else 1

    out = Out()
    s = report.stats
    out.para(f"trace {args.trace}  ({plural(s.events, 'event')})", style="bold")
    out.rows(
        [
            ("kernels", f"{s.kernels}  (linked {s.linked_kernels}, {ratio(s.link_ratio)})"),
            ("link states", _health.counted(s.link_states) if s.link_states else "-"),
            ("launches", s.launches),
            ("arrows", f"{s.flows} starts, {s.flow_finishes} finishes"),
            ("device lanes", f"{plural(s.device_lanes, 'device')}, {plural(s.streams, 'stream')}"),
            *(
                [
                    (
                        "collectives",
                        f"{s.collectives['rows']} rows (joined {s.collectives['joined']}, "
                        f"with Seq {s.collectives['with_seq']})",
                    )
                ]
                if s.collectives
                else []
            ),
            ("health report", "present" if report.health is not None else "absent"),
        ]
    )
    if isinstance(report.health, dict):
        out.section("Health report")
        out.rows(_health.summary_rows(report.health))
    if report.warnings:
        out.section("Warnings")
        out.rows([(w.rule, w.message) for w in report.warnings])
    if report.problems:
        out.section("Problems")
        out.rows([(p.rule, p.message + (f" [event #{p.event['index']}]" if p.event else "")) for p in report.problems])
        if report.omitted:
            out.line(f"  ... and {report.omitted} more")
    out.line()
    warned = ", ".join(w.rule for w in report.warnings)
    if report.ok:
        if warned:
            out.para(f"OK with {plural(len(report.warnings), 'warning')} ({warned})", indent=2, style="bold yellow")
        else:
            out.line("OK: no problems found", "bold green")
        return 0
    counts = ", ".join(f"{rule} {n}" for rule, n in sorted(report.counts_by_rule.items()))
    tail = f"; {plural(len(report.warnings), 'warning')} ({warned})" if warned else ""
    out.para(f"FAILED: {plural(report.problem_count, 'problem')} ({counts}){tail}", indent=2, style="bold red")
    return 1
