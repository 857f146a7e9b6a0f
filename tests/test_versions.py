"""The version matrix: one simulator library per MSPTI generation (mspti.md §8), same scenario on each.

Each generation's library (``torch_mspti.simulator_library(generation)``) exports exactly that
generation's symbols and accepts exactly its activity kinds. Profiling the same workload on each
must give a valid trace with every kernel, linked to the op that launched it: through external
correlation from 8.1 on, and on 8.0.RC3 (no external correlation) through the API records' thread
and host time matched against the op intervals the plugin records at push/pop. Libraries before
26.1 pull nothing from the device on Disable, so ``drain_order=auto`` must poll first there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from simrun import cpu_ops, kernels

from torch_mspti_cli.check import check_trace

GENERATIONS = ["8.0.RC3", "8.1", "8.2", "26.0", "26.1"]
NUMBER = {"8.0.RC3": 80, "8.1": 81, "8.2": 82, "26.0": 260, "26.1": 261}

BASE = {
    "msptiSubscribe",
    "msptiUnsubscribe",
    "msptiActivityRegisterCallbacks",
    "msptiActivityEnable",
    "msptiActivityDisable",
    "msptiActivityGetNextRecord",
    "msptiActivityFlushAll",
}
FROM_81 = {
    "msptiActivityFlushPeriod",
    "msptiActivityPushExternalCorrelationId",
    "msptiActivityPopExternalCorrelationId",
}
# Enable/DisableMarkerDomain: documented from CANN 8.3.RC1 (docs/mspti.md 8).
MARKER_DOMAINS = {"msptiActivityEnableMarkerDomain", "msptiActivityDisableMarkerDomain"}
SYMBOLS = {
    "8.0.RC3": BASE,
    "8.1": BASE | FROM_81,
    "8.2": BASE | FROM_81,
    "26.0": BASE | FROM_81 | MARKER_DOMAINS,
    "26.1": BASE | FROM_81 | MARKER_DOMAINS | {"msptiActivityIsEnabled"},
}
# libms_tools_ext's mstx ABI, which every generation's simulator answers itself (docs/mspti.md 5.9).
MSTX = {
    "mstxMarkA",
    "mstxRangeStartA",
    "mstxRangeEnd",
    "mstxDomainCreateA",
    "mstxDomainDestroy",
    "mstxDomainMarkA",
    "mstxDomainRangeStartA",
    "mstxDomainRangeEnd",
}
MAX_KIND = {"8.0.RC3": 3, "8.1": 8, "8.2": 9, "26.0": 12, "26.1": 12}

# Kernels launched in order, each pair inside its own simrun::launch op; one multi-kernel launch;
# one launch outside any op. Delivered 150 ms after each kernel ends, so a library whose Disable
# pulls nothing loses them unless the drain polls first.
WORKLOAD = """
with record_function("phase"):
    for i in range(4):
        launch(f"Gen_{i}", {"name": f"GenVec_{i}", "type": "KERNEL_AIVEC", "stream": 2})
    launch({"name": "GenTriple", "count": 3, "stream": 3})
launch_bare({"name": "GenBare", "stream": 4})
sync()
torch.ones(2) + 1
sim.msptiSimGeneration.restype = ctypes.c_int
out["generation"] = sim.msptiSimGeneration()
out["disable_pulls"] = sim.msptiSimGetOption(b"disable_pulls")
"""
LINKED_KERNELS = 4 * 2 + 3


@pytest.fixture(scope="module", params=GENERATIONS)
def gen_run(request, tmp_path_factory):
    generation = request.param
    run = simrun.run(
        "import ctypes\n" + WORKLOAD,
        tmp_path_factory.mktemp(f"gen_{generation}"),
        generation=generation,
        delay_ns=150_000_000,
        config={"enable_communication": True},
        # before 26.0 a device is known only through the preloaded library (mspti.md 5.5)
        preload=generation in ("8.0.RC3", "8.1", "8.2"),
    )
    return generation, run


def test_each_generation_runs_its_own_library(gen_run):
    generation, run = gen_run
    assert run.extra["generation"] == NUMBER[generation]
    # only 26.1's Disable pulls device data (halProfDataFlush)
    assert run.extra["disable_pulls"] == (1 if generation == "26.1" else 0)
    lib = run.diagnostics["library"]
    assert lib["available"] and lib["found_by"] == "explicit", lib
    if generation == "8.0.RC3":
        assert "8.0.RC3" in lib["version"], lib["version"]
    elif generation == "26.1":
        assert "26.1" in lib["version"], lib["version"]
    else:
        assert ">=8.1" in lib["version"], lib["version"]


def test_trace_is_valid_and_holds_every_kernel(gen_run):
    generation, run = gen_run
    report = check_trace(run.trace)
    assert report.ok, report.to_dict()
    expected = Counter(k["name"] for k in run.launched for _ in range(k["count"]))
    got = Counter(k["name"] for k in kernels(run.trace))
    assert got == expected, f"{generation}: missing {expected - got}, extra {got - expected}"
    session = run.diagnostics["last_session"]
    assert session["drain"]["exit_reason"] == "balanced", session["drain"]
    assert session["drain"]["pending_launches"] == 0


def test_drain_order_auto_polls_first_unless_disable_pulls(gen_run):
    generation, run = gen_run
    order = run.diagnostics["last_session"]["drain"]["order"]
    assert order == ("disable_first" if generation == "26.1" else "poll_first"), order


def test_kernels_link_to_the_op_that_launched_them(gen_run):
    generation, run = gen_run
    session = run.diagnostics["last_session"]
    links = session["links"]
    assert session["linked_rows"] == LINKED_KERNELS, session
    assert session["correlation"]["ops_logged"] >= 5, session
    if generation == "8.0.RC3":
        # No external correlation: every link is recovered from the launch call's thread and time.
        assert links["recovered"] == LINKED_KERNELS and links["verified"] == 0, links
        assert "EXTERNAL_CORRELATION" not in session["records_by_kind"], session["records_by_kind"]
        assert session["records_by_kind"].get("API", 0) >= 6, session["records_by_kind"]
    else:
        # MSPTI's hint names the op, and the launch call confirms it.
        assert links["verified"] == LINKED_KERNELS and links["recovered"] == 0, links
        assert session["records_by_kind"].get("EXTERNAL_CORRELATION", 0) >= 5, session["records_by_kind"]
    # the n-th simrun::launch op (in time order) launched kernels Gen_n / GenVec_n (GenTriple last)
    launch_ops = sorted((op for op in cpu_ops(run.trace) if op["name"] == "simrun::launch"), key=lambda o: o["ts"])
    assert len(launch_ops) == 5
    names_of_op = [{f"Gen_{i}", f"GenVec_{i}"} for i in range(4)] + [{"GenTriple"}]
    for op, names in zip(launch_ops, names_of_op, strict=True):
        eid = op["args"]["External id"]
        linked = {k["name"] for k in kernels(run.trace) if k["args"].get("External id") == eid}
        assert linked == names, (generation, op, linked)
    bare = [k for k in kernels(run.trace) if k["name"] == "GenBare"]
    assert bare and all("External id" not in k["args"] for k in bare), bare


def test_capability_table_matches_the_generation(gen_run):
    generation, run = gen_run
    caps = run.diagnostics["library"]["capabilities"]
    assert caps["kernel"] is True
    assert caps["external_correlation"] is (generation != "8.0.RC3"), caps
    assert caps["is_enabled"] is (generation == "26.1"), caps
    assert caps["api_records"] is True, caps
    assert caps["communication"] is (NUMBER[generation] >= 82), caps
    # where the kind is missing, the capability says why (on by default: the session tried it)
    note = run.diagnostics["library"]["capability_notes"].get("communication", "")
    if NUMBER[generation] >= 82:
        assert note == "", note
    else:
        assert "does not know COMMUNICATION" in note and "later generation" in note, note
    resolved = set(run.diagnostics["library"]["symbols"]["resolved"])
    assert resolved == SYMBOLS[generation], resolved ^ SYMBOLS[generation]


@pytest.mark.parametrize("generation", GENERATIONS)
def test_library_exports_exactly_its_generations_symbols(generation):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not installed")
    path = _library(generation)
    out = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    mspti = {n for n in names if n.startswith("mspti") and not n.startswith("msptiSim")}
    assert mspti == SYMBOLS[generation], mspti ^ SYMBOLS[generation]
    assert {n for n in names if n.startswith("mstx")} == MSTX, names
    assert all(n.startswith(("mspti", "mstx")) for n in names if not n.startswith("_")), names
    assert "msptiSimLaunchKernel" in names and "msptiSimGeneration" in names
    assert CONTROL_API <= names, CONTROL_API - names


CONTROL_API = {
    "msptiSimLaunchCommunication",
    "msptiSimMemcpy",
    "msptiSimMemset",
    "msptiSimRuntimeCall",
    "msptiSimCompleteForeignBuffer",
    "msptiSimGetCounter",
    "msptiSimDeviceTail",
}

# Which records a generation's library produces for a collective and a copy: a kind it does not
# know cannot be enabled, so nothing is minted (the collective and the copy still run).
_PRODUCER_PROBE = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.msptiSimLaunchCommunication.restype = ctypes.c_uint64
lib.msptiSimLaunchCommunication.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_uint32, ctypes.c_uint64,
                                            ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_char_p]
lib.msptiSimMemcpy.restype = ctypes.c_uint64
lib.msptiSimMemcpy.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32,
                               ctypes.c_uint64, ctypes.c_uint8]
lib.msptiSimDeviceTail.restype = ctypes.c_uint64
lib.msptiSimDeviceTail.argtypes = [ctypes.c_int32]
handle = ctypes.c_void_p()
assert lib.msptiSubscribe(ctypes.byref(handle), None, None) == 0
out = {"enable_communication": lib.msptiActivityEnable(9), "enable_memcpy": lib.msptiActivityEnable(7)}
out["communication_id"] = lib.msptiSimLaunchCommunication(b"allreduce", b"RING", b"g", 4, 8, 0, 6, 1000, None)
out["memcpy_id"] = lib.msptiSimMemcpy(2, 64, 0, 7, 1000, 1)
out["ran"] = lib.msptiSimDeviceTail(0) > 0
print(json.dumps(out))
"""


@pytest.mark.parametrize("generation", GENERATIONS)
def test_collectives_and_copies_mint_only_where_the_generation_has_their_kind(generation):
    path = _library(generation)
    env = {k: v for k, v in __import__("os").environ.items() if k != "LD_PRELOAD"}
    env["LD_PRELOAD"] = f"/nonexistent/{Path(path).name}"  # the copy hook needs the preload
    proc = subprocess.run(
        [sys.executable, "-c", _PRODUCER_PROBE, path], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    out = json.loads(proc.stdout.splitlines()[-1])
    has_communication = NUMBER[generation] >= 82
    has_memcpy = NUMBER[generation] >= 81
    assert out["enable_communication"] == (0 if has_communication else 1), out
    assert out["enable_memcpy"] == (0 if has_memcpy else 1), out
    assert (out["communication_id"] > 0) is has_communication, out
    assert (out["memcpy_id"] > 0) is has_memcpy, out
    assert out["ran"], out


_ENABLE_PROBE = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
out = {}
for kind in range(0, 14):
    out[kind] = lib.msptiActivityEnable(kind)
    lib.msptiActivityDisable(kind)
print(json.dumps(out))
"""


@pytest.mark.parametrize("generation", GENERATIONS)
def test_library_accepts_exactly_its_generations_kinds(generation, tmp_path):
    path = _library(generation)
    results = {}
    for label, preload in (("plain", None), ("preloaded", Path(path).name)):
        env = {k: v for k, v in __import__("os").environ.items() if k != "LD_PRELOAD"}
        if preload:
            # the 26.x rule checks LD_PRELOAD for libmspti.so or, here, the simulator's own name;
            # naming it without a directory keeps the loader from preloading anything
            env["LD_PRELOAD"] = f"/nonexistent/{preload}"
        proc = subprocess.run(
            [sys.executable, "-c", _ENABLE_PROBE, path], capture_output=True, text=True, env=env, timeout=60, check=True
        )
        results[label] = {int(k): v for k, v in json.loads(proc.stdout.splitlines()[-1]).items()}
    plain, preloaded = results["plain"], results["preloaded"]
    ld_rule = NUMBER[generation] >= 260
    for kind in range(14):
        if kind == 0 or kind > MAX_KIND[generation]:
            assert plain[kind] == 1, (generation, kind, plain[kind])  # INVALID_PARAMETER
        elif kind in (4, 5, 6, 7) and ld_rule:
            assert plain[kind] == 6, (generation, kind, plain[kind])  # WITHOUT_LD_PRELOAD
            assert preloaded[kind] == 0, (generation, kind, preloaded[kind])
        else:
            assert plain[kind] == 0, (generation, kind, plain[kind])


def test_simulator_library_lists_generations_and_rejects_unknown_ones():
    from torch_mspti import _paths

    assert _paths.simulator_generations() == GENERATIONS
    assert _paths.simulator_library() == _paths.simulator_library("26.1")
    assert _paths.simulator_library(80) == _paths.simulator_library("8.0.rc3")
    with pytest.raises(ValueError, match="8.0.RC3, 8.1, 8.2, 26.0, 26.1"):
        _paths.simulator_library("7.0")


def _library(generation: str) -> str:
    from torch_mspti import _paths

    return _paths.simulator_library(generation)
