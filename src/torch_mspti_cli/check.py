"""Validate a Chrome trace exported by ``torch.profiler`` with torch-mspti.

Pure Python (no torch, so ``torch-mspti check`` starts fast); from Python, ``from
torch_mspti_cli.check import check_trace`` (the library, :mod:`torch_mspti`, never imports the
command line). ``check_trace`` accepts the forms torch writes (an object with
``traceEvents``, or a bare event list; gzip too) and reports every rule violation with a stable
rule id (see ``RULES``), warnings that do not fail the check (``WARNINGS``), link statistics and
the trace's health report.

Conventions checked (kineto's ChromeTraceLogger with our plugin): kernels are ``"cat": "kernel"``
slices on pid = device, tid = stream; each linked launch is a ``privateuse1_runtime`` slice nested
in its ``cpu_op``; an ``ac2g`` arrow starts (``"s"``) on the launch and finishes (``"f"``,
``"bp": "e"``) on each kernel; device processes are named and sort after the CPU ones; the slices
of each lane nest (none starts inside another and ends after it). Content:
the trace holds device activity (unless ``allow_empty``), its health report (trace-level key
``"torch_mspti"``) exists and does not say the session failed, and some kernel is linked.
Collectives (kernel rows with a ``"Collective name"``): a row joined with its process group
(``"Process Group Description"``) carries the join's fields, which agree with the trace's
``distributedInfo`` (rank, pg_config) and with each other (In/Out msg nelems, a ``Seq`` per
group in launch order); rows not joined are a warning; the health report's ``collectives``
counts, when it has them, equal the trace's.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

from . import _content_rules, _health
from . import _trace_rules as rules
from ._trace_rules import Problem

__all__ = [
    "RULES",
    "WARNINGS",
    "CheckReport",
    "CheckStats",
    "Problem",
    "TraceFileError",
    "check_trace",
    "load_trace",
]

#: Rule id -> what it requires; a violation fails the check.
RULES: dict[str, str] = {**rules.RULES, **_content_rules.PROBLEMS}
#: Warning id -> what it expects; reported, but the check still passes.
WARNINGS: dict[str, str] = {**_content_rules.WARNINGS, **rules.WARNINGS}

DEFAULT_MAX_PROBLEMS = 1000


class TraceFileError(ValueError):
    """The input cannot be read as a Chrome trace (missing, unreadable, not JSON, wrong shape)."""


@dataclass
class CheckStats:
    """Counts over the trace. ``link_ratio`` is linked/kernels, None without kernels.
    ``link_states``: device rows by the link state torch-mspti wrote into each (``args.link``:
    verified, recovered, unverified, no_op_on_thread, clock_untrusted, ambiguous, no_record);
    empty for a trace without them. ``collectives``: the collective rows (``rows``), those joined
    with their process group (``joined``) and those of them with a ``Seq`` (``with_seq``); empty
    for a trace without collective rows, and then left out of ``to_dict``."""

    events: int = 0
    kernels: int = 0
    linked_kernels: int = 0
    link_ratio: float | None = None
    launches: int = 0
    flows: int = 0  # distinct ac2g flow ids that start
    flow_finishes: int = 0
    device_lanes: int = 0  # device processes (pids with kernel/copy events)
    streams: int = 0  # device (pid, tid) lanes
    link_states: dict[str, int] = field(default_factory=dict)
    collectives: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.collectives:
            del out["collectives"]  # a trace without collectives: the document it always was
        return out


@dataclass
class CheckReport:
    """Outcome of ``check_trace``.

    ``problems`` holds at most ``max_problems`` entries; ``counts_by_rule`` counts all of them,
    so ``problem_count`` and ``omitted`` stay exact when the list is cut. ``warnings`` (at most
    one per id of ``WARNINGS``) do not make the report fail.
    """

    problems: list[Problem]
    stats: CheckStats
    counts_by_rule: dict[str, int] = field(default_factory=dict)
    health: dict[str, Any] | None = None  # the trace's "torch_mspti" health report, if any
    warnings: list[Problem] = field(default_factory=list)

    @property
    def problem_count(self) -> int:
        return sum(self.counts_by_rule.values())

    @property
    def omitted(self) -> int:
        return self.problem_count - len(self.problems)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problem_count": self.problem_count,
            "omitted": self.omitted,
            "counts_by_rule": dict(self.counts_by_rule),
            "problems": [p.to_dict() for p in self.problems],
            "warnings": [w.to_dict() for w in self.warnings],
            "stats": self.stats.to_dict(),
            "health": self.health,
        }


def load_trace(path: str | os.PathLike) -> Any:
    """Parse a trace file (plain or gzip JSON). Raises ``TraceFileError`` with a one-line reason."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise TraceFileError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise TraceFileError(f"{name}: is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceFileError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFileError(f"{name}: broken gzip data ({exc})") from None
    if not raw.strip():
        raise TraceFileError(f"{name}: file is empty, not a JSON trace")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise TraceFileError(f"{name}: not a text file, so not a JSON trace") from None
    except json.JSONDecodeError as exc:
        raise TraceFileError(f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _events_of(trace: Any, origin: str) -> list:
    if isinstance(trace, list):
        return trace
    if isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list):
        return trace["traceEvents"]
    got = "an object without a traceEvents list" if isinstance(trace, dict) else type(trace).__name__
    raise TraceFileError(
        f"{origin}: not a Chrome trace (expected an object with traceEvents or a list of events, got {got})"
    )


def _no_npu_lane(trace: Any) -> str | None:
    """The trace's word on why torch.profiler dropped ProfilerActivity.PrivateUse1 (the key
    torch_mspti/_profile_request.py writes), or None."""
    value = trace.get("torch_mspti_no_npu_lane") if isinstance(trace, dict) else None
    return value if isinstance(value, str) and value else None


def check_trace(
    trace: dict | list | str | os.PathLike,
    *,
    min_link_ratio: float | None = None,
    max_problems: int = DEFAULT_MAX_PROBLEMS,
    allow_empty: bool = False,
) -> CheckReport:
    """Run every rule over ``trace`` (a parsed trace, or a path for ``load_trace``).

    ``min_link_ratio`` (0..1) adds the ``link-ratio-below-min`` rule: it fails when fewer kernels
    carry an ``External id`` (or when there are no kernels at all). ``allow_empty`` accepts a
    trace without device activity (a CPU-only profile); an empty event list and a health report
    that says the session failed fail regardless. Raises ``TraceFileError`` when the input is not
    a trace, ``ValueError`` for a ratio outside [0, 1].
    """
    if min_link_ratio is not None and not (0.0 <= min_link_ratio <= 1.0):
        raise ValueError(f"min_link_ratio must be within [0, 1], got {min_link_ratio!r}")
    origin = "trace"
    if isinstance(trace, (str, os.PathLike)):
        origin = os.fspath(trace)
        trace = load_trace(trace)
    events = _events_of(trace, origin)

    sink = rules.Sink(events, max_problems)
    ix = rules.build_index(events, sink)
    tol = rules.tolerance_for(ix.max_abs_ts)
    flows = rules.check_flows(ix, sink, tol)
    rules.check_stream_overlap(ix, sink, tol)
    rules.check_lane_nesting(ix, sink)
    rules.check_launch_nesting(ix, sink, tol)
    rules.check_lanes(ix, sink)
    present, health = _health.read(trace)
    if present and not isinstance(health, dict):
        sink.add(
            "health-report-malformed",
            f'trace-level "{_health.HEALTH_KEY}" is {type(health).__name__}, not a JSON object',
        )
        health = None
    rules.check_zero_length_rows(ix, sink, health)
    warnings = rules.Sink(events, len(WARNINGS))
    _content_rules.check(
        events=len(events),
        device_events=sum(len(v) for v in ix.device_slices.values()) + ix.other_device_work,
        kernels=ix.kernels,
        linked=ix.linked_kernels,
        link_states=ix.link_states,
        health_present=present,
        health=health,
        allow_empty=allow_empty,
        problem=sink.add,
        warning=warnings.add,
        no_npu_lane=_no_npu_lane(trace),
    )
    collectives = rules.check_collectives(ix, sink, warnings.add, rules.distributed_info(trace), health)

    ratio = ix.linked_kernels / ix.kernels if ix.kernels else None
    if min_link_ratio is not None:
        if ratio is None:
            sink.add(
                "link-ratio-below-min", f"no kernels in the trace, so the link ratio cannot reach {min_link_ratio:.2f}"
            )
        elif ratio < min_link_ratio:
            sink.add(
                "link-ratio-below-min",
                f"only {ix.linked_kernels} of {ix.kernels} kernels "
                f"({ratio:.1%}) carry an External id; required {min_link_ratio:.1%}",
            )

    stats = CheckStats(
        events=len(events),
        kernels=ix.kernels,
        linked_kernels=ix.linked_kernels,
        link_ratio=ratio,
        launches=len(ix.launches),
        flows=flows,
        flow_finishes=sum(len(v) for v in ix.ends.values()),
        device_lanes=len(ix.device_pids),
        streams=len(ix.device_slices),
        link_states=dict(ix.link_states),
        collectives=collectives,
    )
    return CheckReport(sink.kept, stats, dict(sink.counts), health, warnings.kept)
