"""Run a profiling workload on the simulated MSPTI in a fresh interpreter and collect the results.

Renaming PrivateUse1 and loading an MSPTI library are per process and cannot be undone, so each
scenario gets its own ``python`` child. The child

* imports torch and torch_mspti, optionally renames PrivateUse1 to ``npu`` and registers a minimal
  ``torch.npu`` module whose ``synchronize`` waits for the simulated device;
* points the plugin at an MSPTI library (the simulator through ``use_library`` or
  ``TORCH_MSPTI_LIBRARY``, an arbitrary ``TORCH_MSPTI_LIBRARY`` path, or nothing at all);
* applies simulator options (``msptiSimSetOption``) and plugin settings (``torch_mspti.config``);
* runs a workload snippet once per profile (or once per step under a ``schedule``), exports each
  trace into the test's directory and summarises ``prof.events()``;
* writes everything as JSON, which :func:`run` returns as a :class:`SimResult`.

Names available to the snippet: ``torch``, ``x`` (a small tensor), ``launch``, ``launch_bare``,
``sync``, ``sim`` (the ctypes handle, or None), ``sim_stats``, ``record_function``, ``profile_index``,
``step`` (None outside a schedule), ``prof`` and ``out`` (a dict returned as ``SimResult.extra``).

With ``peer=(npu_peer.Peer, order)`` the child also loads a torch_npu MSPTI backend (real or stand-in,
see npu_peer.py) before (``"peer_first"``) or after (``"ours_first"``) torch_mspti is imported, or after a
first PrivateUse1 profile (``"ours_first_profiled"``, not counted in ``profiles``), and both
reach the simulator through the logging shim of ``npu_peer.fake_cann()``; the calls are in
``SimResult.mspti_calls``.

``launch(*kernels)`` runs the op ``simrun::launch`` once and, inside it, launches each kernel;
``launch_bare(*kernels)`` launches them with no op around. A kernel is a name, or a dict with
``name`` and optional ``type`` (KERNEL_AICORE), ``device`` (0), ``stream`` (1), ``dur_ns`` (20000)
and ``count`` (1; more than one uses ``msptiSimLaunchKernels``: one launch, several kernels).
Every launch is recorded in ``SimResult.launched`` with the correlation id the simulator returned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOCTOR = "torch-mspti doctor"
DEFAULT_DELAY_NS = 30_000_000
CPU_SORT_LIMIT = 5_000_000  # kineto's kExceedMaxPid
# When the child loads a peer (run(peer=...)): before torch_mspti is imported, after it, or after it
# and after a first PrivateUse1 profile (kineto then orders our profiler before the peer's).
PEER_ORDERS = ("peer_first", "ours_first", "ours_first_profiled")

_CHILD = r"""
import ctypes, json, os, sys, traceback, types, warnings

P = json.load(open(sys.argv[1]))
RESULT = {"warnings": [], "profiles": [], "traces": [], "launched": [], "extra": {}}

def _show(message, category, filename, lineno, file=None, line=None):
    RESULT["warnings"].append(f"{category.__name__}: {message}")
warnings.simplefilter("always")
warnings.showwarning = _show

import torch
_PEER = P["peer"]
if _PEER and _PEER["order"] == "peer_first":
    ctypes.CDLL(_PEER["library"], mode=ctypes.RTLD_GLOBAL)
import torch_mspti
if _PEER and _PEER["order"] == "ours_first":
    ctypes.CDLL(_PEER["library"], mode=ctypes.RTLD_GLOBAL)
from torch.profiler import ProfilerActivity, profile, record_function, schedule

sim = None
if P["library"] in ("sim", "sim-env", "sim-peer"):
    sim_path = torch_mspti.simulator_library(P["generation"])
    if P["library"] == "sim":
        torch_mspti.use_library(sim_path)
    sim = ctypes.CDLL(sim_path)
    sim.msptiSimLaunchKernel.restype = ctypes.c_uint64
    sim.msptiSimLaunchKernel.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32,
                                         ctypes.c_uint32, ctypes.c_uint64]
    sim.msptiSimLaunchKernels.restype = ctypes.c_uint64
    sim.msptiSimLaunchKernels.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32,
                                          ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint32]
    sim.msptiSimSynchronize.argtypes = [ctypes.c_int32]
    sim.msptiSimSetOption.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    sim.msptiSimGetOption.restype = ctypes.c_int64
    sim.msptiSimGetOption.argtypes = [ctypes.c_char_p]
    for _k, _v in P["sim_options"].items():
        if sim.msptiSimSetOption(_k.encode(), int(_v)) != 0:
            raise SystemExit(f"simrun: msptiSimSetOption({_k!r}, {_v!r}) failed")

_STAT_FIELDS = ["kernels_launched", "kernel_records", "external_records", "api_records",
                "records_dropped", "records_pending", "buffers_requested", "buffers_declined",
                "buffers_completed", "external_stack_depth"]

class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in _STAT_FIELDS]

def sim_stats():
    if sim is None:
        return None
    s = _Stats()
    sim.msptiSimGetStats(ctypes.byref(s))
    return {n: getattr(s, n) for n in _STAT_FIELDS}

for _k, _v in P["config"].items():
    setattr(torch_mspti.config, _k, _v)

def sync():
    if sim is not None:
        sim.msptiSimSynchronize(-1)

if P["rename"]:
    torch.utils.rename_privateuse1_backend("npu")
    _mod = types.ModuleType("npu")
    _mod.synchronize = lambda *a, **k: sync()
    _mod.is_available = lambda: True
    _mod.device_count = lambda: 1
    _mod.current_device = lambda: 0
    torch._register_device_module("npu", _mod)

if _PEER and _PEER["order"] == "ours_first_profiled":
    # A PrivateUse1 profile before the peer is loaded: kineto is initialised and holds our profiler
    # first, so the peer's factory is added after ours (the other kineto order).
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        torch.ones(1) + 1
    ctypes.CDLL(_PEER["library"], mode=ctypes.RTLD_GLOBAL)

CTX = {"profile_index": None, "step": None}
_PENDING = []

def _norm(k):
    k = {"name": k} if isinstance(k, str) else dict(k)
    k.setdefault("type", "KERNEL_AICORE")
    k.setdefault("device", 0)
    k.setdefault("stream", 1)
    k.setdefault("dur_ns", 20000)
    k.setdefault("count", 1)
    return k

def _do_launch(kernels, in_op):
    for k in kernels:
        cid = 0
        if sim is not None:
            args = (k["name"].encode(), k["type"].encode(), k["device"], k["stream"], k["dur_ns"])
            if k["count"] == 1:
                cid = sim.msptiSimLaunchKernel(*args)
            else:
                cid = sim.msptiSimLaunchKernels(*args, k["count"])
        RESULT["launched"].append(dict(k, correlation=cid, in_op=in_op,
                                       profile_index=CTX["profile_index"], step=CTX["step"]))

@torch.library.custom_op("simrun::launch", mutates_args=())
def _launch_op(t: torch.Tensor) -> torch.Tensor:
    kernels = list(_PENDING)
    _PENDING.clear()
    _do_launch(kernels, True)
    return t.clone()

def launch(*kernels):
    _PENDING[:] = [_norm(k) for k in kernels]
    return torch.ops.simrun.launch(x)

def launch_bare(*kernels):
    _do_launch([_norm(k) for k in kernels], False)

x = torch.ones(4)
_ACTS = {"CPU": ProfilerActivity.CPU, "PrivateUse1": ProfilerActivity.PrivateUse1, "CUDA": ProfilerActivity.CUDA}
def activities_for(i):
    acts = P["activities"]
    if acts and isinstance(acts[0], list):  # one list per profile
        acts = acts[i]
    return [_ACTS[a] for a in acts]
_code = compile(P["workload"], "<workload>", "exec")
NS = {"torch": torch, "x": x, "launch": launch, "launch_bare": launch_bare, "sync": sync,
      "sim": sim, "sim_stats": sim_stats, "record_function": record_function,
      "out": RESULT["extra"], "torch_mspti": torch_mspti}

def _device_links(p):
    # FunctionEvent.linked_correlation_id is newer than torch 2.7; there, take it from the kineto
    # events, which p.events() turns into FunctionEvents one by one and in order.
    dev = [ev for ev in p.profiler.kineto_results.events() if ev.device_type() != torch.autograd.DeviceType.CPU]
    fes = [e for e in p.events() if e.device_type != torch.autograd.DeviceType.CPU]
    if len(dev) != len(fes) or any(a.name() != b.name for a, b in zip(dev, fes)):
        return {}
    return {id(b): a.linked_correlation_id() for a, b in zip(dev, fes)}

def _linked(e, links):
    if hasattr(e, "linked_correlation_id"):
        return e.linked_correlation_id
    return links.get(id(e))

def _summary(p):
    kernels, ops, annotations = [], [], []
    events = p.events()
    links = _device_links(p) if events and not hasattr(events[0], "linked_correlation_id") else {}
    for e in p.events():
        if e.device_type != torch.autograd.DeviceType.CPU and e.is_user_annotation:
            annotations.append({"name": e.name, "id": e.id, "device_index": e.device_index,
                                "linked_correlation_id": _linked(e, links),
                                "duration_us": e.time_range.elapsed_us(),
                                "self_device_time_total": e.self_device_time_total})
        elif e.device_type != torch.autograd.DeviceType.CPU:
            kernels.append({"name": e.name, "device_type": str(e.device_type),
                            "is_privateuse1": e.device_type == torch.autograd.DeviceType.PrivateUse1,
                            "device_index": e.device_index, "id": e.id,
                            "linked_correlation_id": _linked(e, links),
                            "duration_us": e.time_range.elapsed_us(),
                            "self_device_time_total": e.self_device_time_total,
                            "metadata": getattr(e, "metadata_json", None)})
        else:
            ops.append({"id": e.id, "name": e.name, "is_user_annotation": bool(e.is_user_annotation),
                        "self_device_time_total": e.self_device_time_total,
                        "device_time_total": e.device_time_total,
                        "kernels": [{"name": k.name, "device": k.device, "duration_us": k.duration}
                                    for k in e.kernels]})
    cpu_ids = [ev.correlation_id() for ev in p.profiler.kineto_results.events()
               if ev.device_type() == torch.autograd.DeviceType.CPU and ev.correlation_id() != 0]
    return {"kernels": kernels, "ops": ops, "annotations": annotations, "cpu_correlation_ids": cpu_ids}

def _finish(p, index):
    path = os.path.join(P["out_dir"], f"trace_{index}.json")
    p.export_chrome_trace(path)
    RESULT["traces"].append(path)
    d = torch_mspti.diagnostics(load_library=False).to_dict()
    entry = _summary(p)
    entry.update(index=index, trace=path, session=d["last_session"], sim_stats=sim_stats())
    RESULT["profiles"].append(entry)

_EXTRA = {}
if P["record_shapes"]:
    _EXTRA["record_shapes"] = True
if P["experimental_config"]:
    from torch._C._profiler import _ExperimentalConfig
    _EXTRA["experimental_config"] = _ExperimentalConfig(**P["experimental_config"])

RESULT["sim_stats_before"] = sim_stats()
try:
    if P["schedule"] is None:
        for i in range(P["profiles"]):
            CTX["profile_index"] = i
            with profile(activities=activities_for(i), **_EXTRA) as prof:
                NS.update(prof=prof, profile_index=i, step=None)
                exec(_code, NS)
            _finish(prof, i)
    else:
        s = P["schedule"]
        steps = P["steps"] if P["steps"] is not None else (
            (s["wait"] + s["warmup"] + s["active"]) * s["repeat"] + s.get("skip_first", 0))
        _cycle = [0]
        def _ready(p):
            _finish(p, _cycle[0])
            _cycle[0] += 1
        with profile(activities=activities_for(0), schedule=schedule(**s), on_trace_ready=_ready, **_EXTRA) as prof:
            for st in range(steps):
                CTX.update(step=st, profile_index=_cycle[0])
                NS.update(prof=prof, profile_index=_cycle[0], step=st)
                exec(_code, NS)
                prof.step()
    RESULT["ok"] = True
except BaseException:
    RESULT["ok"] = False
    RESULT["error"] = traceback.format_exc()
RESULT["sim_stats_after"] = sim_stats()
RESULT["diagnostics"] = torch_mspti.diagnostics(load_library=P["diagnostics_load"]).to_dict()
RESULT["diagnostics_repr"] = repr(torch_mspti.diagnostics(load_library=False))
with open(P["result_path"], "w") as f:
    json.dump(RESULT, f, default=str)
"""

# Variables that would let the library search find something the scenario did not ask for.
_SEARCH_ENV = (
    "TORCH_MSPTI_LIBRARY",
    "ASCEND_HOME_PATH",
    "ASCEND_TOOLKIT_HOME",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "ASCEND_RT_VISIBLE_DEVICES",
)


def sanitizer_preload() -> str | None:
    """The sanitizer runtimes in this process's LD_PRELOAD (ci/sanitizers.sh preloads libasan for a
    package built with ASan), or None. Children need them too; no other LD_PRELOAD entry is passed
    on (it could be a libmspti the scenario did not ask for)."""
    keep = [
        p
        for p in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
        if os.path.basename(p).startswith(("libasan", "libubsan", "libtsan"))
    ]
    return ":".join(keep) or None


def clean_environment() -> dict[str, str]:
    """This process's environment without TORCH_MSPTI_* and the variables the library search reads
    (the sanitizer preload kept): what a child that chooses its own MSPTI starts from."""
    env = {k: v for k, v in os.environ.items() if k not in _SEARCH_ENV and not k.startswith("TORCH_MSPTI_")}
    env.setdefault("OMP_NUM_THREADS", "1")
    if sanitizer_preload():
        env["LD_PRELOAD"] = sanitizer_preload()
    return env


@dataclass
class SimResult:
    """What one child run produced (see the module docstring)."""

    returncode: int
    stdout: str
    stderr: str
    warnings: list[str]
    trace_paths: list[Path]
    traces: list[dict]
    profiles: list[dict]  # per profile / schedule cycle: kernels, ops, cpu_correlation_ids, session, sim_stats
    launched: list[dict]
    diagnostics: dict
    sim_stats_before: dict | None
    sim_stats_after: dict | None
    extra: dict = field(default_factory=dict)
    mspti_calls: list[str] = field(default_factory=list)  # shim log lines (runs with a peer)
    diagnostics_repr: str = ""  # repr(torch_mspti.diagnostics()) after the last profile

    @property
    def trace(self) -> dict:
        """The only (or the last) exported trace."""
        return self.traces[-1]

    def doctor_warnings(self) -> list[str]:
        """Warnings that send the user to `torch-mspti doctor` (C++ TORCH_WARN on stderr or Python)."""
        lines = [ln for ln in self.stderr.splitlines() if DOCTOR in ln]
        return lines + [w for w in self.warnings if DOCTOR in w]


def run(
    workload: str,
    tmp_path: Path,
    *,
    library: str | None = "sim",
    rename: bool = True,
    delay_ns: int = DEFAULT_DELAY_NS,
    sim_options: dict[str, int] | None = None,
    config: dict[str, Any] | None = None,
    profiles: int = 1,
    schedule: dict[str, int] | None = None,
    steps: int | None = None,
    activities: Sequence[str] | Sequence[Sequence[str]] = ("CPU", "PrivateUse1"),
    env: dict[str, str] | None = None,
    diagnostics_load: bool = False,
    timeout: float = 180,
    check: bool = True,
    generation: str | None = None,
    experimental_config: dict[str, Any] | None = None,
    record_shapes: bool = False,
    peer: tuple[Any, str] | None = None,
    preload: bool = False,
) -> SimResult:
    """Run ``workload`` in a fresh interpreter; see the module docstring.

    ``library``: "sim" (``torch_mspti.use_library(simulator)``), "sim-env"
    (``TORCH_MSPTI_LIBRARY=<simulator>``), any other string (``TORCH_MSPTI_LIBRARY`` set to it, the
    simulator not loaded), or None (no explicit path and no CANN/loader variables, simulator not
    loaded). ``delay_ns`` is the simulator's delivery delay; ``sim_options`` more simulator options;
    ``config`` plugin settings. ``generation``: the MSPTI generation of the simulator library
    ("8.0.RC3", "8.1", "8.2", "26.0", "26.1"; None = the default ``libmspti_sim.so``, see
    ``torch_mspti.simulator_library``). ``experimental_config``: keyword arguments of
    ``torch._C._profiler._ExperimentalConfig`` (e.g. ``profile_all_threads=True``). ``record_shapes``:
    ``profile(record_shapes=True)`` (ops then carry their scalar arguments in "Concrete Inputs"). ``activities``: names ("CPU", "PrivateUse1", "CUDA") for every profile, or one
    such list per profile. ``check``: raise when the child fails or the workload raises.
    ``preload``: start the child with the simulator library in ``LD_PRELOAD`` (the libraries before
    26.0 know a device, and so deliver kernels, only then; copies need it on every generation).
    """
    out_dir = Path(tmp_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    child_env = clean_environment()
    sim_opts: dict[str, int] = {}
    if library in ("sim", "sim-env"):
        sim_opts["delivery_delay_ns"] = delay_ns
        sim_opts.update(sim_options or {})
        if library == "sim-env":
            child_env["TORCH_MSPTI_LIBRARY"] = _simulator_path(generation)
    elif library is not None:
        child_env["TORCH_MSPTI_LIBRARY"] = library
    if preload:
        child_env["LD_PRELOAD"] = ":".join(p for p in (sanitizer_preload(), _simulator_path(generation)) if p)
    run_library = library
    if peer is not None:
        import npu_peer

        peer_lib, order = peer
        if library != "sim" or order not in PEER_ORDERS:
            raise ValueError(f"peer needs library='sim' and an order in {PEER_ORDERS}")
        child_env.update(
            npu_peer.fake_cann(generation).env(_simulator_path(generation), out_dir / "mspti_calls.log", peer_lib)
        )
        # peer_first: torch must not autoload torch_mspti before the peer is loaded.
        child_env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0" if order == "peer_first" else "1"
        (out_dir / "mspti_calls.log").unlink(missing_ok=True)
        run_library = "sim-peer"
    child_env.update(env or {})
    params = {
        "workload": textwrap.dedent(workload),
        "library": run_library,
        "peer": {"library": str(peer[0].library), "order": peer[1]} if peer else None,
        "rename": rename,
        "sim_options": sim_opts,
        "config": config or {},
        "profiles": profiles,
        "schedule": schedule,
        "steps": steps,
        "activities": [a if isinstance(a, str) else list(a) for a in activities],
        "out_dir": str(out_dir),
        "result_path": str(out_dir / "simrun_result.json"),
        "diagnostics_load": diagnostics_load,
        "generation": generation,
        "record_shapes": record_shapes,
        "experimental_config": experimental_config,
    }
    (out_dir / "simrun_params.json").write_text(json.dumps(params))
    (out_dir / "simrun_child.py").write_text(_CHILD)
    proc = subprocess.run(
        [sys.executable, str(out_dir / "simrun_child.py"), str(out_dir / "simrun_params.json")],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env,
        cwd=out_dir,
    )
    result_path = out_dir / "simrun_result.json"
    if not result_path.exists():
        raise AssertionError(
            f"simrun child died (rc={proc.returncode}) without a result\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
        )
    data = json.loads(result_path.read_text())
    if check and (proc.returncode != 0 or not data.get("ok")):
        raise AssertionError(
            f"simrun workload failed (rc={proc.returncode}):\n{data.get('error')}\nstderr:\n{proc.stderr[-6000:]}"
        )
    paths = [Path(p) for p in data["traces"]]
    return SimResult(
        returncode=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        warnings=data["warnings"],
        trace_paths=paths,
        traces=[json.loads(p.read_text()) for p in paths],
        profiles=data["profiles"],
        launched=data["launched"],
        diagnostics=data["diagnostics"],
        sim_stats_before=data.get("sim_stats_before"),
        sim_stats_after=data.get("sim_stats_after"),
        extra=data["extra"],
        mspti_calls=calls.read_text().splitlines() if (calls := out_dir / "mspti_calls.log").exists() else [],
        diagnostics_repr=data.get("diagnostics_repr", ""),
    )


_SIM_PATHS: dict[str | None, str] = {}


def _simulator_path(generation: str | None = None) -> str:
    if generation not in _SIM_PATHS:
        code = f"import torch_mspti; print(torch_mspti.simulator_library({generation!r}))"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
        _SIM_PATHS[generation] = proc.stdout.strip().splitlines()[-1]
    return _SIM_PATHS[generation]


# ---------------------------------------------------------------------------------------------
# Trace accessors (plain data; no torch)


def events(trace: dict | list) -> list[dict]:
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def slices(trace, cat: str) -> list[dict]:
    return [e for e in events(trace) if e.get("ph") == "X" and e.get("cat") == cat]


def kernels(trace) -> list[dict]:
    return slices(trace, "kernel")


def cpu_ops(trace) -> list[dict]:
    return slices(trace, "cpu_op")


def launches(trace) -> list[dict]:
    return slices(trace, "privateuse1_runtime")


def flow_id(correlation: int) -> int:
    """The ac2g flow id the plugin gives the launch with ``correlation`` (its "correlation"
    argument): the correlation itself where kineto's flow ids have 32 bits, else folded into 27
    bits (src/core/TorchCompat.h, flowIdFor)."""
    import torch_mspti

    bits = torch_mspti._C.torch_build()["flow_id_bits"]
    if bits >= 32:
        return correlation
    return 1 + correlation % ((1 << bits) - 1)


def flow_events(trace, ph: str) -> list[dict]:
    return [e for e in events(trace) if e.get("ph") == ph and e.get("cat") == "ac2g"]


def metadata(trace, name: str) -> list[dict]:
    return [e for e in events(trace) if e.get("ph") == "M" and e.get("name") == name]


def device_pids(trace) -> set:
    return {k["pid"] for k in kernels(trace)}


def cpu_pids(trace) -> set:
    return {e["pid"] for e in cpu_ops(trace)}


def sort_index(trace, pid) -> int | None:
    for e in metadata(trace, "process_sort_index"):
        if e["pid"] == pid:
            return e["args"]["sort_index"]
    return None


def process_name(trace, pid) -> str | None:
    for e in metadata(trace, "process_name"):
        if e["pid"] == pid:
            return e["args"]["name"]
    return None


def cpu_time_range(trace) -> tuple[float, float]:
    """[first start, last end] over the host slices (cpu_op and user_annotation)."""
    host = [e for e in events(trace) if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    return min(e["ts"] for e in host), max(e["ts"] + e["dur"] for e in host)


def end(e: dict) -> float:
    return e["ts"] + e["dur"]


# kineto writes ts/dur in µs with 3 decimals; absolute timestamps near 5e12 µs carry float error.
TS_TOL_US = 0.002


# ---------------------------------------------------------------------------------------------
# Exact times: kineto writes ts and dur as decimal µs with 3 digits, i.e. whole ns. Near 5e12 µs a
# double holds only ~1 ns (one ulp is 2^-10 µs), so ts + dur read as floats can exceed the next
# row's ts by one ulp although the two touch exactly; these helpers read the text as decimals.

DEVICE_LANE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")


def exact_slices(path: Path | str, cats: Sequence[str] = DEVICE_LANE_CATS) -> list[dict]:
    """The slices of ``cats`` in the trace file at ``path``, each with ``start_ns`` and ``end_ns``
    computed exactly from the written decimals."""
    from decimal import Decimal

    trace = json.loads(Path(path).read_text(), parse_float=Decimal)
    out = []
    for e in events(trace):
        if e.get("ph") == "X" and e.get("cat") in cats:
            start = int(Decimal(e["ts"]) * 1000)
            out.append(dict(e, start_ns=start, end_ns=start + int(Decimal(e["dur"]) * 1000)))
    return out


def lane_violations(slices: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of slices on one (pid, tid) that a viewer cannot draw as one track: two device rows
    (kernels, copies, memsets) that share a stretch of time, or a user-range span and a slice that
    share one without either containing the other (a span must enclose its rows). Touching slices
    and zero-length rows share no time."""
    lanes: dict[tuple, list[dict]] = {}
    for s in slices:
        lanes.setdefault((s["pid"], s["tid"]), []).append(s)
    bad = []
    for items in lanes.values():
        items.sort(key=lambda s: (s["start_ns"], s["end_ns"]))
        for i, a in enumerate(items):
            for b in items[i + 1 :]:
                if b["start_ns"] >= a["end_ns"]:
                    break
                if min(a["end_ns"], b["end_ns"]) <= b["start_ns"]:
                    continue  # b is zero-length at a point of a
                spans = "gpu_user_annotation" in (a["cat"], b["cat"])
                a_holds_b = a["start_ns"] <= b["start_ns"] and b["end_ns"] <= a["end_ns"]
                b_holds_a = b["start_ns"] <= a["start_ns"] and a["end_ns"] <= b["end_ns"]
                if not spans or not (a_holds_b or b_holds_a):
                    bad.append((a, b))
    return bad
