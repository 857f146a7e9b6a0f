"""torch-mspti: NPU kernels in ``torch.profiler`` through Ascend MSPTI.

Importing this package (``import torch`` does it for you through the ``torch.backends`` entry
point) registers a libkineto PrivateUse1 activity profiler. With torch_npu (or the simulator,
``torch_mspti.sim.enable()``) naming the PrivateUse1 backend, ``torch.profiler.profile(
activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])`` then records the NPU kernels,
links them to the ops that launched them and gives those ops device time.

libmspti.so is found and loaded lazily, when the first device profiling session starts (or when
``diagnostics()`` / ``torch-mspti doctor`` asks). A missing library gives a CPU-only trace, one
warning, and a reason in ``diagnostics()``.

Environment: the ``TORCH_MSPTI_<SETTING>`` variables of :data:`config` (``TORCH_MSPTI_PROFILER``
decides registration, ``TORCH_MSPTI_LIBRARY`` an explicit libmspti path); bad values are reported
by one warning at import and by :func:`config.environment_errors`.
"""

from __future__ import annotations

import os as _os

import torch as _torch  # libtorch_cpu must be loaded before the extension

from . import _torch_version

try:
    from . import _build_info
except ImportError as _exc:  # a source checkout without a build
    raise ImportError(
        "torch_mspti is not built: install it with `pip install --no-build-isolation .` (see README.md)"
    ) from _exc

_torch_version.check_torch_version(_build_info.TORCH_VERSION, _torch.__version__)

import atexit as _atexit  # noqa: E402

from . import _C, _communicators, _device_properties, _profile_request, _torch_compat, _warn  # noqa: E402
from ._paths import simulator_generations, simulator_library  # noqa: E402
from .config import config  # noqa: E402
from .diagnostics import Diagnostics, diagnostics, findings, link_states  # noqa: E402

__version__ = _C.__version__

__all__ = [
    "config",
    "diagnostics",
    "Diagnostics",
    "findings",
    "link_states",
    "use_library",
    "simulator_library",
    "simulator_generations",
    "registration_message",
]


def use_library(path: str | _os.PathLike[str]) -> None:
    """Use the MSPTI library at ``path`` (absolute after resolution) from the next session on.

    Equivalent to ``config.library_path = path``. Raises RuntimeError when a different library
    is already loaded (a loaded MSPTI stays for the life of the process), TypeError for a
    non-path argument. Thread-safe.
    """
    if not isinstance(path, (str, _os.PathLike)):
        raise TypeError(f"library_path: expected a str or os.PathLike, got {path!r}")
    config.library_path = _os.path.abspath(_os.fspath(path))


def __getattr__(name: str):
    # `torch_mspti.sim` without a separate `import torch_mspti.sim` (PEP 562). The simulator is
    # opt-in: importing it changes nothing until torch_mspti.sim.enable() is called.
    if name == "sim":
        import importlib

        return importlib.import_module(".sim", __name__)
    raise AttributeError(f"module 'torch_mspti' has no attribute {name!r}")


def _warn_environment_errors() -> None:
    # Bad TORCH_MSPTI_* values are ignored (the default is kept), unknown names too: say so once,
    # at import, attributed to the user's import line.
    errors = config.environment_errors()
    if errors:
        _warn.warn("torch-mspti: " + "; ".join(errors), RuntimeWarning)


def _announce() -> None:
    # Said once per process: a warning when another PrivateUse1 profiler is involved (ours
    # replaced it, it keeps serving, or torch_npu's built-in backend is loaded), otherwise an INFO
    # log record.
    report = _C.plugin_report()
    if report["other_factory"] or report["other_profiler"]:
        _warn.warn(registration_message)
    else:
        import logging

        logging.getLogger("torch_mspti").info(registration_message)


_warn_environment_errors()
#: One line saying which profiler serves PrivateUse1 traces in this process.
registration_message: str = _C.register_profiler()
_announce()
_C.set_device_properties_provider(_device_properties.describe)
_C.set_communicator_provider(_communicators.describe)
_torch_compat.install()
_profile_request.install()
_atexit.register(_C.note_process_exit)
