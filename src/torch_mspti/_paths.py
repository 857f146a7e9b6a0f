"""Where the files shipped in the wheel are."""

from __future__ import annotations

import os
from pathlib import Path

_LIB_DIR = Path(__file__).resolve().parent / "lib"


# Simulated MSPTI per generation (mspti.md 8): generation -> file in torch_mspti/lib.
SIMULATOR_GENERATIONS: dict[str, str] = {
    "8.0.RC3": "libmspti_sim_8_0_rc3.so",
    "8.1": "libmspti_sim_8_1.so",
    "8.2": "libmspti_sim_8_2.so",
    "26.0": "libmspti_sim_26_0.so",
    "26.1": "libmspti_sim.so",
}
DEFAULT_SIMULATOR_GENERATION = "26.1"


def _normalise_generation(generation: str | int) -> str:
    """ "8.0.rc3", "8.0", 80, "8.1", 81, "26.0", 260, ... -> a key of SIMULATOR_GENERATIONS."""
    text = str(generation).strip().upper()
    aliases = {"80": "8.0.RC3", "8.0": "8.0.RC3", "81": "8.1", "82": "8.2", "260": "26.0", "261": "26.1"}
    text = aliases.get(text, text)
    if text not in SIMULATOR_GENERATIONS:
        raise ValueError(
            f"unknown MSPTI generation {generation!r}; available: "
            f"{', '.join(simulator_generations()) or 'none (reinstall torch-mspti)'}"
        )
    return text


def simulator_generations() -> list[str]:
    """The MSPTI generations whose simulator library is installed, oldest first (e.g.
    ``["8.0.RC3", "8.1", "8.2", "26.0", "26.1"]``); each is a valid ``simulator_library()``
    argument. Looks only at files, loads nothing."""
    return [g for g, name in SIMULATOR_GENERATIONS.items() if (_simulator_dir() / name).is_file()]


def _simulator_dir() -> Path:
    override = os.environ.get("TORCH_MSPTI_SIM_LIBRARY")
    return Path(override).resolve().parent if override else _LIB_DIR


def simulator_library(generation: str | int | None = None) -> str:
    """Absolute path of a simulated MSPTI in ``torch_mspti/lib``.

    ``generation=None`` is the default simulator, ``libmspti_sim.so`` (the 26.1 generation);
    ``TORCH_MSPTI_SIM_LIBRARY`` overrides it (development builds). Otherwise one of "8.0.RC3",
    "8.1", "8.2", "26.0" or "26.1" (also 80, 81, 82, 260, 261; ``torch_mspti.simulator_generations()``
    lists the installed ones), whose library exports exactly that generation's MSPTI symbols and
    accepts its activity kinds (see README "MSPTI versions"); with ``TORCH_MSPTI_SIM_LIBRARY`` set
    it is looked up in that file's directory. The library search never finds these files by
    itself: they are used only when passed explicitly (``use_library``, ``TORCH_MSPTI_LIBRARY`` or
    ``torch_mspti.sim.enable()``, which honours either choice). Raises FileNotFoundError when the
    file is missing (a broken install) and ValueError for an unknown generation.
    """
    override = os.environ.get("TORCH_MSPTI_SIM_LIBRARY")
    if generation is None:
        path = Path(override).resolve() if override else _LIB_DIR / "libmspti_sim.so"
    else:
        path = _simulator_dir() / SIMULATOR_GENERATIONS[_normalise_generation(generation)]
    if not path.is_file():
        raise FileNotFoundError(f"simulated MSPTI not found at {path}: reinstall torch-mspti")
    return str(path)


def simulator_generation_of(path: str | os.PathLike[str]) -> str | None:
    """The generation of the simulated MSPTI at ``path`` (a key of SIMULATOR_GENERATIONS), or None
    when ``path`` is not one of torch-mspti's simulator libraries. Compares resolved paths (the
    files of ``torch_mspti/lib``, or of ``TORCH_MSPTI_SIM_LIBRARY``'s directory, whose own file is
    the default generation); never loads anything."""
    try:
        target = Path(path).resolve()
    except (OSError, RuntimeError, TypeError, ValueError):
        return None
    override = os.environ.get("TORCH_MSPTI_SIM_LIBRARY")
    if override and Path(override).resolve() == target:
        return DEFAULT_SIMULATOR_GENERATION
    for generation, name in SIMULATOR_GENERATIONS.items():
        if (_simulator_dir() / name).resolve() == target:
            return generation
    return None


def npu_device_library() -> str:
    """Absolute path of the simulated NPU device backend (``torch_mspti/lib``)."""
    override = os.environ.get("TORCH_MSPTI_NPU_SIM_LIBRARY")
    path = Path(override).resolve() if override else _LIB_DIR / "libtorch_mspti_npu_sim.so"
    if not path.is_file():
        raise FileNotFoundError(f"simulated NPU device library not found at {path}: reinstall torch-mspti")
    return str(path)
