"""FSDP2 (``torch.distributed.fsdp.fully_shard``) on the simulated NPU, 2 ranks on the simulated ``hccl``
backend (fsdp2_check.py, one ``torch.multiprocessing.spawn`` run for the module, the simulator in
``LD_PRELOAD`` from process start so that copies are reported). FSDP2 drives the device through
``torch.npu`` as its device handle: streams, ``torch.Event`` waits (torch.npu.Event must be a
``torch.Event``, docs/torch_npu.md 2), ``record_stream``. A profiled step's trace must hold the
collectives on the communication stream and the copies, each linked to the op that issued it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from sim_support import require_simulator, simulator_library_path

from torch_mspti._torch_version import major_minor

TESTS = Path(__file__).resolve().parent
RANKS = 2


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    require_simulator()
    out = tmp_path_factory.mktemp("fsdp2")
    code = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
        "import torch.multiprocessing as mp, fsdp2_check\n"
        "from torch_mspti.sim.multirank import free_port\n"
        f"mp.spawn(fsdp2_check.spawn_main, args=({RANKS}, free_port(), {str(out)!r}), nprocs={RANKS})\n"
    )
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1", OMP_NUM_THREADS="1", LD_PRELOAD=simulator_library_path())
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    results = []
    for r in range(RANKS):
        f = out / f"result_rank{r}.json"
        assert f.is_file(), f"no {f.name} (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        results.append(json.loads(f.read_text()))
        assert "error" not in results[-1], f"rank {r} failed:\n{results[-1]['error']}"
    return results


def _events(path: str) -> list[dict]:
    return json.loads(Path(path).read_text())["traceEvents"]


def test_npu_event_is_a_torch_event(ranks):
    assert all(r["event_is_torch_event"] for r in ranks)


# Open: on torch 2.7 the step runs and profiles (the trace test passes) but the trained parameters
# diverge from the reference (max diff ~5); a 1-layer Linear(4, 2) even aborts in gloo
# (gloo::EnforceNotMet) in backward. Not diagnosed yet; strict, so a fix shows up as XPASS.
@pytest.mark.xfail(
    major_minor(torch.__version__) < (2, 8),
    reason="known defect of the simulated device on torch 2.7 (README, FSDP2): the profiled step is checked by "
    "the other tests here, but its trained parameters differ from the CPU reference (max diff ~5), cause not yet "
    "found; strict, so a fix shows as XPASS",
    strict=True,
)
def test_fsdp2_trains_like_the_cpu_reference(ranks):
    for r in ranks:
        assert r["max_diff"] < 1e-6, r


def test_pin_memory_gives_pinned_host_memory(ranks):
    for r in ranks:
        assert r["pinned"] == [True, False], r["pinned"]  # pin_memory() is pinned; a plain CPU tensor is not


@pytest.mark.skipif(
    major_minor(torch.__version__) < (2, 8),
    reason="FSDP2's numerics on torch 2.7 are a known defect of the simulated device (README, FSDP2)",
)
def test_fsdp2_with_cpu_offload_trains_like_the_cpu_reference(ranks):
    """CPUOffloadPolicy keeps the shards in pinned host memory: FSDP2 re-pins (copies) a shard that
    is_pinned() calls unpinned, parting it from the optimizer, so this needs pinned memory that says so."""
    for r in ranks:
        assert r["offload_max_diff"] < 1e-5, r


def test_profiled_step_has_linked_collectives_on_the_communication_stream_and_linked_copies(ranks):
    for r in ranks:
        events = _events(r["trace"])
        ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e["args"]}
        finishes = {e.get("id") for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
        rows = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")]
        comms = [e for e in rows if e["name"].startswith("hcom_")]
        copies = [e for e in rows if e["cat"] == "gpu_memcpy"]
        kinds = sorted({e["name"].split("__")[0] for e in comms})
        # Forward and backward all-gather the two layers' parameters; backward reduce-scatters the gradients.
        assert kinds == ["hcom_allGather", "hcom_reduceScatter"], kinds
        assert all((e["pid"], e["tid"]) == (r["device"], r["comm_stream"]) for e in comms), comms
        assert any(e["name"].startswith("Memcpy HtoD") for e in copies), [e["name"] for e in copies]
        assert any(e["name"].startswith("Memcpy DtoD") for e in copies), [e["name"] for e in copies]
        for e in comms + copies:
            op = ops.get(e["args"].get("External id"))
            assert op is not None, f"{e['name']} is not linked to an op: {e['args']}"
            assert simrun.flow_id(e["args"]["correlation"]) in finishes, f"no arrow ends on {e['name']}"
            assert e["ts"] >= op["ts"], (e, op)
        # The collectives' ops are the c10d ones FSDP2 calls; the copies' are copy ops.
        assert {ops[e["args"]["External id"]]["name"] for e in comms} <= {"HcclAllgatherBase", "HcclReduceScatterBase"}
        assert all("copy" in ops[e["args"]["External id"]]["name"] for e in copies)
        # Every op-issued row is linked: only the allocator's housekeeping runs outside any op.
        unlinked = [e["name"] for e in rows if e["args"].get("External id") not in ops]
        assert set(unlinked) <= {"MemSet"}, unlinked
