"""``torch_mspti.diagnostics()``: why the NPU lane looks the way it does.

The report has four parts (all plain JSON-serialisable data in :meth:`Diagnostics.to_dict`):

* ``library`` -- available, path, how it was found, every candidate tried with its outcome and
  reason, symbols resolved and missing, a capability table, the MSPTI generation, and when not
  available the ``reason`` and the ``fix`` (one line each);
* ``plugin`` -- registered, forwarded to kineto, the PrivateUse1 backend name, whether another
  PrivateUse1 profiler was registered first, how often kineto configured it, MSPTI buffers
  outstanding (``buffers_outstanding``, 0 once every session has drained) and kept for reuse
  (``buffers_pooled``), and whether this process was forked after MSPTI was loaded
  (``forked_child``: profiling is then disabled, see ``library['reason']``);
* ``last_session`` -- state, errors, records by kind, kernels, linked kernels, link ratio,
  drops by reason, buffer counts, and drain statistics (exit reason, flushes, ms, records during
  the drain, launches still pending, late records); ``None`` before the first device session;
* ``totals`` -- the same counters summed over every finished session of the process.

Times are ms; ratios are in [0, 1]. Thread-safe: each call takes a fresh snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import _C


@dataclass(frozen=True)
class Diagnostics:
    """A snapshot of the plugin's state; see the module docstring for the fields."""

    library: dict[str, Any]
    plugin: dict[str, Any]
    last_session: dict[str, Any] | None
    totals: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    environment_errors: list[str] = field(default_factory=list)

    @property
    def collection_possible(self) -> bool:
        """True when a usable libmspti is loaded and our profiler is registered."""
        return bool(self.library.get("available")) and bool(self.plugin.get("registered"))

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (json.dumps-able)."""
        return {
            "library": self.library,
            "plugin": self.plugin,
            "last_session": self.last_session,
            "totals": self.totals,
            "config": self.config,
            "environment_errors": self.environment_errors,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def __repr__(self) -> str:
        lib = self.library
        if lib.get("available"):
            lib_line = f"library: {lib.get('path')} (found by {lib.get('found_by')}; {lib.get('version')})"
        else:
            lib_line = f"library: unavailable: {lib.get('reason')} -> {lib.get('fix')}"
        plugin = self.plugin
        plugin_line = (
            f"plugin: registered={plugin.get('registered')} backend={plugin.get('privateuse1_backend')!r} "
            f"other_profiler={plugin.get('other_profiler')}"
        )
        last = self.last_session
        if last is None:
            session_line = "last session: none"
        else:
            ratio = last.get("link_ratio")
            ratio_text = "n/a" if ratio is None else f"{ratio:.1%}"
            drain = last.get("drain") or {}
            session_line = (
                f"last session: {last.get('state')}, {last.get('kernels')} kernels, "
                f"{last.get('linked_kernels')} linked ({ratio_text}), drain {drain.get('exit_reason', 'n/a')} "
                f"in {drain.get('ms', 0):.1f} ms, {drain.get('pending_launches', 0)} pending"
            )
        return "\n".join(["torch_mspti.Diagnostics(", "  " + lib_line, "  " + plugin_line, "  " + session_line, ")"])


def diagnostics(load_library: bool = True) -> Diagnostics:
    """Take a diagnostics snapshot.

    ``load_library=True`` first searches for and loads libmspti if that has not happened yet (as
    the first profiling session would); it never raises for a missing or broken library, which
    is described in ``library['reason']`` and ``library['fix']`` instead.
    """
    from .config import config

    sessions = json.loads(_C.session_report_json())
    return Diagnostics(
        library=_C.library_report(load_library),
        plugin=_C.plugin_report(),
        last_session=sessions["last_session"],
        totals=sessions["totals"],
        config=config.to_dict(),
        environment_errors=config.environment_errors(),
    )
