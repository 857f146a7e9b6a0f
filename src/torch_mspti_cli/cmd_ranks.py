"""``torch-mspti ranks TRACE [TRACE ...]``: compare one trace per rank, collective by collective.

Exit 0 when every pair of ranks agrees on every collective both traces number (see
:mod:`torch_mspti_cli.ranks`), 1 when some disagree, a trace cannot take part (no
distributedInfo.rank) or the traces are not of one run (different world_size or backend, or one
group on communicators of different runs; then nothing is compared), 2 when a file cannot be read
as a trace. A directory stands for the ``*.json``
and ``*.json.gz`` files in it (what ``tensorboard_trace_handler`` writes). ``--json`` prints
:meth:`RanksReport.to_dict`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._output import PROG, Out, dump_json, one_line, plural


def _files(paths: list[str]) -> list[tuple[str, bool]]:
    """(file, named by the user) for each argument; a directory gives its *.json and *.json.gz files."""
    out: list[tuple[str, bool]] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += [
                (str(f), False)
                for f in sorted(path.iterdir())
                if f.is_file() and f.name.endswith((".json", ".json.gz"))
            ]
        else:
            out.append((p, True))
    return out


def run(args: argparse.Namespace) -> int:
    from .check import TraceFileError
    from .ranks import compare_ranks, read_rank

    def fail(message: str) -> int:
        print(f"{PROG} ranks: {message}", file=sys.stderr)
        if args.json:
            dump_json({"ok": False, "error": message})
        return 2

    files = _files(args.traces)
    traces, skipped = [], []
    for path, named in files:
        try:
            traces.append(read_rank(path))
        except (TraceFileError, TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:
            message = str(exc) if isinstance(exc, TraceFileError) else f"{path}: malformed trace ({one_line(exc)})"
            if named:
                return fail(message)
            skipped.append(message)  # a file of a directory that is not a trace: named, not fatal
    if len(traces) < 2:
        return fail(f"give at least two traces (one per rank), got {len(traces)}: {' '.join(args.traces)}")
    report = compare_ranks(traces)
    report.skipped = skipped
    if args.json:
        dump_json(report.to_dict())
        return 0 if report.ok else 1
    out = Out()
    out.para(f"{plural(len(traces), 'trace')}: collectives rank against rank", style="bold")
    out.rows(
        [
            (
                f"rank {t.rank if t.rank is not None else '?'}",
                f"{t.path}  ({plural(t.rows, 'numbered collective row')})",
            )
            for t in traces
        ]
    )
    out.rows([("compared", f"{report.compared} (group, Seq, pair of ranks)")])
    if report.skipped:
        out.rows([("skipped", s) for s in report.skipped])
    if report.problems:
        out.section("Problems")
        out.rows([("trace", p) for p in report.problems])
    if report.disagreements:
        out.section("Disagreements")
        shown = report.disagreements[: args.max_problems]
        out.rows([("collective-ranks-disagree", d.message()) for d in shown])
        if len(report.disagreements) > len(shown):
            out.line(f"  ... and {len(report.disagreements) - len(shown)} more")
        out.para(
            "The same Seq of a group names different calls. Between ranks: on torch_npu the group's sequence "
            "number counts sends and receives too, so point-to-point calls between some of the group's ranks "
            "shift the others' numbers (docs/torch_npu.md 6); otherwise the traces come from different jobs or "
            "were edited. Within one rank: its traces come from different runs.",
            indent=2,
        )
    out.line()
    if report.ok:
        if report.compared == 0:
            out.para(
                "OK, but nothing to compare: no group's Seq is in two of these traces", indent=2, style="bold yellow"
            )
        else:
            out.line("OK: the ranks agree on every collective they both number", "bold green")
        return 0
    out.para(
        f"FAILED: {plural(len(report.disagreements), 'disagreement')}, {plural(len(report.problems), 'problem')}",
        indent=2,
        style="bold red",
    )
    return 1
