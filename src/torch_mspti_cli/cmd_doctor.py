"""``torch-mspti doctor``: can NPU kernels be collected here, and if not, why not?

Three sources, one per form of the command:

* ``doctor``: this process's library search, registration and settings (it imports
  torch_mspti, hence torch). The doctor runs in a process of its own, so it has no profiling
  session to show: it points at the two forms below for that;
* ``doctor --probe``: a short profile in a child process (:mod:`torch_mspti_cli._doctor_probe`);
* ``doctor TRACE.json``: the health report a profiled process embedded in its trace
  (:mod:`torch_mspti_cli._doctor_trace`).

Each ends with a one-line verdict (``OK: ...`` / ``NOT READY: ...``, wrapped at spaces only) and
exits 0 when collection is possible, 1 when not (2: the trace cannot be read).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import _health
from ._doctor_verdict import print_verdict, render_capabilities, verdict
from ._output import PROG, Out, dump_json, fmt, one_line

TRANSFER_TO_NPU = "torch_npu.contrib.transfer_to_npu"
SESSION_SOURCES = (
    "`torch-mspti doctor --probe` (a short profile on this machine), "
    "`torch-mspti doctor TRACE.json` (the health report of an exported trace) or "
    "torch_mspti.diagnostics() inside the profiled program"
)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("torch-mspti")
    except PackageNotFoundError:
        return "unknown (not installed)"


def bypass_findings(plugin: dict | None) -> list[dict[str, str]]:
    """Setups in this process that route profiling around our plugin."""
    found = []
    if TRANSFER_TO_NPU in sys.modules:
        found.append(
            {
                "kind": "transfer_to_npu",
                "message": f"{TRANSFER_TO_NPU} is imported; it swaps torch.profiler for torch_npu's profiler",
                "fix": f"do not import {TRANSFER_TO_NPU} in the profiled program",
            }
        )
    torch = sys.modules.get("torch")
    profile = getattr(getattr(torch, "profiler", None), "profile", None)
    module = getattr(profile, "__module__", None) or ""
    if profile is not None and not module.startswith("torch.profiler"):
        found.append(
            {
                "kind": "profiler_replaced",
                "message": f"torch.profiler.profile comes from {module or '?'}, not torch",
                "fix": "use torch's own torch.profiler.profile",
            }
        )
    if plugin and plugin.get("other_profiler"):
        found.append(
            {
                "kind": "other_privateuse1_profiler",
                "message": "another PrivateUse1 profiler (e.g. torch_npu's) is registered with kineto",
                "fix": "profile with torch.profiler and let torch-mspti own the PrivateUse1 profiler",
            }
        )
    return found


def _build_torch() -> dict[str, str | None]:
    """The torch the installed build was made for (read from torch_mspti/_build_info.py, without
    importing the package, which refuses to load under another torch minor) and the running one."""
    import importlib.util
    import re
    from pathlib import Path

    built = running = None
    try:
        spec = importlib.util.find_spec("torch_mspti")
        if spec is not None and spec.origin:
            text = (Path(spec.origin).parent / "_build_info.py").read_text()
            match = re.search(r'TORCH_VERSION = "([^"]+)"', text)
            built = match.group(1) if match else None
    except (ImportError, OSError):
        pass
    try:
        import torch  # its own version string, local label included, as the import error names it

        running = str(torch.__version__)
    except Exception:
        pass
    return {"built_for": built, "running": running}


def _failure(args: argparse.Namespace, line: str) -> int:
    torch_facts = _build_torch()
    if args.json:
        dump_json(
            {
                "ok": False,
                "error": line,
                "library": None,
                "plugin": None,
                "last_session": None,
                "totals": None,
                "torch": torch_facts,
            }
        )
    # One line (the import error of a torch minor mismatch names both versions and the fix); the
    # JSON form also carries the two versions.
    print(f"{PROG} doctor: {line}", file=sys.stderr)
    return 1


def _simulator_facts(torch_mspti: Any, lib: dict) -> dict[str, Any]:
    """Installed simulator generations and, when the loaded library is one, its generation."""
    try:
        from torch_mspti import _paths

        generations = list(_paths.simulator_generations())
        default = torch_mspti.simulator_library() if generations else None
        loaded = _paths.simulator_generation_of(lib["path"]) if lib.get("available") and lib.get("path") else None
    except Exception:  # an install without the simulator files
        return {"generations": [], "default_library": None, "loaded_generation": None}
    return {"generations": generations, "default_library": default, "loaded_generation": loaded}


def run(args: argparse.Namespace) -> int:
    if args.trace is not None:
        from . import _doctor_trace

        return _doctor_trace.run(args)
    if args.probe:
        from . import _doctor_probe

        return _doctor_probe.run(args)
    try:
        import torch_mspti

        diagnostics = torch_mspti.diagnostics
    except Exception as exc:  # an import failure is an expected, reportable state here
        return _failure(args, f"torch_mspti cannot be used: {one_line(exc)}")
    try:
        d = dict(diagnostics().to_dict())
    except Exception as exc:
        return _failure(args, f"torch_mspti.diagnostics() failed: {one_line(exc)}")
    d["simulator"] = _simulator_facts(torch_mspti, d.get("library") or {})
    ok, line = verdict(d)
    d["bypass"] = bypass_findings(d.get("plugin"))
    d["ok"] = ok
    d["verdict"] = line
    if args.json:
        dump_json(d)
        if not ok:
            print(line, file=sys.stderr)
        return 0 if ok else 1
    out = Out()
    _render(out, d)
    print_verdict(out, ok, line)
    return 0 if ok else 1


# ------------------------------------------------------------------------------ rendering


def _render_torch(out: Out, t: dict) -> None:
    """The torch section: the torch the build was made for, how it adapted, and the support row."""
    if not t:
        return
    out.section("Torch")
    added = t.get("privateuse1_activity_added")
    rows: list[tuple[str, Any]] = [
        ("built for", t.get("built_for")),
        ("running", t.get("running")),
        ("PrivateUse1 registry", "yes" if t.get("privateuse1_profiler_registry") else "none (registered with kineto)"),
        ("health report via", t.get("session_metadata")),
        ("flow id bits", t.get("flow_id_bits")),
    ]
    if added:
        rows.append(("PrivateUse1 activity", "added by torch-mspti (this torch build omits it)"))
    out.rows(rows)
    support = t.get("support")
    if support is None:
        out.para(
            f"torch {t.get('running')} is not in the README's support table; expect differences "
            "(see README, Torch versions)",
            indent=2,
            style="yellow",
        )
        return
    cells = ", ".join(f"{k.replace('_', ' ')} {support[k]}" for k in _SUPPORT_COLUMNS)
    out.para(f"support (torch {support['minor']}, torch_npu {support['torch_npu']}): {cells}", indent=2)
    if support.get("note"):
        out.para(f"note: {support['note']}", indent=2)


_SUPPORT_COLUMNS = ("builds", "kernels", "arrows", "device_time", "collectives", "copies")


def _render(out: Out, d: dict) -> None:
    out.line(f"{PROG} {version()}", "bold")
    lib = d.get("library") or {}
    sim = d.get("simulator") or {}
    out.section("Library (libmspti)")
    rows: list[tuple[str, Any]] = [
        ("available", lib.get("available")),
        ("path", lib.get("path")),
        ("found by", lib.get("found_by")),
        ("version", lib.get("version")),
    ]
    if sim.get("loaded_generation"):
        rows.append(("simulated", f"yes: the simulated MSPTI {sim['loaded_generation']} (torch_mspti.sim)"))
    if not lib.get("available"):
        rows += [("reason", lib.get("reason")), ("fix", lib.get("fix"))]
    out.rows(rows)
    cands = lib.get("candidates") or []
    if cands:
        out.line("  candidates, in search order:")
        for c in cands:
            out.para(c.get("path") or "(no path)", indent=4)
            out.para(
                f"{fmt(c.get('source'))}: {fmt(c.get('outcome'))}, {fmt(c.get('reason'))}", indent=8, first_indent=6
            )
    sym = lib.get("symbols") or {}
    out.rows(
        [
            ("symbols", f"{len(sym.get('resolved') or [])} resolved"),
            ("missing required", sym.get("missing_required")),
            ("missing optional", sym.get("missing_optional")),
            ("capabilities", render_capabilities(lib.get("capabilities") or {})),
        ]
    )

    plugin = d.get("plugin") or {}
    backend = plugin.get("privateuse1_backend")
    if backend is not None and plugin.get("backend_named") is False:
        backend = f"{backend} (not renamed: neither torch_npu nor torch_mspti.sim.enable() ran in this process)"
    out.section("Plugin")
    out.rows(
        [
            ("registered", plugin.get("registered")),
            ("forwarded to kineto", plugin.get("forwarded_to_kineto")),
            ("PrivateUse1 backend", backend),
            ("other profiler", plugin.get("other_profiler")),
            ("mode", plugin.get("mode")),
            ("sessions", plugin.get("sessions")),
            ("last trace used ours", plugin.get("last_trace_used_ours")),
        ]
    )

    _render_torch(out, d.get("torch") or {})

    env_errors = d.get("environment_errors") or []
    if env_errors:
        out.section("Settings (TORCH_MSPTI_* variables ignored)")
        for e in env_errors:
            out.para(f"! {e}", indent=4, first_indent=2, style="yellow")

    if sim.get("generations"):
        out.section("Simulator (no NPU needed)")
        out.rows(
            [
                ("generations", sim["generations"]),
                ("default library", sim.get("default_library")),
                ("use it", "torch_mspti.sim.enable(), `torch-mspti demo`, `torch-mspti doctor --probe`"),
            ]
        )

    last = d.get("last_session")
    out.section("Last session")
    if not last:
        out.para(
            f"none in this process (the doctor runs in a process of its own); for a session see {SESSION_SOURCES}.",
            indent=2,
        )
    else:  # generic: the report's keys follow the plugin's counters
        out.rows(_health.summary_rows(last))

    if d.get("bypass"):
        out.section("Warnings")
        for b in d["bypass"]:
            out.para(f"! {b['message']}; fix: {b['fix']}", indent=2, style="yellow")
