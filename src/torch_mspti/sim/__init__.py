"""A simulated Ascend NPU, so that unmodified NPU profiling scripts run on any machine.

Opt-in only: nothing here runs until :func:`enable` is called. ``enable()`` names the PrivateUse1
backend ``npu``, loads the simulated device (``libtorch_mspti_npu_sim.so``: host memory, a native
op set plus a CPU fallback for every other op), registers ``torch.npu`` and points the profiler
plugin at the simulated MSPTI library (``libmspti_sim.so``, or the simulator generation chosen with
``TORCH_MSPTI_LIBRARY`` / ``torch_mspti.use_library``), on whose real-time device timeline every op
execution launches its kernels.

Launch modes, as torch_npu has them:

* ``"queued"`` (default): an op enqueues its launch and returns; a worker thread launches it a
  little later, as torch_npu's task queue does (``TASK_QUEUE_ENABLE=1`` is torch_npu's default).
  As with torch_npu, ``TASK_QUEUE_ENABLE=0`` in the environment makes ``"direct"`` the default.
  MSPTI then tags the launch with whatever op is current when the worker launches, which is the
  case the profiler has to handle on real hardware, so it is the default here too.
* ``"direct"``: the op launches on its own thread, inside the op (``TASK_QUEUE_ENABLE=0``).

Real MSPTI (``cann_root``, or ``TORCH_MSPTI_SIM_CANN_ROOT``): the plugin reads Huawei's real
``libmspti.so`` of a CANN root laid out by the real-MSPTI test fixture's ``make_root.sh DIR``, which
runs over a fake CANN layer (``libfakecann.so``). Every kernel launch of the simulated device is also
reported to that layer, on the thread that launches it, and mstx calls go to its mstx front end. The
layer has one device and models kernel launches and mstx markers only: copies, memsets, collectives,
memory records and the other runtime calls still run on the simulator's timeline but produce no
MSPTI records in this mode.

Renaming PrivateUse1 is irreversible for the process; tests do it in a subprocess.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import warnings
from typing import Any

from torch_mspti import _paths

__all__ = [
    "enable",
    "is_enabled",
    "settings",
    "device_library",
    "simulator_library",
    "simulator_stats",
    "device_counters",
    "LAUNCH_MODES",
    "LIMITS",
    "CANN_ROOT_FILES",
]

LAUNCH_MODES = ("queued", "direct")

_lock = threading.Lock()
_settings: dict[str, Any] | None = None
_settings_public: dict[str, Any] = {}


def device_library() -> str:
    """Absolute path of the simulated NPU device library (``torch_mspti/lib``; the environment
    variable ``TORCH_MSPTI_NPU_SIM_LIBRARY`` overrides it). Raises FileNotFoundError naming the
    path when the file is missing (a broken install)."""
    return _paths.npu_device_library()


def simulator_library() -> str:
    """Absolute path of the default simulated MSPTI (``torch_mspti.simulator_library()``; the
    environment variable ``TORCH_MSPTI_SIM_LIBRARY`` overrides it). Raises FileNotFoundError naming
    the path when the file is missing."""
    return _paths.simulator_library()


def _refuse(reason: str) -> None:
    raise RuntimeError(f"torch_mspti.sim.enable(): {reason}")


def _check_preconditions(torch) -> None:
    if "torch_npu" in sys.modules:
        _refuse(
            "torch_npu is imported in this process, so the real Ascend NPU backend owns 'npu'. "
            "The simulated NPU is for machines without torch_npu; run it in a process that does "
            "not import torch_npu (or use the real device: torch-mspti demo --device real)."
        )
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "npu"):
        _refuse(
            f"the PrivateUse1 backend is already named {name!r} in this process; the simulated "
            "NPU needs it to be 'npu'. Enable the simulator in a fresh process."
        )
    if name == "npu" and _settings is None and hasattr(torch, "npu"):
        _refuse(
            "the PrivateUse1 backend is already named 'npu' and torch.npu is provided by another "
            f"module ({getattr(torch.npu, '__name__', '?')}); refusing to replace it."
        )


# Allowed ranges of enable()'s numeric arguments, inclusive. The upper bounds keep every derived
# duration within int64 nanoseconds and below 1000 s, so that no simulated kernel or queue delay
# can stall synchronize() for good.
LIMITS: dict[str, tuple[float, float]] = {
    "device_count": (1, 16),
    "duration_scale": (0.0, 1e6),
    "min_duration_ns": (0, 10**12),
    "fixed_duration_ns": (0, 10**12),
    "queue_pickup_us": (0.0, 1e9),
    "housekeeping_every": (0, 2**31 - 1),
}
_FLOATS = ("duration_scale", "queue_pickup_us")


def _validated(args: dict[str, Any]) -> dict[str, Any]:
    """enable()'s arguments, type- and range-checked: TypeError for a wrong type, ValueError for a
    value outside LIMITS (both name the argument, the value and the allowed range)."""
    out: dict[str, Any] = {}
    for name, value in args.items():
        if name == "launch_mode":
            if value not in LAUNCH_MODES:
                raise ValueError(f"launch_mode must be one of {LAUNCH_MODES}, got {value!r}")
            out[name] = value
            continue
        low, high = LIMITS[name]
        is_float = name in _FLOATS
        allowed = f"{'a number' if is_float else 'an int'} in [{low:_}, {high:_}]"
        ok_type = isinstance(value, (int, float)) if is_float else isinstance(value, int)
        if isinstance(value, bool) or not ok_type:
            raise TypeError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")
        if not (low <= value <= high):  # also False for nan
            raise ValueError(f"{name} must be {allowed}, got {value!r}")
        out[name] = float(value) if is_float else int(value)
    return out


def _plugin_library_choice() -> tuple[str | None, str]:
    """(the MSPTI library the plugin will use, how it was chosen): the library already loaded,
    else an explicit ``library_path`` (``TORCH_MSPTI_LIBRARY`` or ``torch_mspti.use_library``),
    else (None, "")."""
    from torch_mspti import _C
    from torch_mspti.config import config

    loaded = _C.library_report(False)
    if loaded.get("available") and loaded.get("path"):
        return loaded["path"], f"already loaded by the plugin in this process (found by {loaded.get('found_by')})"
    chosen = config.library_path
    if not chosen:
        return None, ""
    env = os.environ.get("TORCH_MSPTI_LIBRARY")
    how = "TORCH_MSPTI_LIBRARY" if env and os.path.abspath(env) == chosen else "torch_mspti.use_library()"
    return chosen, f"chosen with {how}"


def _simulator_for_plugin() -> str:
    """The simulated MSPTI that both the device and the plugin will use: the plugin's explicit
    choice when it is one of torch-mspti's simulator libraries, else the default simulator.
    Refuses (RuntimeError) when the plugin is set to, or already has loaded, another library."""
    chosen, how = _plugin_library_choice()
    if chosen is None:
        late = os.environ.get("TORCH_MSPTI_LIBRARY")
        if late:
            # Settings are read at import: a variable set afterwards chooses nothing.
            warnings.warn(
                f"torch_mspti.sim.enable(): TORCH_MSPTI_LIBRARY={late!r} was set after torch_mspti was imported "
                "and is ignored (settings are read at import); the default simulator is used. Fix: call "
                f"torch_mspti.use_library({late!r}) before sim.enable(), or set the variable before the import",
                RuntimeWarning,
                stacklevel=3,
            )
        return simulator_library()
    if _paths.simulator_generation_of(chosen) is not None:
        return chosen
    generations = ", ".join(_paths.simulator_generations()) or "none installed"
    fix = (
        "enable the simulator in a fresh process"
        if how.startswith("already loaded")
        else "unset TORCH_MSPTI_LIBRARY, or choose a simulator: "
        "torch_mspti.use_library(torch_mspti.simulator_library()) (the default generation; an older one such as "
        "simulator_library('8.1') also needs itself in LD_PRELOAD from process start); for a real libmspti.so in a fake CANN "
        "root (the realmspti fixture's make_root.sh), set TORCH_MSPTI_SIM_CANN_ROOT=ROOT instead of "
        "TORCH_MSPTI_LIBRARY, or call torch_mspti.sim.enable(cann_root=ROOT)"
    )
    if not os.path.exists(chosen):
        _refuse(
            f"the profiler plugin's MSPTI library {chosen} ({how}) does not exist: no file at that path. "
            f"Fix: {fix} (simulator generations: {generations})."
        )
    _refuse(
        f"the profiler plugin's MSPTI library {chosen} ({how}) is not one of torch-mspti's "
        "simulated MSPTI libraries, but the simulated NPU launches its kernels through a simulator "
        f"that the plugin must read. Fix: {fix} (simulator generations: {generations})."
    )
    raise AssertionError("unreachable")


#: The files of a CANN root (relative to it) that the real-MSPTI mode needs: the real MSPTI and its
#: securec beside it, and the fake CANN layer under the names MSPTI dlopens.
CANN_ROOT_FILES = (
    "lib64/libmspti.so",
    "lib64/libc_sec.so",
    "lib64/libfakecann.so",
    "lib64/libprofapi.so",
    "lib64/libascend_hal.so",
    "lib64/libascendalog.so",
    "lib64/libascendcl.so",
)
_MAKE_ROOT = (
    "bash make_root.sh DIR (the script of the realmspti fixture, Huawei's real libmspti.so over a fake CANN "
    "driver; in this project's CI: bash ../shared/realmspti/make_root.sh DIR, README \"Huawei's real MSPTI without an NPU\")"
)


def _cann_root(cann_root: str | os.PathLike[str] | None) -> str | None:
    """The CANN root of the real-MSPTI mode, absolute: ``cann_root``, else the environment variable
    ``TORCH_MSPTI_SIM_CANN_ROOT``; None (the simulated MSPTI) when both are unset or empty.
    RuntimeError naming the first missing file and the command that makes the root."""
    if cann_root is None:
        cann_root = os.environ.get("TORCH_MSPTI_SIM_CANN_ROOT", "").strip() or None
    if cann_root is None or cann_root == "":
        return None
    if not isinstance(cann_root, (str, os.PathLike)):
        raise TypeError(f"cann_root must be a directory path (str), got {cann_root!r} ({type(cann_root).__name__})")
    root = os.path.abspath(os.fspath(cann_root))
    for rel in CANN_ROOT_FILES:
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            _refuse(f"the CANN root {root} has no {path}; lay the root out with {_MAKE_ROOT}")
    return root


def _real_mspti_for_plugin(root: str) -> str:
    """``<root>/lib64/libmspti.so``, the library the plugin reads in the real-MSPTI mode. Refuses
    (RuntimeError) when the plugin is set to, or already loaded, another library."""
    wanted = os.path.join(root, "lib64", "libmspti.so")
    chosen, how = _plugin_library_choice()
    if chosen is None or os.path.realpath(chosen) == os.path.realpath(wanted):
        return wanted
    fix = (
        "enable the simulated NPU with cann_root in a fresh process"
        if how.startswith("already loaded")
        else "unset TORCH_MSPTI_LIBRARY (or do not call torch_mspti.use_library) before sim.enable(cann_root=...)"
    )
    _refuse(
        f"the profiler plugin's MSPTI library {chosen} ({how}) is not the real MSPTI of the CANN root, "
        f"{wanted}, through which the simulated NPU reports its kernels in this mode. Fix: {fix}."
    )
    raise AssertionError("unreachable")


def enable(
    device_count: int | None = None,
    launch_mode: str | None = None,
    *,
    duration_scale: float = 1.0,
    min_duration_ns: int = 2000,
    fixed_duration_ns: int = 0,
    queue_pickup_us: float = 20.0,
    housekeeping_every: int = 64,
    cann_root: str | os.PathLike[str] | None = None,
) -> None:
    """Turn this process's PrivateUse1 backend into a simulated NPU named ``npu``.

    device_count: number of simulated devices (npu:0 ... npu:N-1), in [1, 16]; None (the default)
        gives 2, or 1 with ``cann_root``.
    launch_mode: ``"queued"`` (torch_npu's task queue) or ``"direct"``; None (the default) reads
        ``TASK_QUEUE_ENABLE`` as torch_npu does: ``"0"`` gives ``"direct"``, anything else
        (or unset) ``"queued"``.
    duration_scale / min_duration_ns: a kernel lasts max(measured host compute time * scale,
        min_duration_ns); fixed_duration_ns > 0 gives every kernel that duration instead.
    queue_pickup_us: queued mode, delay between an op's enqueue and the worker's launch.
    housekeeping_every: every Nth allocation on a device launches a housekeeping kernel from a
        thread that runs no op (0 disables all but the first one per device).
    Ranges: :data:`LIMITS` (durations in ns, pickup in us, all >= 0).
    cann_root: a CANN root laid out by the real-MSPTI fixture's ``make_root.sh DIR`` (its files:
        :data:`CANN_ROOT_FILES`); None reads ``TORCH_MSPTI_SIM_CANN_ROOT``, and unset or empty
        keeps the simulated MSPTI. With a root, the plugin reads ``<root>/lib64/libmspti.so``
        (Huawei's real MSPTI; ``ASCEND_HOME_PATH`` is set to the root, where it finds its CANN
        libraries), and every kernel launch is also reported to the root's fake CANN layer on the
        launching thread, which hands it to that MSPTI; ``torch.npu.mstx`` calls the layer's mstx
        front end. The layer has one device, so device_count must be 1 (ValueError otherwise), and
        models kernels and mstx markers only: copies, memsets, collectives, memory records and
        other runtime calls run on the simulator's timeline but produce no MSPTI records.

    The MSPTI simulator is the one the plugin was pointed at, when that is a simulator library
    (``TORCH_MSPTI_LIBRARY=<torch_mspti.simulator_library('8.0.RC3')>`` or
    ``torch_mspti.use_library(...)`` before ``enable()``), else the default (26.1) simulator.

    Raises TypeError (wrong type) or ValueError (out of range) naming the argument, the value and
    the range; RuntimeError when the process cannot host the simulated NPU (torch_npu imported,
    PrivateUse1 named otherwise, the plugin set to a library that is not a simulator, missing
    files, a CANN root without one of its files). Everything that can fail runs before the irreversible rename of PrivateUse1, so a
    failed call leaves the backend name unchanged. Calling it again with the same settings does
    nothing; other settings raise RuntimeError. Thread-safe.
    """
    global _settings
    root = _cann_root(cann_root)
    if device_count is None:
        device_count = 1 if root else 2
    elif root and device_count != 1:
        raise ValueError(
            f"device_count must be 1 with cann_root (the fake CANN layer under the real MSPTI has one device), "
            f"got {device_count!r}"
        )
    if launch_mode is None:
        launch_mode = "direct" if os.environ.get("TASK_QUEUE_ENABLE", "").strip() == "0" else "queued"
    wanted = _validated(
        {
            "device_count": device_count,
            "launch_mode": launch_mode,
            "duration_scale": duration_scale,
            "min_duration_ns": min_duration_ns,
            "fixed_duration_ns": fixed_duration_ns,
            "queue_pickup_us": queue_pickup_us,
            "housekeeping_every": housekeeping_every,
        }
    )
    wanted["cann_root"] = root
    import torch

    from torch_mspti import _C
    from torch_mspti.config import config

    with _lock:
        if _settings is not None:
            if _settings == wanted:
                return
            _refuse(
                f"the simulated NPU is already enabled with {_settings}; it cannot be "
                f"re-enabled with {wanted} in the same process."
            )
        _check_preconditions(torch)
        try:
            dev_lib = device_library()
            # The real-MSPTI mode keeps the default simulator for the device's timeline only.
            sim_lib = simulator_library() if root else _simulator_for_plugin()
        except FileNotFoundError as exc:
            _refuse(str(exc))
        if not os.path.exists(sim_lib):
            _refuse(f"MSPTI simulator not found at {sim_lib}; is torch-mspti installed with its lib/ directory?")
        plugin_lib = _real_mspti_for_plugin(root) if root else sim_lib

        previous = config.library_path
        previous_home = os.environ.get("ASCEND_HOME_PATH")
        if root:
            os.environ["ASCEND_HOME_PATH"] = root  # MSPTI dlopens its CANN libraries from $ASCEND_HOME_PATH/lib64
        # as torch_mspti.use_library (absolute path): RuntimeError if the plugin already loaded another library
        config.library_path = plugin_lib
        try:
            torch.ops.load_library(dev_lib)
            torch.ops.npu_sim.configure(
                sim_lib,
                wanted["device_count"],
                launch_mode,
                wanted["duration_scale"],
                wanted["min_duration_ns"],
                wanted["fixed_duration_ns"],
                int(wanted["queue_pickup_us"] * 1000),
                wanted["housekeeping_every"],
            )
            if root:
                torch.ops.npu_sim.bind_cann(root)
        except Exception as exc:
            if not _C.library_report(False).get("available"):
                config.library_path = previous
                if root and previous_home is None:
                    os.environ.pop("ASCEND_HOME_PATH", None)
                elif root:
                    os.environ["ASCEND_HOME_PATH"] = previous_home
            raise RuntimeError(f"torch_mspti.sim.enable(): cannot load the simulated NPU: {exc}") from exc
        # The point of no return: nothing above renamed anything.
        torch.utils.rename_privateuse1_backend("npu")
        from . import mstx as _mstx
        from . import npu as _npu_module

        # torch.npu.mstx calls the mstx entry points of this simulator, or of the fake CANN layer
        _mstx._bind(os.path.join(root, "lib64", "libprofapi.so") if root else sim_lib, cann=bool(root))

        torch._register_device_module("npu", _npu_module)
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
        from . import hccl as _hccl

        _hccl.register()  # torch.distributed backend "hccl" for npu tensors
        from . import inductor as _inductor

        _inductor.install()  # torch.compile (inductor) for npu graphs, once inductor is imported
        from . import fsdp as _fsdp

        _fsdp.install()  # FSDP2's copy ops for npu tensors on torch 2.7
        _settings_public.update(
            wanted,
            device_library=dev_lib,
            simulator_library=sim_lib,
            mspti="real" if root else "simulated",
            mspti_library=plugin_lib,
        )
        _settings = wanted


def is_enabled() -> bool:
    """True once :func:`enable` succeeded in this process."""
    return _settings is not None


def settings() -> dict[str, Any]:
    """The settings :func:`enable` applied, with the library paths (empty when not enabled):
    enable()'s arguments (``cann_root`` None or the absolute root), ``device_library``,
    ``simulator_library`` (the device's timeline), ``mspti`` (``"simulated"``, or ``"real"`` with a
    CANN root) and ``mspti_library`` (the library the plugin reads)."""
    return dict(_settings_public)


class _SimStats(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_uint64)
        for n in (
            "kernels_launched",
            "kernel_records",
            "external_records",
            "api_records",
            "records_dropped",
            "records_pending",
            "buffers_requested",
            "buffers_declined",
            "buffers_completed",
            "external_stack_depth",
        )
    ]


def simulator_stats() -> dict[str, int]:
    """msptiSimGetStats() of the in-process simulator, as a dict."""
    path = _settings_public.get("simulator_library") or simulator_library()
    lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))  # same handle as the device's dlopen
    out = _SimStats()
    lib.msptiSimGetStats(ctypes.byref(out))
    return {name: int(getattr(out, name)) for name, _ in _SimStats._fields_}


def device_counters() -> dict[str, int]:
    """Counters of the simulated device: ops, launches, kernels, housekeeping, queued_max_depth."""
    if not is_enabled():
        return {}
    import torch

    values = torch.ops.npu_sim.counters()
    keys = ("ops", "launches", "kernels", "housekeeping", "queued_max_depth")
    return dict(zip(keys, (int(v) for v in values), strict=True))
