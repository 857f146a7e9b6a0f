"""The ``torch.backends`` entry point: ``import torch`` loads torch_mspti through this.

torch calls every ``torch.backends`` entry point at the end of its own ``__init__`` (unless
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``) and turns any exception into a failing ``import torch``
for the whole environment. Hence the rules here:

* a top-level module, deliberately *outside* the torch_mspti package: torch resolves the entry
  point with ``import_module`` before calling it, and importing any ``torch_mspti.<sub>``
  first runs ``torch_mspti/__init__.py`` outside this function's ``try``, so a broken
  extension or a wrong torch minor would fail ``import torch`` and ``TORCH_MSPTI_DISABLE``
  could not prevent it. Here the package import happens inside the ``try``;
* never raise: any failure becomes one warning that names the problem and the switch;
* ``TORCH_MSPTI_DISABLE=1`` returns before the package is imported;
* either import order works: with ``import torch_mspti`` first, the package ``__init__``
  imports torch, torch calls this hook, and ``import_module`` returns the half-initialised
  package from ``sys.modules`` instead of re-entering it;
* import nothing but the standard library: not torch (being imported), not torch_npu (entry
  point order is undefined, and the plugin does not need it until a profile starts), and leave
  ``TORCH_DEVICE_BACKEND_AUTOLOAD`` alone (setting it would stop torch_npu's autoload too).
"""

from __future__ import annotations

import importlib
import os
import warnings

__all__ = ["autoload", "DISABLE_ENV"]

DISABLE_ENV = "TORCH_MSPTI_DISABLE"
_TRUE = frozenset({"1", "true", "yes", "on"})
_warned = False


def _disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() in _TRUE


def autoload() -> None:
    """Import torch_mspti (whose import registers the PrivateUse1 profiler); never raises."""
    global _warned
    try:
        if _disabled():
            return
        importlib.import_module("torch_mspti")
    except (Exception, SystemExit) as exc:
        if _warned:
            return
        _warned = True
        try:
            warnings.warn(
                f"torch-mspti: the profiler plugin was not loaded, so torch.profiler records no NPU "
                f"activity from it ({type(exc).__name__}: {str(exc).rstrip('.')}). "
                f"Set {DISABLE_ENV}=1 to stop loading it and silence this warning.",
                RuntimeWarning,
                stacklevel=2,
            )
        except Exception:
            pass
