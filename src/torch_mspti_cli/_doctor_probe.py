"""``torch-mspti doctor --probe``: run a short profile in a child process and report its session.

The child is :mod:`torch_mspti.probe` (real NPU when torch_npu and CANN are installed, else the
simulated NPU). This side starts it, reads its JSON result, checks the trace it exported
(:func:`.check.check_trace`) and reports what the session saw:
device, library, PrivateUse1 backend name, whether kineto used torch-mspti's profiler and the
capabilities observed (from the plugin's diagnostics), and the kernels, their link ratio and the
drain as the probe's trace and its health report hold them (the trace format is the stable part).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from . import _health
from ._doctor_verdict import print_verdict, render_capabilities, verdict
from ._output import PROG, Out, dump_json, fmt, plural, ratio

TIMEOUT_S = 300


def run_child(device: str, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """The probe's result, or ``{"error": ...}`` when the child failed to produce one."""
    with tempfile.TemporaryDirectory(prefix="torch_mspti_probe_") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-m", "torch_mspti.probe", "--device", device, "--out", out]
        cmd += ["--trace", os.path.join(tmp, "probe.json")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"requested_device": device, "error": f"the probe did not finish within {timeout:.0f} s"}
        try:
            with open(out, encoding="utf-8") as fh:
                result = json.load(fh)
        except (OSError, ValueError):
            lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
            last = lines[-1] if lines else f"exit status {proc.returncode}"
            return {"requested_device": device, "error": f"the probe process failed: {last}"}
        if result.get("trace") and not result.get("error"):
            from .check import TraceFileError, check_trace

            try:
                result["check"] = check_trace(result["trace"]).to_dict()
            except TraceFileError as exc:
                result["error"] = f"the probe's trace cannot be read: {exc}"
        result["trace"] = None  # removed with the temporary directory
        result["stderr_tail"] = proc.stderr.strip().splitlines()[-5:]
        return result


def probe_verdict(r: dict[str, Any]) -> tuple[bool, str]:
    """(a profile collected NPU kernels through torch-mspti, one line). The kernels, links and
    drain are read from the probe's trace and its health report, as a user would see them; the
    plugin's registration and backend name from its diagnostics."""
    if r.get("error"):
        return False, r["error"]
    diag = r.get("diagnostics") or {}
    plugin = diag.get("plugin") or {}
    if plugin.get("backend_named") is False:
        return False, (
            f"the PrivateUse1 backend stayed {plugin.get('privateuse1_backend')!r} in the probe: "
            "torch_npu (or torch_mspti.sim.enable()) must name it before profiling"
        )
    ok, line = verdict({**diag, "simulator": {}})
    if not ok:
        return False, line
    check = r.get("check") or {}
    health, stats = check.get("health"), check.get("stats") or {}
    if not isinstance(health, dict):
        return False, "the probe's trace has no torch-mspti health report: kineto did not use torch-mspti's profiler"
    if health.get("state") == "failed":
        return False, f"the probe's session failed: {'; '.join(map(str, health.get('errors') or [])) or '?'}"
    kernels = stats.get("kernels") or 0
    if not kernels:
        return False, "the probe's trace holds no kernel although the device ran its ops"
    drain = health.get("drain") if isinstance(health.get("drain"), dict) else {}
    pending = _health.pending_launches(health)
    if pending:
        return (
            False,
            f"{pending} of the probe's launches had no kernel when the drain ended ({drain.get('exit_reason')})",
        )
    where = "the simulated NPU" if r.get("device") == "sim" else "the Ascend NPU"
    line = (
        f"a profile on {where} put {plural(kernels, 'kernel')} in its trace, {ratio(stats.get('link_ratio'))} "
        f"linked to their ops; drain {drain.get('exit_reason', '?')} in {fmt(drain.get('ms'))} ms, nothing pending"
    )
    if r.get("device") == "sim" and (r.get("simulator") or {}).get("mspti") == "real":
        line += (
            "; no real NPU was used: the simulated NPU drove the real MSPTI of a fake CANN root "
            f"({(r.get('simulator') or {}).get('cann_root')}), so this shows torch-mspti works with that MSPTI"
        )
    elif r.get("device") == "sim":
        line += "; no real NPU was used, so this shows torch-mspti works, not CANN's MSPTI"
    return True, line


def _render(out: Out, r: dict[str, Any]) -> None:
    out.line(f"{PROG} doctor --probe: a short profile in a child process", "bold")
    diag = r.get("diagnostics") or {}
    lib, plugin = diag.get("library") or {}, diag.get("plugin") or {}
    sim = r.get("simulator") or {}
    if r.get("device") == "sim":
        device = f"simulated NPU ({plural(sim.get('device_count') or 0, 'device')}, launch mode {fmt(sim.get('launch_mode'))})"
    else:
        device = {"real": "Ascend NPU (torch_npu)"}.get(r.get("device"), f"none ({r.get('requested_device')})")
    out.section("Probe session")
    rows: list[tuple[str, Any]] = [("device", device)]
    if diag:
        library = f"{fmt(lib.get('path'))} ({fmt(lib.get('version'))})" if lib.get("available") else lib.get("reason")
        rows += [
            ("library", library),
            ("PrivateUse1 backend", plugin.get("privateuse1_backend")),
            ("kineto used ours", plugin.get("last_trace_used_ours")),
            ("capabilities", render_capabilities(lib.get("capabilities") or {})),
        ]
    counters = r.get("device_counters") or {}
    if "kernels" in counters:
        rows.append(("device launched", f"{plural(counters['kernels'], 'kernel')} inside the profile"))
    check = r.get("check")
    if check:
        stats = check.get("stats") or {}
        rows.append(
            (
                "trace",
                f"{plural(stats.get('kernels') or 0, 'kernel')}, {fmt(stats.get('linked_kernels'))} linked "
                f"({ratio(stats.get('link_ratio'))})",
            )
        )
        counts = ", ".join(f"{k} {n}" for k, n in sorted((check.get("counts_by_rule") or {}).items()))
        rows.append(("trace check", "no problems" if check.get("ok") else f"{check.get('problem_count')}: {counts}"))
        rows += [("warning", f"{w['rule']}: {w['message']}") for w in check.get("warnings") or []]
    rows += [("warning", w) for w in r.get("warnings") or []]
    out.rows(rows)
    health = (check or {}).get("health")
    if isinstance(health, dict):
        out.section("Its health report (embedded in the probe's trace)")
        out.rows(_health.summary_rows(health))


def run(args: argparse.Namespace) -> int:
    result = run_child(args.device)
    ok, line = probe_verdict(result)
    if args.json:
        dump_json({"ok": ok, "verdict": line, "probe": result})
        if not ok:
            print(line, file=sys.stderr)
        return 0 if ok else 1
    out = Out()
    _render(out, result)
    print_verdict(out, ok, line)
    return 0 if ok else 1
