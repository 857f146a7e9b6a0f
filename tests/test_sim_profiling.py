"""Profiler-level structure of traces taken on the simulated NPU, through public APIs only
(torch.profiler.profile(activities=[CPU, PrivateUse1]) and the exported chrome JSON).

These need the torch-mspti plugin (torch_mspti.use_library); until it is present they skip.
The same checks apply to a real NPU (marker npu) where one exists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from sim_support import require_simulator, result, run_checks, run_child, run_demo

COMMON = r"""
import json, os, tempfile
from decimal import Decimal
from torch.profiler import profile, ProfilerActivity, record_function
ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

def _trace(prof):
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        data = json.load(f, parse_float=Decimal)  # exact: ts/dur are whole ns written as decimal us
    os.unlink(path)
    ev = data["traceEvents"] if isinstance(data, dict) else data
    ops = {e["args"]["External id"]: e for e in ev
           if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    return ops, kernels

def _summary(ops, kernels):
    out = []
    for k in kernels:
        op = ops.get(k.get("args", {}).get("External id"))
        start_ns = int(Decimal(k["ts"]) * 1000)
        out.append({"name": k["name"], "pid": k.get("pid"), "tid": k.get("tid"), "ts": float(k["ts"]),
                    "dur": float(k.get("dur", 0)), "start_ns": start_ns,
                    "end_ns": start_ns + int(Decimal(k.get("dur", 0)) * 1000), "args": sorted(k.get("args", {})),
                    "op": op["name"] if op else None})
    return out

def check_phases():
    a = torch.randn(128, 128, device="npu"); b = torch.randn(128, 128, device="npu")
    torch.matmul(a, b); torch.npu.synchronize()
    with profile(activities=ACT) as prof:
        for name, fn in (("matmul", torch.matmul), ("add", torch.add)):
            with record_function(name):
                for _ in range(5):
                    fn(a, b)
        with record_function("sum"):
            for _ in range(5):
                torch.sum(a)
    return _summary(*_trace(prof))

def check_two_streams_two_devices():
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    x = torch.randn(64, 64, device="npu"); y = torch.randn(64, 64, device="npu:1")
    torch.npu.synchronize()
    with profile(activities=ACT) as prof:
        for _ in range(4):
            with torch.npu.stream(s1):
                x + 1
            with torch.npu.stream(s2):
                x * 2
            y - 1
    return _summary(*_trace(prof))

def check_backward():
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).npu()
    x = torch.randn(16, 32, device="npu")
    with profile(activities=ACT) as prof:
        m(x).pow(2).mean().backward()
    return _summary(*_trace(prof))
"""

PLUGIN = "import torch_mspti, sys\nsys.exit(0 if hasattr(torch_mspti, 'use_library') else 3)\n"
CONSISTENT = {
    "MatMulV2": {"aten::mm", "aten::matmul", "aten::addmm"},
    "Add": {"aten::add"},
    "ReduceSum": {"aten::sum"},
    "Mul": {"aten::mul"},
    "Sub": {"aten::sub"},
}


def _need_plugin() -> None:
    require_simulator()
    if run_child(PLUGIN).returncode != 0:
        pytest.fail("torch-mspti profiler plugin (torch_mspti.use_library) is not importable")


@pytest.fixture(scope="module", params=["queued", "direct", pytest.param("real", marks=pytest.mark.npu)])
def traces(request):
    """The same checks on the simulator (both launch modes) and, marked npu, on real hardware."""
    if request.param == "real":
        return "direct", run_checks(COMMON, None, real=True)
    _need_plugin()
    # A fixed kernel duration longer than the host time of these small ops, so streams overlap.
    return request.param, run_checks(COMMON, {"launch_mode": request.param, "fixed_duration_ns": 200_000})


def test_kernels_carry_stream_and_type(traces):
    _, r = traces
    kernels = result(r, "phases")
    assert kernels, "no kernels in the trace"
    assert all({"stream", "type"} <= set(k["args"]) for k in kernels)
    assert {"MatMulV2", "Add", "ReduceSum"} <= {k["name"] for k in kernels}


def test_no_kernel_linked_to_an_op_that_did_not_launch_it(traces):
    mode, r = traces
    kernels = result(r, "phases")
    for k in kernels:
        if k["op"] is None:
            continue
        assert k["name"] != "MemSet", f"housekeeping kernel linked to {k['op']}"
        if k["name"] in CONSISTENT:
            assert k["op"] in CONSISTENT[k["name"]], f"{k['name']} linked to {k['op']}"
    if mode == "direct":
        assert any(k["op"] for k in kernels), "no kernel is linked at all"
    # Queued launches run on the task-queue thread after the op returned: MSPTI tags them with
    # whatever op is on its global stack then, and the plugin rejects every such link (the
    # launching thread in the API record differs from the op's thread). Unlinked is correct.


def test_queued_launches_are_rejected_not_mislinked(traces):
    mode, r = traces
    kernels = result(r, "phases")
    if mode == "queued":
        assert all(k["op"] is None for k in kernels), [k for k in kernels if k["op"]]


def test_streams_overlap_on_device_lanes_but_not_within_one(traces):
    _, r = traces
    kernels = [k for k in result(r, "two_streams_two_devices") if k["name"] in ("Add", "Mul", "Sub")]
    lanes: dict = {}
    for k in kernels:
        lanes.setdefault((k["pid"], k["tid"]), []).append(k)
    for ks in lanes.values():
        ks.sort(key=lambda k: k["start_ns"])
        for a, b in zip(ks, ks[1:], strict=False):
            # exact ns: read as floats, touching kernels near 5e12 us can differ by one ulp (~1 ns)
            assert a["end_ns"] <= b["start_ns"], f"kernels overlap within one stream: {a} {b}"
    adds = [k for k in kernels if k["name"] == "Add"]
    muls = [k for k in kernels if k["name"] == "Mul"]
    assert any(a["ts"] < m["ts"] + m["dur"] and m["ts"] < a["ts"] + a["dur"] for a in adds for m in muls)


def test_two_devices_give_two_lane_groups(traces):
    _, r = traces
    kernels = result(r, "two_streams_two_devices")
    dev0 = {k["pid"] for k in kernels if k["name"] in ("Add", "Mul")}
    dev1 = {k["pid"] for k in kernels if k["name"] == "Sub"}
    assert dev0 and dev1 and dev0.isdisjoint(dev1)


def test_backward_kernels_link_to_autograd_ops(traces):
    mode, r = traces
    linked = [k["op"] for k in result(r, "backward") if k["op"]]
    if mode == "queued":
        assert linked == []  # queued launches are rejected, never mislinked
        return
    assert any("backward" in op.lower() or op in ("aten::mm", "aten::t") for op in linked)
    assert any("backward" in op.lower() for op in linked), linked


def test_demo_trace_passes_structural_checks(tmp_path):
    _need_plugin()
    proc, trace = run_demo(tmp_path / "trace.json", workload="phases", size=128, steps=1)
    ev = trace["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert kernels and any("External id" in e.get("args", {}) for e in kernels)
    assert "linked" in proc.stdout
    # every device lane draws as one track: no kernels overlap, user-range spans enclose their rows (exact ns)
    lanes = simrun.exact_slices(tmp_path / "trace.json")
    assert any(e["cat"] == "gpu_user_annotation" for e in lanes)
    assert not simrun.lane_violations(lanes), simrun.lane_violations(lanes)[:3]


_KEY_AVERAGES = r"""
import json, torch, torch_mspti
torch_mspti.sim.enable(launch_mode="direct")
from torch.autograd import DeviceType
from torch.profiler import profile, ProfilerActivity, record_function
x = torch.randn(96, 96, device="npu")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    for i in range(3):
        with record_function(f"ProfilerStep#{i}"):
            with record_function("inner"):
                y = x @ x
            y = (y + 1).relu()
    torch.npu.synchronize()
rows = [{"key": e.key, "device": e.device_type == DeviceType.PrivateUse1, "user": bool(e.is_user_annotation),
         "self": e.self_device_time_total} for e in prof.key_averages()]
spans = [e.time_range.elapsed_us() for e in prof.events()
         if e.device_type == DeviceType.PrivateUse1 and e.is_user_annotation]
work = [e.time_range.elapsed_us() for e in prof.events()
        if e.device_type == DeviceType.PrivateUse1 and not e.is_user_annotation]
print(json.dumps({"rows": rows, "spans": spans, "work": work, "table": prof.key_averages().table()}))
"""


def test_key_averages_self_device_time_of_user_ranges_is_as_the_readme_says():
    """README "User ranges": the device time of the work is counted once (the table's Self NPU total,
    the device rows, the CPU ops that launched it); a user range's CPU row has no Self NPU; its
    device-lane span is a row of its own (device NPU, user annotation) whose Self NPU is the span's
    length, which torch 2.13 gives every GPU_USER_ANNOTATION (CUDA's too, pytorch/pytorch#130730)."""
    require_simulator()
    proc = run_child(_KEY_AVERAGES)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    rows, work = out["rows"], sum(out["work"])
    assert work > 0 and out["spans"], out
    close = pytest.approx(work, rel=1e-6, abs=0.01)
    assert sum(r["self"] for r in rows if r["device"] and not r["user"]) == close  # device rows: once
    assert sum(r["self"] for r in rows if not r["device"]) == close  # the CPU ops that launched it: once
    cpu_ranges = [r for r in rows if r["user"] and not r["device"]]
    assert {r["key"] for r in cpu_ranges} == {"ProfilerStep*", "inner"} and all(r["self"] == 0 for r in cpu_ranges)
    device_ranges = [r for r in rows if r["user"] and r["device"]]
    assert {r["key"] for r in device_ranges} == {"ProfilerStep*", "inner"}
    assert sum(r["self"] for r in device_ranges) == pytest.approx(sum(out["spans"]), rel=1e-6, abs=0.01)
    # the table's total counts the work, not the spans
    total = next(ln for ln in out["table"].splitlines() if ln.startswith("Self NPU time total")).split(":")[1].strip()
    value, unit = (total[:-2], total[-2:]) if total[-2:] in ("ms", "us") else (total[:-1], total[-1:])
    assert float(value) * {"us": 1.0, "ms": 1e3, "s": 1e6}[unit] == pytest.approx(work, rel=1e-2), total
