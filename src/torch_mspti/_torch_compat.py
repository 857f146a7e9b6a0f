"""What the plugin does about the torch minor it runs under, on the Python side.

The C++ side adapts at compile time (``src/core/TorchCompat.h``; ``_C.torch_build()`` says what
it found). One difference needs run-time help:

* **``ProfilerActivity.PrivateUse1`` missing from ``_supported_activities()``.** In the CUDA
  (CUPTI) builds of older torch (seen on PyPI's x86_64 torch 2.7.1+cu126), torch's C++
  ``_supported_activities`` adds PrivateUse1 only in the branch compiled without CUPTI, so even
  with a PrivateUse1 backend named, ``torch.profiler.profile(activities=[..., PrivateUse1])``
  falls back to the legacy PrivateUse1 stubs: every op then logs "PrivateUse1 used in profiler
  but not enabled" and no device activity is recorded. CPU builds (PyPI's aarch64 wheels, the
  ``+cpu`` wheels torch_npu pairs with) and torch 2.13/2.14 list it. :func:`install` wraps the two
  Python names torch's profiler reads so that a named PrivateUse1 backend is listed whenever
  kineto is available; where torch lists it already the wrapper changes nothing. Whether it had to
  add the activity is in ``diagnostics().torch["privateuse1_activity_added"]`` (docs/kineto.md 7).

Thread-safety: :func:`install` runs once, at import of torch_mspti; the wrapper is reentrant.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

_lock = threading.Lock()
_installed = False
_added = False  # the wrapper once listed PrivateUse1 that torch itself did not


def _backend_named() -> bool:
    return torch._C._get_privateuse1_backend_name() != "privateuseone"


def install() -> None:
    """Wrap ``torch.autograd._supported_activities`` (and the name ``torch.autograd.profiler``
    imported) so that a named PrivateUse1 backend is always a supported activity. Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        import torch.autograd as autograd
        import torch.autograd.profiler as autograd_profiler

        original = autograd_profiler._supported_activities
        if not torch._C._autograd.kineto_available():
            return
        activity = torch.profiler.ProfilerActivity.PrivateUse1

        def _supported_activities() -> set[Any]:
            global _added
            activities = set(original())
            if activity not in activities and _backend_named():
                activities.add(activity)
                _added = True
            return activities

        _supported_activities.__doc__ = original.__doc__
        autograd_profiler._supported_activities = _supported_activities
        autograd._supported_activities = _supported_activities


def report() -> dict[str, Any]:
    """The ``diagnostics().torch`` block: the build's torch facts (``_C.torch_build()``), the
    running torch version, and whether torch-mspti had to list the PrivateUse1 activity."""
    from . import _C, _torch_support

    facts = dict(_C.torch_build())
    facts["running"] = str(torch.__version__)
    facts["privateuse1_activity_added"] = _added
    row = _torch_support.row_for(facts["running"])
    facts["support"] = row.to_dict() if row is not None else None
    return facts
