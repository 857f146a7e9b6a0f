"""Where the files shipped in the wheel are.

CMake installs the shared libraries into ``torch_mspti/lib``. In a wheel install that is the folder
beside this file. In a development install (``pip install --no-build-isolation -ve .``, README
"Build"), scikit-build-core imports the Python files from the source tree (``src/torch_mspti``)
but installs what CMake builds (``_C``, ``lib/``) into ``site-packages/torch_mspti``, and its import
redirect makes the package's ``__path__`` hold both folders. So ``lib/`` is looked for in every
folder of the package's ``__path__``, in order, and beside this file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _lib_dirs() -> list[Path]:
    """The ``torch_mspti/lib`` folders to look in, in order, without duplicates: ``lib`` in each
    folder of the package's ``__path__`` (one in a wheel install; the install tree and the source
    tree in an editable install), then ``lib`` beside this file. They need not exist."""
    package = sys.modules.get(__package__ or "torch_mspti")
    roots = [Path(p) for p in (getattr(package, "__path__", None) or ())] + [_HERE]
    out: list[Path] = []
    for root in roots:
        try:
            lib = (root / "lib").resolve()
        except (OSError, RuntimeError):
            continue
        if lib not in out:
            out.append(lib)
    return out


def _lib_file(name: str) -> Path:
    """``name`` in the first of ``_lib_dirs()`` that has it (an absolute path), or in the first of
    them when none has it (for the message of a missing file). The folders are resolved, the file
    is not (a link stays a link)."""
    dirs = _lib_dirs()
    for d in dirs:
        if (d / name).is_file():
            return d / name
    return dirs[0] / name


def _missing(what: str, name: str) -> FileNotFoundError:
    looked = ", ".join(str(d) for d in _lib_dirs())
    return FileNotFoundError(
        f"{what} {name} not found in torch_mspti/lib (looked in {looked}): torch-mspti is installed "
        "without its libraries; reinstall it (from a source checkout: pip install --no-build-isolation "
        "--force-reinstall ., or pip install --no-build-isolation -ve . for a development install)"
    )


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
    return [g for g, name in SIMULATOR_GENERATIONS.items() if _simulator_file(name).is_file()]


def _simulator_file(name: str) -> Path:
    """``name`` (a file of SIMULATOR_GENERATIONS) in ``TORCH_MSPTI_SIM_LIBRARY``'s folder when that
    is set, else in torch_mspti/lib."""
    override = os.environ.get("TORCH_MSPTI_SIM_LIBRARY")
    return Path(override).resolve().parent / name if override else _lib_file(name)


def simulator_library(generation: str | int | None = None) -> str:
    """Absolute path of a simulated MSPTI in ``torch_mspti/lib`` (in an editable install, the one
    CMake installed into site-packages; see the module's docstring).

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
    if generation is None and override:
        path = Path(override).resolve()
        if not path.is_file():
            raise FileNotFoundError(
                f"simulated MSPTI not found at {path}: TORCH_MSPTI_SIM_LIBRARY names no file "
                "(unset it to use the installed simulator)"
            )
        return str(path)
    name = SIMULATOR_GENERATIONS[
        _normalise_generation(DEFAULT_SIMULATOR_GENERATION if generation is None else generation)
    ]
    path = _simulator_file(name)
    if not path.is_file():
        if override:
            raise FileNotFoundError(
                f"simulated MSPTI not found at {path}: TORCH_MSPTI_SIM_LIBRARY's folder has no {name}"
            )
        raise _missing("simulated MSPTI", name)
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
    folders = [Path(override).resolve().parent] if override else _lib_dirs()
    for generation, name in SIMULATOR_GENERATIONS.items():
        if any((d / name).resolve() == target for d in folders):
            return generation
    return None


def npu_device_library() -> str:
    """Absolute path of the simulated NPU device backend (``torch_mspti/lib``, found as
    ``simulator_library()`` finds its file); ``TORCH_MSPTI_NPU_SIM_LIBRARY`` overrides it. Raises
    FileNotFoundError when the file is missing."""
    override = os.environ.get("TORCH_MSPTI_NPU_SIM_LIBRARY")
    if override:
        path = Path(override).resolve()
        if not path.is_file():
            raise FileNotFoundError(
                f"simulated NPU device library not found at {path}: TORCH_MSPTI_NPU_SIM_LIBRARY names no "
                "file (unset it to use the installed one)"
            )
        return str(path)
    path = _lib_file("libtorch_mspti_npu_sim.so")
    if not path.is_file():
        raise _missing("simulated NPU device library", path.name)
    return str(path)
