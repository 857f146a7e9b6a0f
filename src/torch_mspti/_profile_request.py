"""Where torch.profiler loses ProfilerActivity.PrivateUse1 before any device session can start.

``torch.profiler.profile`` (its ``_KinetoProfile`` base, torch 2.7-2.14 ``torch/profiler/profiler.py``)
profiles one device type: it takes the first of CUDA, XPU, MTIA and HPU among the activities, and
PrivateUse1 only when none of them is there; ``torch.autograd.profiler.profile`` then disables an
unavailable CUDA ("CUDA is not available, disabling CUDA profiling") and drops a PrivateUse1 backend
that was never named ("The privateuseone is not a valid device option"). Either way kineto is never
asked for the device, torch-mspti's profiler is never configured, and the NPU lane is empty with no
word from torch-mspti.

:func:`install` wraps ``_KinetoProfile.__init__`` so that a profile which asked for PrivateUse1 and
will not get it is told once per process and reason (a ``UserWarning`` at the user's line), and the
trace carries the reason under :data:`TRACE_KEY` for ``torch-mspti doctor TRACE``/``check``. A
profile that did not ask for PrivateUse1 hears nothing. It also wraps ``start_trace``:
:func:`last_reason` is the reason of the latest profile that started (``None`` when it lost nothing,
CPU-only profiles included), which ``diagnostics()`` reports. Thread-safe: one lock around the
bookkeeping; the wrappers keep torch's behaviour (they only add a warning and a metadata key).
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

from . import _C, _warn

#: Top-level key of the trace (kineto's trace metadata) that says why the NPU lane is empty.
TRACE_KEY = "torch_mspti_no_npu_lane"

_lock = threading.Lock()
_warned: set[str] = set()
_installed = False

# The device activities torch.profiler prefers to PrivateUse1, in its order.
_PREFERRED = ("CUDA", "XPU", "MTIA", "HPU")


def _reason(activities: Any, use_device: Any) -> str | None:
    """Why a profile with these ``activities`` gets no NPU lane, or None."""
    import torch
    from torch.profiler import ProfilerActivity

    if ProfilerActivity.PrivateUse1 not in activities:
        return None
    backend = torch._C._get_privateuse1_backend_name()
    if backend == "privateuseone":
        return _C.unnamed_backend_reason()
    taken = [n for n in _PREFERRED if getattr(ProfilerActivity, n, None) in activities]
    if taken and use_device != backend:
        return (
            f"torch-mspti: no NPU activity can be recorded: torch.profiler profiles one device type and "
            f"took ProfilerActivity.{taken[0]} (listed beside ProfilerActivity.PrivateUse1), so the "
            f"{backend!r} device is not profiled and the NPU lane stays empty. Remove "
            f"ProfilerActivity.{taken[0]} from the activities: activities=[ProfilerActivity.CPU, "
            f"ProfilerActivity.PrivateUse1]"
        )
    return None


#: What :func:`last_reason` returns before a torch.profiler profile started.
UNKNOWN = object()
_started: Any = UNKNOWN  # the reason of the latest profile that started (None: it lost nothing)


def last_reason() -> Any:
    """Why the latest ``torch.profiler.profile`` that **started** gets no NPU lane: the reason, None
    when it lost nothing (a CPU-only profile too), or :data:`UNKNOWN` before any profile started
    through torch.profiler (an on-demand trace, the legacy profiler)."""
    with _lock:
        return _started


def _note(profile: Any) -> str | None:
    """At a profile's creation: its reason (kept on it for its start) and the trace's metadata;
    returns the reason."""
    reason = _reason(getattr(profile, "activities", None) or (), getattr(profile, "use_device", None))
    profile._torch_mspti_no_npu_lane = reason
    if reason is None:
        return None
    # Preset: torch adds it to kineto's trace metadata when the trace starts (add_metadata before
    # the start would be lost). kineto's writer turns every backslash into "/", so the value holds
    # no escaped quote.
    preset = getattr(profile, "preset_metadata_json", None)
    if preset is not None:
        preset(TRACE_KEY, json.dumps(reason.replace('"', "'")))
    return reason


def _warn_once(reason: str) -> None:
    """The warning, once per process and reason. Not caught: a filter that turns it into an error
    raises it from the profile's construction, as the user asked."""
    with _lock:
        first = reason not in _warned
        _warned.add(reason)
    if first:
        _warn.warn(reason)


def _note_start(profile: Any) -> None:
    global _started
    with _lock:
        _started = getattr(profile, "_torch_mspti_no_npu_lane", None)


def install() -> None:
    """Wraps ``torch.profiler.profiler._KinetoProfile.__init__`` once; a torch without it is left
    alone (nothing is said there)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    try:
        from torch.profiler import profiler as _profiler
    except ImportError:  # pragma: no cover - every torch we serve has it
        return
    cls = getattr(_profiler, "_KinetoProfile", None)
    if cls is None:
        return
    original_init, original_start = cls.__init__, cls.start_trace

    @functools.wraps(original_init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        try:
            reason = _note(self)
        except Exception:
            reason = None
        if reason is not None:
            _warn_once(reason)

    @functools.wraps(original_start)
    def start_trace(self, *args: Any, **kwargs: Any) -> Any:
        _note_start(self)
        return original_start(self, *args, **kwargs)

    cls.__init__ = __init__
    cls.start_trace = start_trace
