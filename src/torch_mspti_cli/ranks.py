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
differently. Message sizes (``In``/``Out msg nelems``, ``bytes``), algorithms, streams and times are
not compared.

Before any Seq is compared, the traces must be of one run (else nothing is compared and each
mismatch is a problem). A trace carries no run id, so what is compared is what one run cannot
disagree on:

* its world: ``distributedInfo.world_size`` and ``backend`` are equal in every trace that has them,
  and each ``rank`` is below its ``world_size``;
* its communicators: HCCL names each communicator when it is made (the row's ``comm name``: derived
  from the root info rank 0 creates for it on Ascend, a random 64-bit number minted by rank 0 on the
  simulator), so all members of a group name it alike within a run, and another run names it
  anew. Traces whose rows share a communicator name are of one run, and so are the traces of one
  process (same rank, ``host_name`` and host pid: profiling cycles, even across a
  ``destroy_process_group`` and ``init_process_group``, which name every group anew). Two such
  sets of traces that both hold rows of one process group (``Process Group Name``) but share no
  communicator are different runs.

Not compared, because one run's traces legitimately differ in them: start times and ``trace_id``
(ranks and profiling cycles start apart), ``host_name`` across ranks, the health report, and
``pg_config`` (torch writes it when the profiler starts, without the groups made later). Hence the
limits: traces without joined rows (or whose ranks share no group's rows) are told apart by their
world only; communicators named by the user (torch_npu's HCCL config) repeat from run to run, so two
runs of one job and world that name theirs alike pass as one run; and ranks of one run whose groups
were all made again between their profiling windows look like two runs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ._trace_rules import distributed_info
from .check import _events_of, load_trace

__all__ = ["RankTrace", "Disagreement", "RanksReport", "read_rank", "compare_ranks"]

_P2P = ("send", "recv")
_HOST_CATS = ("cpu_op", "user_annotation")  # rows whose pid is the profiled process's id


@dataclass(frozen=True)
class RankTrace:
    """One rank's joined collective rows: group -> Seq -> what the call was."""

    path: str
    rank: int | None
    calls: dict[str, dict[int, tuple]]  # group -> Seq -> (collective, dtype, group ranks)
    group_ranks: dict[str, list[int]]  # group -> global ranks (from the rows' Process Group Ranks)
    rows: int  # joined rows with a Seq
    world_size: int | None = None  # distributedInfo.world_size
    backend: str | None = None  # distributedInfo.backend
    # "pg_name [ranks]" -> its rows' HCCL comm names
    comms: dict[str, frozenset[str]] = field(default_factory=dict)
    host_name: str | None = None  # kineto's top-level host_name
    pids: frozenset[int] = frozenset()  # process ids of its host rows (cpu_op, user_annotation)


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
                {"path": t.path, "rank": t.rank, "world_size": t.world_size, "rows": t.rows, "groups": sorted(t.calls)}
                for t in self.traces
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
    info = info if isinstance(info, dict) else {}
    rank = info.get("rank") if type(info.get("rank")) is int else None
    world_size = info.get("world_size") if type(info.get("world_size")) is int else None
    backend = info.get("backend") if isinstance(info.get("backend"), str) else None
    calls: dict[str, dict[int, tuple]] = defaultdict(dict)
    group_ranks: dict[str, list[int]] = {}
    comms: dict[str, set[str]] = defaultdict(set)
    rows = 0
    pids: set[int] = set()
    for e in _events_of(trace, path):
        if isinstance(e, dict) and e.get("cat") in _HOST_CATS and type(e.get("pid")) is int:
            pids.add(e["pid"])
        a = e.get("args") if isinstance(e, dict) else None
        if not isinstance(a, dict) or "Process Group Description" not in a:
            continue
        comm = a.get("comm name")
        if isinstance(comm, str) and comm:
            # numbered or not, it names the run's communicator; a group is its name and its ranks
            # (split_group-style subgroups share one name over disjoint ranks, each with its own)
            group = f"{a.get('Process Group Name')} {a.get('Process Group Ranks', '')}".strip()
            comms[group].add(comm)
        if type(a.get("Seq")) is not int:
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
    frozen = {group: frozenset(names) for group, names in comms.items()}
    host_name = trace.get("host_name") if isinstance(trace, dict) and isinstance(trace.get("host_name"), str) else None
    return RankTrace(
        path, rank, dict(calls), group_ranks, rows, world_size, backend, frozen, host_name, frozenset(pids)
    )


def compare_ranks(traces: list[RankTrace]) -> RanksReport:
    """Every pair of member ranks of each group, on the Seq numbers both traces hold."""
    report = RanksReport(traces)
    ranked: list[RankTrace] = []
    seen: set[str] = set()
    for t in traces:
        if t.path in seen:
            continue  # the same file given twice
        seen.add(t.path)
        if t.rank is None:
            report.problems.append(f"{t.path}: no distributedInfo.rank, so it cannot be compared with the others")
            continue
        ranked.append(t)
    not_one_run = _world_problems(ranked) or _run_problems(ranked)
    if not_one_run:
        report.problems += not_one_run
        return report  # Seq numbers of different runs say nothing about each other
    # Several traces of one rank (one per profiling cycle of a schedule) are one rank's calls: Seq
    # numbers a group's calls over the whole run, so the same Seq in two of them is the same call.
    by_rank: dict[int, dict[str, dict[int, tuple]]] = {}
    for t in ranked:
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


_ONE_RUN_FIX = (
    "torch-mspti ranks compares the ranks of one run: give the traces of one run (e.g. the directory its "
    "tensorboard_trace_handler wrote), one or more per rank"
)


def _listing(traces: list[RankTrace], limit: int = 4) -> str:
    """``rank 0 (path), rank 1 (path) and 3 more``: the traces, by rank then path."""
    ordered = sorted(traces, key=lambda t: (t.rank, t.path))
    shown = ", ".join(f"rank {t.rank} ({t.path})" for t in ordered[:limit])
    return shown + (f" and {len(ordered) - limit} more" if len(ordered) > limit else "")


def _world_problems(traces: list[RankTrace]) -> list[str]:
    """Traces whose distributedInfo cannot be of one world: world_size or backend differ between them,
    or a rank is not below its world_size. Traces without the field take no part in its comparison."""
    problems = []
    for key, what in (("world_size", "world_size"), ("backend", "backend")):
        by_value: dict[Any, list[RankTrace]] = defaultdict(list)
        for t in traces:
            value = getattr(t, key)
            if value is not None:
                by_value[value].append(t)
        if len(by_value) > 1:
            worlds = "; ".join(
                f"{what} {value if key == 'world_size' else repr(value)} in {_listing(ts)}"
                for value, ts in sorted(by_value.items(), key=lambda kv: str(kv[0]))
            )
            problems.append(
                f"traces of different worlds (distributedInfo.{what} differs; one run has one): {worlds}. "
                + _ONE_RUN_FIX
            )
    for t in traces:
        if t.world_size is not None and not 0 <= t.rank < t.world_size:
            problems.append(
                f"{t.path}: rank {t.rank} in a world of {t.world_size} ranks (distributedInfo says both): an edited "
                "trace, or one of another run. " + _ONE_RUN_FIX
            )
    return problems


def _run_problems(traces: list[RankTrace]) -> list[str]:
    """Traces that name one process group by communicators no trace of the others shares: different
    runs, since HCCL names each communicator anew in every run.

    Traces are joined into runs when their rows share a communicator name (any group's), or when they
    are one process's (same rank, host_name and host pid: profiling cycles of one process, even across
    a destroy_process_group and init_process_group, which name every group anew). Two runs that both
    hold rows of a group (pg_name) are reported together; runs that share no group's rows say nothing
    about each other and are left alone."""
    parent = list(range(len(traces)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple, int] = {}
    for i, t in enumerate(traces):
        keys = [("comm", name) for names in t.comms.values() for name in names]
        keys += [("process", t.rank, t.host_name, pid) for pid in t.pids]
        for key in keys:
            parent[root(i)] = root(first.setdefault(key, i))
    runs: dict[int, list[RankTrace]] = defaultdict(list)
    for i, t in enumerate(traces):
        runs[root(i)].append(t)
    held: dict[int, dict[str, set[str]]] = {}
    for run, members in runs.items():
        held[run] = defaultdict(set)
        for t in members:
            for group, names in t.comms.items():
                held[run][group] |= names
    clashing = [run for run in runs if any(other != run and held[run].keys() & held[other].keys() for other in runs)]
    if not clashing:
        return []
    described = []
    for run in sorted(clashing, key=lambda r: sorted((t.rank, t.path) for t in runs[r])):
        ranks = sorted({t.rank for t in runs[run]})
        comms = ", ".join(
            f"group {group!r} on communicator {' and '.join(repr(n) for n in sorted(names))}"
            for group, names in sorted(held[run].items())
        )
        label = "rank" if len(ranks) == 1 else "ranks"
        described.append(f"{label} {', '.join(map(str, ranks))} ({comms}): {_listing(runs[run])}")
    return [
        f"traces of {len(clashing)} different runs: HCCL names each communicator anew in every run, and these "
        "traces hold rows of the same process group on communicators that the others do not have: "
        + "; ".join(described)
        + ". (Ranks of one run whose groups were all made again between these traces' profiling windows look "
        "the same: then give traces of the same windows.) " + _ONE_RUN_FIX
    ]
