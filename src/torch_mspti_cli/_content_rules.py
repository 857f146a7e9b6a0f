"""What a trace holds, beyond its structure: device activity, the health report, links.

Problems (they fail ``check``) and warnings (reported; ``check`` still passes). A trace from a
torch-mspti device session always holds the plugin's health report; a CPU-only profile holds
neither device activity nor a health report, which ``allow_empty`` accepts.
"""

from __future__ import annotations

from typing import Any

from . import _health

PROBLEMS: dict[str, str] = {
    "trace-empty": "the trace holds at least one event",
    "no-device-activity": "the trace holds device work: kernel, memcpy or memset rows, mstx markers on a stream, or "
    "NPU memory events (a CPU-only trace needs --allow-empty)",
    "session-failed": "the trace's own health report does not say the session failed",
}

WARNINGS: dict[str, str] = {
    "health-report-missing": 'a trace with device activity carries torch-mspti\'s health report ("torch_mspti")',
    "no-kernel-linked": "at least one kernel is linked to the op that launched it (External id)",
    "launches-without-op": "most device rows were launched inside an op (not from a task-queue thread)",
    "links-ambiguous": "no device row is unlinked for want of API records while threads ran ops",
    "session-errors": "the health report lists no errors",
    "launches-pending": "no launch was still waiting for its kernel when the drain ended",
    "records-dropped": "the health report counts no dropped record (duplicates aside: their first copy is kept)",
    "kinds-not-collected": "every device kind the session asked for was collected (not_collected is empty)",
}

# What each "dropped" counter of the health report means for the trace (SessionCounters.h).
DROPPED_MEANING: dict[str, str] = {
    "out_of_window": "launched outside the profiling window",
    "invalid_timing": "no timing (start = end = 0) or end before start",
    "earlier_session": "records of an earlier session delivered late",
    "after_collection": "completed after the session had finished collecting",
    "orphan": "delivered while no session was collecting",
}

TASK_QUEUE_HINT = (
    "kernels launched from threads that ran no op torch recorded cannot be linked to their ops: for a "
    "task-queue thread (torch_npu's TASK_QUEUE_ENABLE=1, the simulator's queued mode) profile with "
    "TASK_QUEUE_ENABLE=0, for threads of your own with profile_all_threads=True, for arrows and per-op device time"
)
# The plugin's unlinked link states (args.link of a device row), in the plugin's order, and what
# each means. The library's table is torch_mspti.link_states() (src/core/LinkStates.h); the checker
# must not import torch, so it keeps the names here, and tests/test_layering.py checks that they
# are the library's.
UNLINKED_STATES = {
    "no_op_on_thread": "launched from a thread that ran no op torch recorded",
    "clock_untrusted": "launch time on an unknown host clock",
    "ambiguous": "no API record while several threads ran ops",
    "no_record": "neither a launch record nor an op hint",
}


def _first_errors(errors: Any, n: int = 2) -> str:
    if not isinstance(errors, list) or not errors:
        return ""
    shown = "; ".join(str(e) for e in errors[:n])
    return shown + (f" (and {len(errors) - n} more)" if len(errors) > n else "")


def check(
    *,
    events: int,
    device_events: int,
    kernels: int,
    linked: int,
    link_states: dict[str, int],
    health_present: bool,
    health: dict | None,
    allow_empty: bool,
    problem,
    warning,
    no_npu_lane: str | None = None,
) -> None:
    """Report the content findings through ``problem(rule, message)`` and ``warning(rule, message)``.

    ``health`` is the parsed report (None when absent or malformed; ``health_present`` tells
    which). ``link_states`` counts the device rows by their ``args.link`` (empty for traces
    without it). ``no_npu_lane`` is the trace's ``torch_mspti_no_npu_lane``: why torch.profiler
    dropped the PrivateUse1 activity the profile asked for (torch_mspti/_profile_request.py). Every
    rule is in :data:`PROBLEMS` or :data:`WARNINGS`.
    """
    if isinstance(health, dict) and health.get("state") == "failed":
        lib = health.get("library") if isinstance(health.get("library"), dict) else {}
        why = _first_errors(health.get("errors")) or lib.get("reason") or "no error recorded"
        problem("session-failed", f"the trace's health report says the torch-mspti session failed: {why}")
    elif isinstance(health, dict) and health.get("errors"):
        errors = health["errors"]
        warning(
            "session-errors",
            f"the health report lists {len(errors) if isinstance(errors, list) else 'some'} "
            f"error(s): {_first_errors(errors) or errors}",
        )

    if events == 0:
        problem("trace-empty", "the trace holds no events at all")
    elif device_events == 0 and not allow_empty:
        if not health_present and no_npu_lane:
            # The profile asked for PrivateUse1 and torch.profiler dropped it before kineto.
            why = "because " + no_npu_lane.removeprefix("torch-mspti: no NPU activity can be recorded: ")
        elif not health_present:
            why = (
                'and no torch-mspti health report ("torch_mspti"), so torch-mspti\'s profiler did not '
                "serve it: was ProfilerActivity.PrivateUse1 among the activities, and is torch-mspti "
                "the PrivateUse1 profiler (torch-mspti doctor)?"
            )
        elif not isinstance(health, dict):
            why = "and its health report is malformed (see health-report-malformed)"
        elif health.get("state") == "failed":
            why = "because the session failed (see session-failed)"
        elif _health.pending_launches(health):
            # the session saw launches whose rows never came: say why, not "did it run on the NPU?"
            why = "because " + _pending_message(
                _health.pending_launches(health), health.get("drain") or {}, _library_path(health)
            )
        else:
            records = health.get("records")
            why = (
                f"although the plugin's session ran ({records if records is not None else '?'} MSPTI records): "
                "did the profiled code run on the NPU?"
            )
        problem(
            "no-device-activity",
            f"the trace holds no kernel, memcpy or memset row, no mstx marker on a stream and no NPU memory event, "
            f"so its NPU lane is empty, {why} "
            "(torch-mspti check --allow-empty accepts a CPU-only trace)",
        )

    if device_events and not health_present:
        warning(
            "health-report-missing",
            'the trace has device activity but no torch-mspti health report ("torch_mspti"): another '
            "PrivateUse1 profiler (e.g. torch_npu's) wrote it, or it was edited; drops and drain "
            "cannot be checked",
        )
    no_op_ids = isinstance(health, dict) and any(
        isinstance(f, dict) and f.get("name") == "no-op-ids" for f in health.get("findings") or ()
    )
    _link_warnings(kernels, linked, device_events, link_states, warning, no_op_ids)
    if isinstance(health, dict):
        dropped = health.get("dropped")
        lost = {
            k: v
            for k, v in (dropped.items() if isinstance(dropped, dict) else ())
            if k != "duplicates" and isinstance(v, int) and not isinstance(v, bool) and v > 0
        }
        if lost:
            what = ", ".join(
                f"{v} {k}" + (f" ({DROPPED_MEANING[k]})" if k in DROPPED_MEANING else "") for k, v in lost.items()
            )
            warning("records-dropped", f"{sum(lost.values())} MSPTI record(s) are not in this trace: {what}")
        missing = health.get("not_collected")
        if isinstance(missing, list) and missing:
            warning(
                "kinds-not-collected",
                "not every kind of device activity was collected: " + "; ".join(str(m) for m in missing),
            )
        pending = _health.pending_launches(health)
        if pending:
            drain = health.get("drain") or {}
            warning("launches-pending", _pending_message(pending, drain, _library_path(health)))


# What each drain outcome means for the launches still pending, and the fix (the plugin's drain
# rule: a launch holds the drain until its row arrives, the timeout, or evidence that none can come).
_PENDING_CAUSE = {
    "kernels_need_preload": (
        "this MSPTI predates 26.0 and knows no device unless libmspti.so is preloaded at process start: "
        "run with LD_PRELOAD={library}"
    ),
    "unclassified_quiet": (
        "without API records their class is unknown; they are likely copies, which were not collected "
        "(set enable_api_records=True)"
    ),
}


def _library_path(health: dict) -> str:
    lib = health.get("library")
    path = lib.get("path") if isinstance(lib, dict) else None
    return path if isinstance(path, str) and path else "<the libmspti.so in use>"


def _pending_message(pending: int, drain: dict, library: str = "<the libmspti.so in use>") -> str:
    head = f"{pending} launch(es) had no device row when the drain ended ({drain.get('exit_reason', '?')})"
    cause = _PENDING_CAUSE.get(drain.get("evidence") or "")
    if cause:
        return f"{head}: {cause.format(library=library)}"
    return (
        f"{head}: those rows are missing from the trace; their records come later than drain_timeout_ms, or "
        "their work was still running (raise drain_timeout_ms, or synchronize the device before the profiler stops)"
    )


NO_OP_IDS_HINT = (
    "torch passed no op to the profiler (its health report's no-op-ids finding): torch does so with "
    "experimental_config=_ExperimentalConfig(disable_external_correlation=True); profile without that setting"
)


def _link_warnings(
    kernels: int, linked: int, rows: int, states: dict[str, int], warning, no_op_ids: bool = False
) -> None:
    """Why links are missing, from the rows' link states (the plugin's own rules: most rows from
    threads that ran no op means a task queue, unless torch passed the session no op at all
    (``no_op_ids``: external correlation off); any ambiguous row means API records were off)."""
    no_op, ambiguous = states.get("no_op_on_thread", 0), states.get("ambiguous", 0)
    queue = rows > 0 and no_op * 2 > rows and not no_op_ids
    if no_op_ids and no_op:
        warning("launches-without-op", f"{no_op} of {rows} device rows are credited to no op: {NO_OP_IDS_HINT}")
    if queue:
        warning(
            "launches-without-op",
            f"{no_op} of {rows} device rows were launched from threads that ran no op torch recorded: they are "
            "on their launch thread's lane and credited to no op. For a task queue (torch_npu's "
            "TASK_QUEUE_ENABLE=1, the simulator's queued mode) profile with TASK_QUEUE_ENABLE=0; for threads of "
            "your own, with profile_all_threads=True in torch.profiler's experimental_config",
        )
    if ambiguous:
        warning(
            "links-ambiguous",
            f"{ambiguous} device rows are unlinked: the session had no API records, so their op could not be "
            "verified while several threads ran ops; profile with torch_mspti.config.enable_api_records = True",
        )
    if kernels and not linked:
        unlinked = {k: states[k] for k in UNLINKED_STATES if states.get(k)}
        if no_op_ids:
            why = NO_OP_IDS_HINT
        elif not unlinked or queue:
            why = TASK_QUEUE_HINT
        else:
            why = "; ".join(f"{n} {UNLINKED_STATES[k]} ({k})" for k, n in unlinked.items())
        warning("no-kernel-linked", f"none of the {kernels} kernels is linked to an op: {why}")
