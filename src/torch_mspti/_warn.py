"""Warnings that point at the user's code, not at the import machinery.

torch-mspti's import-time warnings are raised deep inside ``import torch`` (torch's backend
autoload -> importlib -> ``torch_mspti/__init__``); a fixed ``stacklevel`` lands on an importlib or
torch frame. :func:`warn` attributes the warning to the first frame outside importlib, torch,
torch_mspti and its autoload hook: the user's ``import`` line. Thread-safe (reads the caller's
stack only).
"""

from __future__ import annotations

import os
import sys
import warnings

_HERE = os.path.dirname(os.path.abspath(__file__))
_INTERNAL_DIRS = tuple(
    d + os.sep
    for d in (
        _HERE,  # torch_mspti
        os.path.join(os.path.dirname(_HERE), "_torch_mspti_autoload"),
        os.path.dirname(os.path.abspath(warnings.__file__)) + os.sep + "importlib",
    )
)


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


def _bootstrap(filename: str) -> bool:
    return "importlib" in filename and "_bootstrap" in filename


def _internal(filename: str) -> bool:
    if filename.startswith(("<frozen importlib", "<frozen zipimport")):
        return True
    path = os.path.abspath(filename)
    torch_dir = _torch_dir()
    return path.startswith(_INTERNAL_DIRS) or (torch_dir is not None and path.startswith(torch_dir))


def _stacklevel() -> int:
    """How many frames above the caller of :func:`warn` the first frame outside importlib, torch
    and torch_mspti is (1: that caller itself); the outermost frame when all are internal."""
    frame = sys._getframe(2)  # the caller of warn()
    level = 1
    while frame.f_back is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
        # warnings.warn itself skips importlib's bootstrap frames without counting them.
        if not _bootstrap(frame.f_code.co_filename):
            level += 1
    return level


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the user's frame (see the module doc)."""
    warnings.warn(message, category, stacklevel=_stacklevel() + 1)
