"""The health report torch-mspti writes into every device trace (trace-level key ``"torch_mspti"``).

Read by ``torch-mspti check`` and ``torch-mspti doctor TRACE.json``. The report is a JSON object
(kineto writes it as a quoted JSON string, which is parsed here): library, enabled kinds, state,
errors, records by kind, counters of everything dropped (``"dropped"``) and repaired
(``"repaired"``), drain statistics (``"drain"``: order, exit_reason, flushes, ms,
pending_launches, late_records) and capabilities. Keys this module does not know are summarised
generically, so new counters show up without a change here. Pure Python, no torch.
"""

from __future__ import annotations

import json
from typing import Any

HEALTH_KEY = "torch_mspti"

# Keys summarised in rows of their own, in this order; every other key is shown generically.
_KNOWN = (
    "library",
    "state",
    "errors",
    "findings",
    "enabled_kinds",
    "not_collected",
    "records",
    "records_by_kind",
    "dropped",
    "repaired",
    "drain",
    "capabilities",
    "marker_domains",
)
_DRAIN_KNOWN = (
    "exit_reason",
    "evidence",
    "pulled_by",
    "order",
    "flushes",
    "ms",
    "records_during_drain",
    "pending_launches",
    "unanswered_after_stop",
    "late_records",
)


def read(trace: Any) -> tuple[bool, Any]:
    """(present, value) of the trace's health report; a JSON string is parsed (kept as the string
    when it is not JSON). ``present`` is False for a bare event list or a trace without the key."""
    if not isinstance(trace, dict) or HEALTH_KEY not in trace:
        return False, None
    value = trace[HEALTH_KEY]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return True, value


def _num(v: Any) -> float | int | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def generic(value: Any) -> str:
    """Any JSON value in one readable line: dicts as ``key value, ...`` (nested ones in
    parentheses), lists comma-separated, bools yes/no, floats with 3 significant digits."""
    if isinstance(value, dict):
        if not value:
            return "-"
        parts = []
        for k, v in value.items():
            inner = generic(v)
            parts.append(f"{k} ({inner})" if isinstance(v, dict) and v else f"{k} {inner}")
        return ", ".join(parts)
    if isinstance(value, (list, tuple)):
        return ", ".join(generic(v) for v in value) if value else "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return "-" if value is None else str(value)


def counted(value: Any, total: bool = False) -> str:
    """A dict of counters: its non-zero entries (led by their sum when ``total``), ``none`` when
    every count is 0; any other value generically."""
    if not isinstance(value, dict) or not all(_num(v) is not None for v in value.values()):
        return generic(value)
    nonzero = {k: v for k, v in value.items() if v}
    if not nonzero:
        return f"none ({', '.join(value)} all 0)" if value else "none"
    text = generic(nonzero)
    zeros = len(value) - len(nonzero)
    if zeros:
        text += f" (other {zeros} 0)"
    # a total only of counts: a block such as "repaired" also holds a maximum in ns (max_*), which no
    # sum may include
    counts = {k: v for k, v in nonzero.items() if not str(k).startswith("max_")}
    if total and len(counts) > 1:
        text = f"{sum(counts.values()):g} in all: {text}"
    return text


def _library(lib: Any) -> str:
    if not isinstance(lib, dict):
        return generic(lib)
    if lib.get("available") is False:
        text = f"unavailable: {lib.get('reason') or 'no reason given'}"
        return text + (f" (fix: {lib['fix']})" if lib.get("fix") else "")
    details = [str(lib[k]) for k in ("version",) if lib.get(k)]
    if lib.get("found_by"):
        details.append(f"found by {lib['found_by']}")
    return f"{lib.get('path') or '?'}" + (f" ({'; '.join(details)})" if details else "")


def _drain(drain: Any) -> str:
    if not isinstance(drain, dict):
        return generic(drain)
    text = f"{drain.get('exit_reason', '?')}"
    if drain.get("order"):
        text += f" ({drain['order']})"
    if "flushes" in drain:
        text += f" after {drain['flushes']} flushes"
    ms = _num(drain.get("ms"))
    if ms is not None:
        text += f", {ms:.1f} ms"
    if drain.get("evidence"):
        text += f", pending launches let go on evidence: {drain['evidence']}"
    if drain.get("pulled_by"):
        text += f", device data pulled by Disable({drain['pulled_by']}) while the kinds still awaited stayed on"
    counts = [
        f"{drain[k]} {label}"
        for k, label in (
            ("records_during_drain", "records during the drain"),
            ("pending_launches", "launches still pending"),
            ("unanswered_after_stop", "launches after stop() without a row"),
            ("late_records", "late records"),
        )
        if k in drain
    ]
    extra = {k: v for k, v in drain.items() if k not in _DRAIN_KNOWN}
    if extra:
        counts.append(generic(extra))
    return text + ("; " + ", ".join(counts) if counts else "")


def _marker_domains(value: Any) -> str:
    """The session's ``marker_domains`` (``{"setting", "applied", "note"}``): an empty setting
    collects every domain."""
    if not isinstance(value, dict):
        return generic(value)
    setting = value.get("setting") or "all domains (marker_domains unset)"
    text = f"{setting}, {'applied' if value.get('applied') else 'not applied'}"
    return text + (f"; {value['note']}" if value.get("note") else "")


def _records(health: dict) -> str | None:
    by_kind = health.get("records_by_kind")
    total = health.get("records")
    if total is None and isinstance(by_kind, dict):
        total = sum(v for v in by_kind.values() if _num(v) is not None)
    if total is None:
        return None
    return f"{total}" + (f" ({generic(by_kind)})" if isinstance(by_kind, dict) and by_kind else "")


def summary_rows(health: dict) -> list[tuple[str, str]]:
    """(label, text) rows that summarise a health report, known keys first, then every other key."""
    rows: list[tuple[str, str]] = []
    if "library" in health:
        rows.append(("library", _library(health["library"])))
    if "state" in health:
        rows.append(("session", generic(health["state"])))
    errors = health.get("errors")
    if isinstance(errors, list):
        rows += [("error", generic(e)) for e in errors]
    elif errors is not None:
        rows.append(("errors", generic(errors)))
    told = findings(health)
    rows += [("finding", f"{f['name']}: {f['message']}") for f in told]
    if "enabled_kinds" in health:
        rows.append(("enabled kinds", generic(health["enabled_kinds"])))
    missing = health.get("not_collected")
    if isinstance(missing, list):
        rows += [("not collected", generic(m)) for m in missing]
    records = _records(health)
    if records is not None:
        rows.append(("records", records))
    for key in ("dropped", "repaired"):
        if key in health:
            rows.append((key, counted(health[key], total=True)))
    if "drain" in health:
        rows.append(("drain", _drain(health["drain"])))
    if "capabilities" in health:
        rows.append(("capabilities", generic(health["capabilities"])))
    if "marker_domains" in health:
        rows.append(("marker domains", _marker_domains(health["marker_domains"])))
    scalars = {k: v for k, v in health.items() if k not in _KNOWN and not isinstance(v, (dict, list))}
    for key, value in health.items():
        if key == "warnings" and told:
            continue  # the findings above name the same warnings, with their messages
        if key not in _KNOWN and isinstance(value, (dict, list)):
            rows.append((key.replace("_", " "), counted(value)))
    counters = {k: v for k, v in scalars.items() if _num(v) is not None}
    if counters:
        rows.append(("other counters", counted(counters)))
    rows += [(k.replace("_", " "), generic(v)) for k, v in scalars.items() if k not in counters]
    return rows


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def findings(health: Any) -> list[dict[str, str]]:
    """The session's findings in a health report (``[{"name", "message"}]``, highest priority
    first, each message without its ``torch-mspti:`` prefix); [] for a report without them (one
    written before findings existed lists only their names, under ``warnings``)."""
    raw = health.get("findings") if isinstance(health, dict) else None
    out = []
    for f in raw if isinstance(raw, list) else []:
        if isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("message"), str) and f["name"]:
            # Printed to a terminal: control characters (an escape sequence in a path) are shown escaped.
            text = f["message"].removeprefix("torch-mspti: ")
            out.append({"name": _printable(f["name"]), "message": _printable(text)})
    return out


def pending_launches(health: dict) -> int:
    drain = health.get("drain")
    n = _num(drain.get("pending_launches")) if isinstance(drain, dict) else None
    return int(n or 0)
