"""``torch-mspti ranks TRACE [TRACE ...]``: compare one trace per rank, collective by collective.

Exit 0 when every pair of ranks agrees on every collective both traces number (see
:mod:`torch_mspti_cli.ranks`), 1 when some disagree or a trace cannot take part (no
distributedInfo.rank), 2 when a file cannot be read as a trace. A directory stands for the ``*.json``
and ``*.json.gz`` files in it (what ``tensorboard_trace_handler`` writes). ``--json`` prints
:meth:`RanksReport.to_dict`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._output import PROG, Out, dump_json, plural


def _files(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += sorted(str(f) for f in path.iterdir() if f.name.endswith((".json", ".json.gz")))
        else:
            out.append(p)
    return out


def run(args: argparse.Namespace) -> int:
    from .check import TraceFileError
    from .ranks import compare_ranks, read_rank

    files = _files(args.traces)
    if len(files) < 2:
        message = f"give at least two traces (one per rank), got {len(files)}: {' '.join(args.traces)}"
        print(f"{PROG} ranks: {message}", file=sys.stderr)
        if args.json:
            dump_json({"ok": False, "error": message})
        return 2
    try:
        traces = [read_rank(f) for f in files]
    except TraceFileError as exc:
        print(f"{PROG} ranks: {exc}", file=sys.stderr)
        if args.json:
            dump_json({"ok": False, "error": str(exc)})
        return 2
    report = compare_ranks(traces)
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
            "The same Seq of a group names different calls on its ranks. On torch_npu the group's sequence "
            "number counts sends and receives too, so point-to-point calls between some of the group's ranks "
            "shift the others' numbers (docs/torch_npu.md 6); otherwise the traces come from different jobs or "
            "were edited.",
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
