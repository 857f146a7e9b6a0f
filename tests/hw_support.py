"""The hardware test tier: which xdist worker uses which Ascend device, and whether the hardware
and CANN's libmspti.so are present. Pure functions (no torch, no torch_npu import), used by
conftest.py and unit-tested in test_hardware_tier.py.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
from collections.abc import Mapping, MutableMapping, Sequence

DEVICES_ENV = "TORCH_MSPTI_TEST_DEVICES"
VISIBLE_ENV = "ASCEND_RT_VISIBLE_DEVICES"

# CANN roots the plugin itself searches (README "Where libmspti.so is looked for").
_DEFAULT_ROOTS = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")
_VERSIONED_ROOTS = "/usr/local/Ascend/cann-*"
_LIB_SUBDIRS = ("lib64", "tools/mspti/lib64")


def parse_devices(devices: str | Sequence[str]) -> list[str]:
    """``"0,1, 2"`` or ``["0", "1", "2"]`` -> ``["0", "1", "2"]``; each must be a device number."""
    items = devices.split(",") if isinstance(devices, str) else list(devices)
    parsed = [str(item).strip() for item in items if str(item).strip()]
    if not parsed:
        raise ValueError(f"{DEVICES_ENV}: no device listed in {devices!r}")
    bad = [item for item in parsed if not item.isdigit()]
    if bad:
        raise ValueError(f"{DEVICES_ENV}: not device numbers: {', '.join(bad)} (expected e.g. 0,1,2,3)")
    return parsed


def worker_index(worker_id: str) -> int:
    """``"gw3"`` -> 3 (pytest-xdist worker ids)."""
    match = re.fullmatch(r"gw(\d+)", worker_id.strip())
    if match is None:
        raise ValueError(f"not a pytest-xdist worker id: {worker_id!r} (expected gw0, gw1, ...)")
    return int(match.group(1))


def pin_device(worker_id: str, devices: str | Sequence[str]) -> str:
    """The device an xdist worker owns: ``devices[index % len(devices)]``.

    More workers than devices share devices round-robin (gw4 gets the first device again).
    """
    listed = parse_devices(devices)
    return listed[worker_index(worker_id) % len(listed)]


def pin_worker_from_env(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """In an xdist worker with ``TORCH_MSPTI_TEST_DEVICES`` set, export ``ASCEND_RT_VISIBLE_DEVICES``
    for that worker into ``environ`` and return it; otherwise change nothing and return None.

    Must run before any NPU runtime starts in the process (the runtime reads the variable once).
    """
    worker = environ.get("PYTEST_XDIST_WORKER")
    devices = environ.get(DEVICES_ENV)
    if not worker or not devices:
        return None
    device = pin_device(worker, devices)
    environ[VISIBLE_ENV] = device
    return device


def npu_status(
    environ: Mapping[str, str] = os.environ,
    *,
    has_module=lambda name: importlib.util.find_spec(name) is not None,
    which=shutil.which,
    dev_glob: str = "/dev/davinci[0-9]*",
) -> tuple[bool, str]:
    """Whether ``npu`` tests can run: torch_npu installed (found, never imported), an Ascend
    device (``npu-smi`` on PATH or ``/dev/davinciN``) and CANN. Returns (ok, reason)."""
    missing = []
    if not has_module("torch_npu"):
        missing.append("torch_npu is not installed")
    if which("npu-smi") is None and not glob.glob(dev_glob):
        missing.append("no Ascend device (no npu-smi on PATH, no /dev/davinci*)")
    if cann_root(environ) is None:
        missing.append("no CANN (ASCEND_HOME_PATH unset and no /usr/local/Ascend root)")
    if missing:
        return False, "needs Ascend hardware: " + "; ".join(missing)
    return True, "torch_npu, an Ascend device and CANN found"


def cann_root(environ: Mapping[str, str] = os.environ) -> str | None:
    """The first existing CANN root: $ASCEND_HOME_PATH, $ASCEND_TOOLKIT_HOME, then the defaults."""
    roots = [environ.get("ASCEND_HOME_PATH"), environ.get("ASCEND_TOOLKIT_HOME"), *_DEFAULT_ROOTS]
    roots += sorted(glob.glob(_VERSIONED_ROOTS), reverse=True)
    return next((root for root in roots if root and os.path.isdir(root)), None)


def find_real_libmspti(environ: Mapping[str, str] = os.environ) -> str | None:
    """Path of a real (CANN) libmspti.so, by file lookup only: loading it in the test process
    could terminate it (libmspti's initialiser needs libprofapi). The simulator does not count."""
    candidates = []
    explicit = environ.get("TORCH_MSPTI_LIBRARY")
    if explicit and "mspti_sim" not in os.path.basename(explicit):
        candidates.append(explicit)
    roots = [environ.get("ASCEND_HOME_PATH"), environ.get("ASCEND_TOOLKIT_HOME"), *_DEFAULT_ROOTS]
    roots += sorted(glob.glob(_VERSIONED_ROOTS), reverse=True)
    for root in filter(None, roots):
        candidates += [os.path.join(root, sub, "libmspti.so") for sub in _LIB_SUBDIRS]
    for entry in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if os.path.isabs(entry):
            candidates.append(os.path.join(entry, "libmspti.so"))
    return next((path for path in candidates if os.path.isfile(path)), None)


def cann_status(environ: Mapping[str, str] = os.environ) -> tuple[bool, str]:
    """Whether ``cann`` tests can run (a real libmspti.so exists). Returns (ok, reason)."""
    path = find_real_libmspti(environ)
    if path is None:
        where = "ASCEND_HOME_PATH, /usr/local/Ascend or LD_LIBRARY_PATH"
        return False, f"needs a real libmspti.so (CANN): none under {where}"
    return True, f"libmspti.so at {path}"
