"""The doctor's verdict: whether NPU collection is possible from a diagnostics report, and the
closing ``OK: ...`` / ``NOT READY: ...`` line every form of ``torch-mspti doctor`` ends with.

Shared by :mod:`.cmd_doctor` (this process), :mod:`._doctor_probe` (a child's session) and
:mod:`._doctor_trace` (a trace's health report); it imports none of them.
"""

from __future__ import annotations

from ._output import Out, fmt


def verdict(d: dict) -> tuple[bool, str]:
    """(collection possible, one-line reason and fix) for a diagnostics report (``to_dict()``
    plus the doctor's ``simulator`` entry)."""
    lib, plugin = d.get("library") or {}, d.get("plugin") or {}
    sim = d.get("simulator") or {}
    if not lib.get("available"):
        reason = lib.get("reason") or "libmspti.so is not available"
        fix = lib.get("fix") or "source CANN's set_env.sh or set TORCH_MSPTI_LIBRARY"
        line = f"{reason}: {fix}"
        if sim.get("generations"):
            line += (
                ". The simulated NPU needs no CANN: `torch-mspti demo` profiles on it and "
                "`torch-mspti doctor --probe` checks a session there"
            )
        return False, line
    if not plugin.get("registered"):
        if plugin.get("mode") == "off":
            return False, "the torch-mspti plugin is switched off (TORCH_MSPTI_PROFILER=off): set it to auto or mspti"
        return False, (
            "the torch-mspti profiler is not registered with kineto: import torch_mspti before "
            "profiling and check that TORCH_MSPTI_DISABLE is unset"
        )
    if plugin.get("last_trace_used_ours") is False:
        return False, (
            "kineto used another PrivateUse1 profiler (e.g. torch_npu's) for the last trace: set "
            "TORCH_MSPTI_PROFILER=mspti, or import torch_mspti before torch_npu"
        )
    generation = sim.get("loaded_generation")
    what = f"the simulated MSPTI {generation}" if generation else "libmspti"
    line = f"NPU collection is possible ({what} at {lib.get('path') or '?'})"
    if generation:
        line += "; only torch_mspti.sim's simulated NPU produces kernels for it"
    if plugin.get("backend_named") is False:
        line += (
            f"; not verified by a session: PrivateUse1 is still {plugin.get('privateuse1_backend')!r} "
            "in this process (torch_npu or torch_mspti.sim.enable() names it 'npu'), "
            "`torch-mspti doctor --probe` profiles for real"
        )
    return True, line


def print_verdict(out: Out, ok: bool, line: str, bad: str = "NOT READY") -> None:
    """The last line(s): ``OK: ...`` or ``<bad>: ...``, wrapped at spaces with a hanging indent."""
    out.line()
    out.para(("OK: " if ok else f"{bad}: ") + line, indent=2, first_indent=0, style="bold green" if ok else "bold red")


def render_capabilities(caps: dict) -> str | None:
    return "  ".join(f"{k} {fmt(v)}" for k, v in caps.items()) or None
