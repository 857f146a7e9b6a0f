"""``torch-mspti doctor --probe``: run a short profile in a child process and report its session.

The child is :mod:`torch_mspti.probe` (real NPU when torch_npu and CANN are installed, else the
simulated NPU). This side starts it, reads its JSON result and reports what the session saw:
device, library, PrivateUse1 backend name, whether kineto used torch-mspti's profiler, kernels
and their link ratio, the drain, the capabilities observed, and the check of the probe's trace.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from ._output import PROG, Out, dump_json, fmt, plural, ratio
from .cmd_doctor import print_verdict, render_capabilities, render_session, verdict

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
        result["trace"] = None  # removed with the temporary directory
        result["stderr_tail"] = proc.stderr.strip().splitlines()[-5:]
        return result


def probe_verdict(r: dict[str, Any]) -> tuple[bool, str]:
    """(a profile collected NPU kernels through torch-mspti, one line)."""
    if r.get("error"):
        return False, r["error"]
    diag = r.get("diagnostics") or {}
    plugin, last = diag.get("plugin") or {}, diag.get("last_session") or {}
    if plugin.get("backend_named") is False:
        return False, (
            f"the PrivateUse1 backend stayed {plugin.get('privateuse1_backend')!r} in the probe: "
            "torch_npu (or torch_mspti.sim.enable()) must name it before profiling"
        )
    ok, line = verdict({**diag, "simulator": {}})
    if not ok:
        return False, line
    if last.get("state") == "failed":
        return False, f"the probe's session failed: {'; '.join(map(str, last.get('errors') or [])) or '?'}"
    kernels = last.get("kernels") or 0
    if not kernels:
        return False, "the probe's session collected no kernel although the device ran its ops"
    where = "the simulated NPU" if r.get("device") == "sim" else "the Ascend NPU"
    drain = last.get("drain") or {}
    line = (
        f"a profile on {where} collected {plural(kernels, 'kernel')}, {ratio(last.get('link_ratio'))} linked "
        f"to their ops; drain {drain.get('exit_reason', '?')} in {fmt(drain.get('ms'))} ms, "
        f"{fmt(drain.get('pending_launches'))} launches pending"
    )
    if r.get("device") == "sim":
        line += "; no real NPU was used, so this shows torch-mspti works, not CANN's MSPTI"
    return True, line


def _render(out: Out, r: dict[str, Any]) -> None:
    out.line(f"{PROG} doctor --probe: a short profile in a child process", "bold")
    diag = r.get("diagnostics") or {}
    lib, plugin, last = diag.get("library") or {}, diag.get("plugin") or {}, diag.get("last_session") or {}
    sim = r.get("simulator") or {}
    if r.get("device") == "sim":
        device = f"simulated NPU ({fmt(sim.get('device_count'))} devices, launch mode {fmt(sim.get('launch_mode'))})"
    else:
        device = {"real": "Ascend NPU (torch_npu)"}.get(r.get("device"), f"none ({r.get('requested_device')})")
    out.section("Probe session")
    rows: list[tuple[str, Any]] = [("device", device)]
    if diag:
        counters = r.get("device_counters") or {}
        library = f"{fmt(lib.get('path'))} ({fmt(lib.get('version'))})" if lib.get("available") else lib.get("reason")
        rows += [
            ("library", library),
            ("PrivateUse1 backend", plugin.get("privateuse1_backend")),
            ("kineto used ours", plugin.get("last_trace_used_ours")),
            ("capabilities", render_capabilities(lib.get("capabilities") or {})),
        ]
        if "kernels" in counters:
            rows.append(("device launched", f"{plural(counters['kernels'], 'kernel')} inside the profile"))
    check = r.get("check")
    if check:
        counts = ", ".join(f"{k} {n}" for k, n in sorted((check.get("counts_by_rule") or {}).items()))
        rows.append(("trace check", "no problems" if check.get("ok") else f"{check.get('problem_count')}: {counts}"))
        rows += [("warning", f"{w['rule']}: {w['message']}") for w in check.get("warnings") or []]
    rows += [("warning", w) for w in r.get("warnings") or []]
    out.rows(rows)
    if last:
        out.section("Its session (torch_mspti.diagnostics() in the probe)")
        render_session(out, last)


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
