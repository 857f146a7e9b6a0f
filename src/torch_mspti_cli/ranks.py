"""Rank against rank: do the per-rank traces of one job describe the same collectives alike?

Pure Python (no torch). Each trace is one rank's (``distributedInfo.rank``); its joined collective
rows (those with ``Process Group Description``, README "Collectives and multi-rank runs") name their
group (``Process Group Name``, ``Process Group Ranks``, and HCCL's ``comm name``, which tells a group
re-created under the same name from the one before) and their number in it (``Seq``). For each group,
every pair of member ranks whose traces both hold a given ``Seq`` must agree on what that call was:
its ``Collective name``, ``dtype`` and group ranks. A send or a receive is one point-to-point call of
the group whatever its direction and peer (two ranks that send to each other both number a send): it
matches any point-to-point call, never a collective. A rank's
trace may hold fewer numbers than another's (its window started later or ended earlier); only the
numbers both hold are compared. Several traces of one rank (one per profiling cycle) are read as
that rank's calls together.

Disagreements are reported with the group, the Seq and what each rank says. The likeliest cause
on torch_npu: the group's sequence number counts sends and receives too (docs/torch_npu.md 6), so
after point-to-point calls between some of a group's ranks its ranks number the same collective
differently.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ._trace_rules import distributed_info
from .check import _events_of, load_trace

__all__ = ["RankTrace", "Disagreement", "RanksReport", "read_rank", "compare_ranks"]

_P2P = ("send", "recv")


@dataclass(frozen=True)
class RankTrace:
    """One rank's joined collective rows: group -> Seq -> what the call was."""

    path: str
    rank: int | None
    calls: dict[str, dict[int, tuple]]  # group -> Seq -> (collective, dtype, group ranks)
    group_ranks: dict[str, list[int]]  # group -> global ranks (from the rows' Process Group Ranks)
    rows: int  # joined rows with a Seq


@dataclass(frozen=True)
class Disagreement:
    group: str
    seq: int
    ranks: tuple[int, int]
    says: tuple[tuple, tuple]

    def message(self) -> str:
        a, b = self.ranks
        if a == b:
            return (
                f"group {self.group!r}, Seq {self.seq}: two traces of rank {a} say {_describe(self.says[0])} "
                f"and {_describe(self.says[1])} (traces of two runs?)"
            )
        return (
            f"group {self.group!r}, Seq {self.seq}: rank {a} has {_describe(self.says[0])}, rank {b} has "
            f"{_describe(self.says[1])}"
        )


@dataclass
class RanksReport:
    traces: list[RankTrace]
    compared: int = 0  # (group, Seq, pair of ranks) compared
    disagreements: list[Disagreement] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # traces that cannot take part, and why
    skipped: list[str] = field(default_factory=list)  # files of a directory that are not traces

    @property
    def ok(self) -> bool:
        return not self.disagreements and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "traces": [
                {"path": t.path, "rank": t.rank, "rows": t.rows, "groups": sorted(t.calls)} for t in self.traces
            ],
            "compared": self.compared,
            "disagreements": [
                {"group": d.group, "seq": d.seq, "ranks": list(d.ranks), "says": [list(s) for s in d.says]}
                for d in self.disagreements
            ],
            "problems": self.problems,
            "skipped": self.skipped,
        }


def _describe(call: tuple) -> str:
    collective, dtype, ranks = call
    if collective == "send/recv":
        return f"a send or receive in group ranks {ranks}"
    return f"{collective} of {dtype} in group ranks {ranks}"


def _ranks_of(text: Any) -> list[int] | None:
    if not isinstance(text, str) or not text.startswith("[") or not text.endswith("]"):
        return None
    try:
        return [int(x) for x in text[1:-1].split(",") if x.strip()]
    except ValueError:
        return None


def _group_key(a: dict) -> str:
    """The group as the rows name it: pg_name, and HCCL's communicator name when there is one (a group
    destroyed and made again under the same pg_name is another communicator, whose Seq starts anew)."""
    name = str(a.get("Process Group Name"))
    comm = a.get("comm name")
    return f"{name} (comm {comm})" if isinstance(comm, str) and comm else name


def read_rank(path: str) -> RankTrace:
    """The joined, numbered collective rows of one trace (raises check.TraceFileError when unreadable,
    ValueError/TypeError/RecursionError for JSON that is not a trace)."""
    trace = load_trace(path)
    info = distributed_info(trace)
    rank = info.get("rank") if isinstance(info, dict) and type(info.get("rank")) is int else None
    calls: dict[str, dict[int, tuple]] = defaultdict(dict)
    group_ranks: dict[str, list[int]] = {}
    rows = 0
    for e in _events_of(trace, path):
        a = e.get("args") if isinstance(e, dict) else None
        if not isinstance(a, dict) or "Process Group Description" not in a or type(a.get("Seq")) is not int:
            continue
        group = _group_key(a)
        collective = a.get("Collective name")
        p2p = collective in _P2P
        ranks = a.get("Process Group Ranks")
        call = ("send/recv", None, ranks) if p2p else (collective, a.get("dtype"), ranks)
        calls[group][a["Seq"]] = call
        members = _ranks_of(ranks)
        if members is not None:
            group_ranks[group] = members
        rows += 1
    return RankTrace(path, rank, dict(calls), group_ranks, rows)


def compare_ranks(traces: list[RankTrace]) -> RanksReport:
    """Every pair of member ranks of each group, on the Seq numbers both traces hold."""
    report = RanksReport(traces)
    # Several traces of one rank (one per profiling cycle of a schedule) are one rank's calls: Seq
    # numbers a group's calls over the whole run, so the same Seq in two of them is the same call.
    by_rank: dict[int, dict[str, dict[int, tuple]]] = {}
    seen: set[str] = set()
    for t in traces:
        if t.path in seen:
            continue  # the same file given twice
        seen.add(t.path)
        if t.rank is None:
            report.problems.append(f"{t.path}: no distributedInfo.rank, so it cannot be compared with the others")
            continue
        mine = by_rank.setdefault(t.rank, {})
        for group, calls in t.calls.items():
            have = mine.setdefault(group, {})
            for seq, call in calls.items():
                if seq in have and have[seq] != call:
                    report.disagreements.append(Disagreement(group, seq, (t.rank, t.rank), (have[seq], call)))
                have.setdefault(seq, call)
    members: dict[str, list[int]] = {}
    for t in traces:
        members.update(t.group_ranks)
    for rank, calls in by_rank.items():
        for group in calls:
            if group in members and rank not in members[group]:
                report.problems.append(
                    f"rank {rank} has rows of group {group!r}, whose ranks are {members[group]}: a trace of another "
                    "job, or an edited one"
                )
    if len(by_rank) < 2:
        report.problems.append(
            f"only rank(s) {sorted(by_rank)} among these traces: give the traces of at least two ranks"
        )
    groups = sorted({g for calls in by_rank.values() for g in calls})
    for group in groups:
        holders = sorted(r for r, calls in by_rank.items() if group in calls and r in members.get(group, [r]))
        for i, a in enumerate(holders):
            for b in holders[i + 1 :]:
                ta, tb = by_rank[a][group], by_rank[b][group]
                for seq in sorted(set(ta) & set(tb)):
                    report.compared += 1
                    if ta[seq] != tb[seq]:
                        report.disagreements.append(Disagreement(group, seq, (a, b), (ta[seq], tb[seq])))
    return report
