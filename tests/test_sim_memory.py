"""profile_memory=True on the simulated NPU: the device's caching allocator reports every block it
hands out and takes back to torch's profiler with the npu device (src/sim/device/NpuSimMemory.cpp,
docs/torch_npu.md 1), so the trace's ``[memory]`` events, ``key_averages()``'s Self NPU Mem and
``export_memory_timeline(device="npu:0")`` show the bytes the script allocated. Also
torch.npu.memory_allocated & co. Each check runs in one child process (sim_support).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks

CHECKS = r"""
import json, os, tempfile, threading
from torch.profiler import ProfilerActivity, profile

N = 4 << 20  # bytes per tensor
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

def _block(n):
    return int(torch.ops.npu_sim.block_size(n))

def _self_mem(prof, name):
    rows = [e for e in prof.key_averages() if e.key == name]
    assert len(rows) == 1, [e.key for e in prof.key_averages()]
    return rows[0].self_device_memory_usage, rows[0].self_cpu_memory_usage, rows[0].count

def check_block_size():
    # torch_npu's rounding: n + 32 up to a multiple of 512, at least 512.
    return [_block(n) for n in (1, 480, 481, 512, N)]

def check_memory_events():
    torch.npu.synchronize()
    before = torch.npu.memory_allocated()
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        ts = [torch.empty(N, dtype=torch.uint8, device="npu") for _ in range(4)]
        del ts
        torch.npu.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("name") == "[memory]"]
    npu = [e["args"] for e in events if e["args"].get("Device Type") == 20]
    return {
        "npu": [(a["Bytes"], a["Device Id"], a["Total Allocated"] - before) for a in npu],
        "other_devices": [e["args"] for e in events if e["args"].get("Device Type") != 20],
        "threads": sorted({e["tid"] for e in events}),
        "main_tid": threading.get_native_id(),
        "block": _block(N),
    }

def check_self_npu_mem_per_op():
    a = torch.ones(N // 4, device="npu")  # float32: N bytes
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        ts = [torch.empty(N, dtype=torch.uint8, device="npu") for _ in range(4)]
        b = a + a  # through the CPU fallback: its CPU result becomes npu memory
        torch.npu.synchronize()
    return {"empty": _self_mem(prof, "aten::empty"), "add": _self_mem(prof, "aten::add"), "block": _block(N)}

def check_memory_timeline():
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        ts = [torch.empty(N, dtype=torch.uint8, device="npu") for _ in range(4)]
        del ts
        torch.npu.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "timeline.json")
    prof.export_memory_timeline(path, device="npu:0")
    times, sizes = json.load(open(path))
    totals = [sum(s) for s in sizes]
    return {"first": totals[0], "peak": max(totals), "last": totals[-1], "block": _block(N)}

def check_memory_stats():
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    ts = [torch.empty(N, dtype=torch.uint8, device="npu") for _ in range(4)]
    held = torch.npu.memory_allocated() - base
    peak = torch.npu.max_memory_allocated() - base
    reserved = torch.npu.memory_reserved()
    del ts
    stats = torch.npu.memory_stats()
    return {"held": held, "peak": peak, "after": torch.npu.memory_allocated() - base,
            "peak_after": torch.npu.max_memory_allocated() - base, "reserved": reserved,
            "current_allocs": stats["allocation.all.current"], "block": _block(N)}
"""


@pytest.fixture(scope="module")
def results():
    require_simulator()
    return run_checks(CHECKS, enable={})


def test_blocks_are_sized_as_torch_npus_caching_allocator_does(results):
    assert result(results, "block_size") == [512, 512, 1024, 1024, (4 << 20) + 512]


def test_memory_events_name_the_npu_device_and_carry_the_allocated_bytes(results):
    r = result(results, "memory_events")
    block = r["block"]
    # Four allocations then four frees, on npu:0, with the running total the allocator kept.
    assert [b for b, _, _ in r["npu"]] == [block] * 4 + [-block] * 4
    assert {d for _, d, _ in r["npu"]} == {0}
    assert [t for _, _, t in r["npu"]] == [block, 2 * block, 3 * block, 4 * block, 3 * block, 2 * block, block, 0]
    assert r["other_devices"] == []  # nothing of the npu tensors is reported as CPU memory
    assert r["threads"] == [r["main_tid"]]  # on the allocating thread


def test_self_npu_mem_per_op_equals_the_bytes_the_script_allocated(results):
    r = result(results, "self_npu_mem_per_op")
    block = r["block"]
    assert r["empty"] == [4 * block, 0, 4]
    # The CPU fallback's result is npu memory, not CPU memory.
    assert r["add"] == [block, 0, 1]


def test_export_memory_timeline_for_npu0_writes_the_allocations(results):
    r = result(results, "memory_timeline")
    block = r["block"]
    assert (r["first"], r["peak"], r["last"]) == (block, 4 * block, 0)


def test_memory_allocated_and_friends_follow_the_blocks(results):
    r = result(results, "memory_stats")
    block = r["block"]
    assert r["held"] == 4 * block and r["peak"] == 4 * block
    assert r["after"] == 0 and r["peak_after"] == 4 * block
    assert r["reserved"] >= 4 * block and r["reserved"] % (2 << 20) == 0
