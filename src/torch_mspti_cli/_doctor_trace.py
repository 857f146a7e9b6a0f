"""``torch-mspti doctor TRACE.json``: explain a trace from the health report it carries.

The profiled process wrote its session's health report into the trace (trace-level key
``"torch_mspti"``), so the trace answers what the doctor's own process cannot: which library
the session used, what it collected, dropped and repaired, and how its drain ended. The trace is
checked like ``torch-mspti check`` does; the verdict is the most telling finding, with its fix.
Pure Python, no torch.
"""

from __future__ import annotations

import argparse

from . import _health
from ._doctor_verdict import print_verdict
from ._output import PROG, Out, dump_json, plural, ratio

# The order in which findings explain a trace: the first one present is the verdict.
_EXPLAINING_PROBLEMS = ("trace-empty", "session-failed", "no-device-activity", "health-report-malformed")
# Problems whose cause a session finding names better than the trace can (an empty lane, a failed session).
_SESSION_EXPLAINS = ("session-failed", "no-device-activity")
_EXPLAINING_WARNINGS = (
    "launches-pending",
    "health-report-missing",
    "launches-without-op",
    "links-ambiguous",
    "no-kernel-linked",
    "kinds-not-collected",
    "session-errors",
)


def explain(report) -> tuple[bool, str]:
    """(collection worked, one line) for a :class:`~torch_mspti_cli.check.CheckReport`."""
    # The session's own findings (its findings table, highest priority first) know the cause the
    # trace's symptoms only suggest: the first one names the fix.
    told = _health.findings(report.health)
    found = f"the session found {told[0]['name']}: {told[0]['message']}" if told else None
    for rule in _EXPLAINING_PROBLEMS:
        for p in report.problems:
            if p.rule == rule:
                return False, (found if found and rule in _SESSION_EXPLAINS else p.message)
    s = report.stats
    if not report.ok:
        counts = ", ".join(f"{rule} {n}" for rule, n in sorted(report.counts_by_rule.items()))
        return False, (
            f"the trace holds {plural(s.kernels, 'kernel')} but breaks "
            f"{plural(report.problem_count, 'structural rule')} ({counts}); `{PROG} check` lists them"
        )
    drain = (report.health or {}).get("drain") or {}
    line = (
        f"the trace holds {plural(s.kernels, 'kernel')} on {plural(s.device_lanes, 'device')}, "
        f"{ratio(s.link_ratio)} linked to their ops"
    )
    # Launches still pending keep the verdict a failure, whoever explains them.
    pending = any(w.rule == "launches-pending" for w in report.warnings)
    if found:
        return (False, found) if pending else (True, f"{line}, but {found}")
    for rule in _EXPLAINING_WARNINGS:
        for w in report.warnings:
            if w.rule == rule:
                return (False, w.message) if rule == "launches-pending" else (True, f"{line}, but {w.message}")
    if isinstance(drain, dict) and drain.get("exit_reason"):
        line += f"; the drain ended {drain['exit_reason']} with nothing pending"
    return True, line


def run(args: argparse.Namespace) -> int:
    from .cmd_check import checked

    report = checked(args, "doctor", max_problems=20)
    if report is None:
        return 2
    ok, line = explain(report)
    if args.json:
        dump_json({"trace": args.trace, "ok": ok, "verdict": line, "check": report.to_dict()})
        return 0 if ok else 1
    out = Out()
    s = report.stats
    out.line(f"{PROG} doctor: trace {args.trace}", "bold")
    out.section("What the trace holds")
    out.rows(
        [
            ("events", s.events),
            ("kernels", f"{s.kernels} (linked to their ops {s.linked_kernels}, {ratio(s.link_ratio)})"),
            ("link states", _health.counted(s.link_states) if s.link_states else "-"),
            ("device lanes", f"{plural(s.device_lanes, 'device')}, {plural(s.streams, 'stream')}"),
            ("check", "no problems" if report.ok else plural(report.problem_count, "problem")),
        ]
    )
    out.section("Health report (written by torch-mspti in the profiled process)")
    if isinstance(report.health, dict):
        out.rows(_health.summary_rows(report.health))
    else:
        out.para("absent: torch-mspti's profiler did not serve this trace.", indent=2)
    if report.warnings:
        out.section("Warnings")
        out.rows([(w.rule, w.message) for w in report.warnings])
    print_verdict(out, ok, line, bad="PROBLEM")
    return 0 if ok else 1
