"""Where the files shipped in the wheel are."""

from __future__ import annotations

import os
from pathlib import Path

_LIB_DIR = Path(__file__).resolve().parent / "lib"


def simulator_library() -> str:
    """Absolute path of the simulated MSPTI, ``torch_mspti/lib/libmspti_sim.so``.

    ``TORCH_MSPTI_SIM_LIBRARY`` overrides it (development builds). The library search never
    finds this file by itself: it is used only when passed explicitly (``use_library``,
    ``TORCH_MSPTI_LIBRARY`` or ``torch_mspti.sim.enable()``). Raises FileNotFoundError when the
    file is missing (a broken install).
    """
    override = os.environ.get("TORCH_MSPTI_SIM_LIBRARY")
    path = Path(override).resolve() if override else _LIB_DIR / "libmspti_sim.so"
    if not path.is_file():
        raise FileNotFoundError(f"simulated MSPTI not found at {path}: reinstall torch-mspti")
    return str(path)


def npu_device_library() -> str:
    """Absolute path of the simulated NPU device backend (``torch_mspti/lib``)."""
    override = os.environ.get("TORCH_MSPTI_NPU_SIM_LIBRARY")
    path = Path(override).resolve() if override else _LIB_DIR / "libtorch_mspti_npu_sim.so"
    if not path.is_file():
        raise FileNotFoundError(f"simulated NPU device library not found at {path}: reinstall torch-mspti")
    return str(path)
