"""``torch_mspti.diagnostics()``: why the NPU lane looks the way it does.

A :class:`Diagnostics` snapshot has typed parts (all plain JSON-serialisable data through
:meth:`Diagnostics.to_dict`, whose keys are those of the trace's health report):

* ``library`` (:class:`LibraryInfo`) -- available, path, how it was found, every candidate tried
  with its outcome and reason, symbols resolved and missing, a capability table with the reason
  (and fix) of every capability that is missing, the MSPTI generation, and when not available the
  ``reason`` and the ``fix``;
* ``plugin`` (:class:`PluginInfo`) -- registered, mode, whether torch_npu's built-in MSPTI backend
  is loaded (``other_profiler``), whether kineto used our profiler for the last device trace
  (``last_trace_used_ours``), MSPTI buffers outstanding/pooled, ``forked_child``;
* ``last_session`` (``torch_mspti._C.SessionReport`` or None) -- state, errors, warnings, enabled
  kinds, the host clock of MSPTI's API records, counters (records by kind; buffers; correlation;
  dropped; repaired; rows; links by state: verified, recovered, unverified, no_op_on_thread,
  clock_untrusted, ambiguous, no_record), and drain statistics;
* ``totals`` (``torch_mspti._C.Counters``) -- the same counters summed over every finished session;
* ``torch`` (dict) -- the torch this build was compiled against (``built_for``) and the one running,
  how the build adapted to it (``privateuse1_profiler_registry``, ``session_metadata``,
  ``flow_id_bits``, ``counter_events``; src/core/TorchCompat.h), whether torch-mspti had to list the PrivateUse1
  profiler activity that torch omits (``privateuse1_activity_added``; torch_mspti/_torch_compat.py),
  and what torch's profiler does with the plugin's rows on this minor (``support``: the README's
  support-table row, ``None`` for a minor the table does not list).

Times are ms unless a name says ns; ratios are in [0, 1]. Thread-safe: each call takes a fresh
snapshot. Never raises for a missing or broken library (that is what ``library.reason`` is for);
text that is not UTF-8 (file names) comes surrogate-escaped.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from . import _C, _profile_request, _torch_compat

# The findings that explain a low linked ratio (their fixes come from the findings table).
_LINK_FINDINGS = ("task-queue", "unverified", "ambiguous", "clock")


@dataclass(frozen=True)
class LibraryInfo:
    """The libmspti search and what the loaded library can do."""

    attempted: bool
    available: bool
    path: str | None
    found_by: str | None
    reason: str | None
    fix: str | None
    version: str | None
    candidates: list[dict[str, str]]
    symbols: dict[str, list[str]]
    capabilities: dict[str, bool | None]
    capability_notes: dict[str, str]


@dataclass(frozen=True)
class PluginInfo:
    """How the plugin is registered and used in this process."""

    registered: bool
    forwarded_to_kineto: bool
    factory_called: bool
    mode: str
    other_factory: bool
    other_profiler: dict[str, Any] | None
    message: str
    privateuse1_backend: str
    backend_named: bool
    configure_calls: int
    device_sessions: int
    last_configure_ns: int
    sessions: int
    last_trace_used_ours: bool | None
    buffers_outstanding: int
    buffers_pooled: int
    forked_child: bool
    #: The stopped sessions' msptiUnsubscribe, made on a background thread after stop() returned
    #: (src/core/SubscriptionRelease.h): ``releases``, ``in_flight``, ``last_unsubscribe_ms`` (ms),
    #: ``last_result`` (msptiResult), ``last_error`` ("" when it succeeded), ``skipped_at_exit``.
    release: dict[str, Any]
    #: Why the latest trace had no device session, and the fix: torch's PrivateUse1 backend was
    #: unnamed, or the latest ``torch.profiler.profile`` that asked for PrivateUse1 also listed
    #: CUDA (XPU, MTIA, HPU), which torch profiles instead; else None.
    no_device_session_reason: str | None = None


@dataclass(frozen=True)
class Diagnostics:
    """A snapshot of the plugin's state; see the module docstring for the parts."""

    library: LibraryInfo
    plugin: PluginInfo
    last_session: _C.SessionReport | None
    totals: _C.Counters
    config: dict[str, Any] = field(default_factory=dict)
    environment_errors: list[str] = field(default_factory=list)
    torch: dict[str, Any] = field(default_factory=dict)

    @property
    def collection_possible(self) -> bool:
        """True when a usable libmspti is loaded and our profiler is registered."""
        return self.library.available and self.plugin.registered

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (json.dumps-able)."""
        return {
            "library": asdict(self.library),
            "plugin": asdict(self.plugin),
            "last_session": self.last_session.to_dict() if self.last_session is not None else None,
            "totals": self.totals.to_dict(),
            "config": self.config,
            "environment_errors": self.environment_errors,
            "torch": self.torch,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def __repr__(self) -> str:
        lib = self.library
        if lib.available:
            lib_line = f"library: {lib.path} (found by {lib.found_by}; {lib.version})"
        else:
            lib_line = f"library: unavailable: {lib.reason} -> {lib.fix}"
        plugin = self.plugin
        peer = (plugin.other_profiler or {}).get("description")
        plugin_line = (
            f"plugin: registered={plugin.registered} backend={plugin.privateuse1_backend!r} "
            f"other_profiler={peer or None} last_trace_used_ours={plugin.last_trace_used_ours}"
        )
        last = self.last_session
        if last is None:
            session_line = "last session: none" + (
                f" ({plugin.no_device_session_reason})" if plugin.no_device_session_reason else ""
            )
        else:
            c = last.counters
            rows = c.rows_device_rows
            ratio = "n/a" if not rows else f"{c.linked_rows / rows:.1%}"
            drain = last.drain
            drain_text = "n/a" if drain is None else f"{drain.exit_reason} in {drain.ms:.1f} ms"
            unlinked = ", ".join(
                f"{n} {s['name']}"
                for s in link_states()
                if not s["linked"] and (n := getattr(c, f"links_{s['name']}", 0))
            )
            session_line = (
                f"last session: {last.state}, {rows} device rows, {c.linked_rows} linked ({ratio}: "
                f"{c.links_verified} verified, {c.links_recovered} recovered, {c.links_unverified} unverified)"
                + (f", unlinked: {unlinked}" if unlinked else "")
                + f", drain {drain_text}, {0 if drain is None else drain.pending_launches} pending"
            )
            fixes = {f["name"]: f["fix"] for f in findings()}
            why = [f"{w}: {fixes[w]}" for w in last.warnings if w in _LINK_FINDINGS]
            if why:
                session_line += "\n  links: " + "; ".join(why)
        return "\n".join(["torch_mspti.Diagnostics(", "  " + lib_line, "  " + plugin_line, "  " + session_line, ")"])


def link_states() -> list[dict[str, Any]]:
    """The states a device row's link to its op can be in, in the plugin's order: ``name`` (the
    row's ``args.link`` in the trace and the key of its ``links`` counter), ``linked`` (the row is
    credited to an op) and ``meaning``. README "Links: what an arrow means" explains them."""
    return [dict(s) for s in _C.link_states()]


def findings() -> list[dict[str, Any]]:
    """What a session can tell its user, highest priority first (the plugin's findings table,
    src/core/SessionFindings.h): ``name`` (the key in ``last_session.warnings`` and in the trace's
    health report ``findings``), ``group`` (findings of one non-empty group exclude each other:
    the drain's explain the same pending launches, so only the first that holds is given) and
    ``fix`` (one line). A session's own findings, with their full messages, are
    ``diagnostics().last_session.findings``."""
    return [dict(f) for f in _C.findings()]


def _plugin_report() -> dict[str, Any]:
    """The plugin's report; once a torch.profiler profile started, the latest one decides
    ``no_device_session_reason``: the reason it lost PrivateUse1 before kineto (a CUDA activity
    beside it, an unnamed backend), or None (torch_mspti/_profile_request.py)."""
    report = _C.plugin_report()
    lost = _profile_request.last_reason()
    if lost is not _profile_request.UNKNOWN:  # the latest torch.profiler profile decides
        report["no_device_session_reason"] = lost
    return report


def diagnostics(load_library: bool = True) -> Diagnostics:
    """Take a diagnostics snapshot.

    ``load_library=True`` first searches for and loads libmspti if that has not happened yet (as
    the first profiling session would); it never raises for a missing or broken library, which
    is described in ``library.reason`` and ``library.fix`` instead.
    """
    from .config import config

    return Diagnostics(
        library=LibraryInfo(**_C.library_report(load_library)),
        plugin=PluginInfo(**_plugin_report()),
        last_session=_C.last_session(),
        totals=_C.totals(),
        config=config.to_dict(),
        environment_errors=config.environment_errors(),
        torch=_torch_compat.report(),
    )
