"""What PyTorch's own device-profiler tests ask of a PrivateUse1 device, checked on the simulated npu.

PyTorch's profiler tests (test/profiler/test_profiler.py, test_profiler_tree.py, ...), instantiated
for the npu device, found four places where the simulated NPU or the plugin did not behave as a
torch device does. Each test here checks that behaviour the way PyTorch's test does, written by us:

* the legacy profiler (``torch.autograd.profiler.profile(use_device="npu", use_kineto=False)``)
  needs the device's ProfilerStubs, without which every op callback throws and op times are garbage;
* ``torch.Stream(device="npu")`` without an index means the current device;
* out of memory raises ``torch.OutOfMemoryError`` saying ``Tried to allocate`` and leaves torch's
  ``[OutOfMemory]`` instant in the profile;
* no Trace span of ours ends past kineto's ``Record Window End`` (tests/test_plugin_trace.py).

Every check runs in one child process (sim_support).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks

CHECKS = r"""
import json, math, os, tempfile, warnings

def check_stream_without_index():
    torch.npu.set_device(1)
    try:
        s = torch.Stream(device="npu")
        with torch.npu.device(0):
            s0 = torch.Stream(device="npu")
        return {"index": s.device_index, "index_in_0": s0.device_index, "device": str(s.device)}
    finally:
        torch.npu.set_device(0)

def check_synchronize_bad_index():
    try:
        torch.npu.synchronize(5)
        return None
    except RuntimeError as e:
        return str(e)

def check_legacy_profiler():
    x = torch.ones(256, 256, device="npu")
    torch.npu.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.profiler.profile(use_device="npu", use_kineto=False) as p:
            y = torch.mm(x, x)
            z = y + 1
            torch.npu.synchronize()
    ops = {}
    for e in p.function_events:
        if e.name in ("aten::mm", "aten::add"):
            ops[e.name] = {"cpu_us": e.cpu_time_total, "device_us": e.device_time_total,
                           "device_type": str(e.device_type)}
    return {"ops": ops, "warnings": [str(w.message)[:200] for w in caught]}

def check_out_of_memory():
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], profile_memory=True) as prof:
        try:
            torch.empty(1024, 1024, 1024, 1024, dtype=torch.float32, device="npu")
            raised = None
        except RuntimeError as e:
            raised = {"type": type(e).__name__, "oom": isinstance(e, torch.OutOfMemoryError), "message": str(e)}
    path = os.path.join(tempfile.mkdtemp(), "oom.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    oom = [e for e in events if e.get("name") == "[OutOfMemory]"]
    # The device still works: the failed allocation took nothing.
    after = float((torch.ones(4, device="npu") * 2).sum().cpu())
    return {"raised": raised, "events": oom, "after": after}
"""


@pytest.fixture(scope="module")
def child():
    require_simulator()
    return run_checks(CHECKS, {"device_count": 2})


def test_a_stream_without_index_is_on_the_current_device(child):
    v = result(child, "stream_without_index")
    assert v["index"] == 1, v  # was: invalid device index -1
    assert v["index_in_0"] == 0, v
    assert v["device"] == "npu:1", v


def test_synchronize_of_a_device_that_does_not_exist_raises(child):
    error = result(child, "synchronize_bad_index")  # was: returned silently, as if npu:5 were idle
    assert error and "invalid device index 5 (device_count=2)" in error, error


def test_the_legacy_profiler_times_ops_on_the_npu(child):
    v = result(child, "legacy_profiler")
    assert set(v["ops"]) == {"aten::mm", "aten::add"}, v
    # torch 2.7's profiler credits the stubs' device time only to a backend literally named
    # "privateuseone" (torch/autograd/profiler.py compares use_device with that string; 2.8 and later
    # with the backend's name), so on 2.7 the npu ops show none, as torch_npu's would.
    credited = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 8)
    for name, op in v["ops"].items():
        # Without ProfilerStubs every callback threw, and op times came out as -7.4e16 us.
        assert 0 < op["cpu_us"] < 60e6, (name, op)
        assert (0 < op["device_us"] < 60e6) if credited else op["device_us"] == 0, (name, op)
    assert not [w for w in v["warnings"] if "callback" in w.lower() or "stub" in w.lower()], v["warnings"]


def test_out_of_memory_says_what_was_asked_and_leaves_the_profilers_event(child):
    v = result(child, "out_of_memory")
    raised = v["raised"]
    assert raised is not None, "a 4 TiB tensor on a 64 GiB device was allocated"
    assert raised["oom"], raised
    assert "Tried to allocate 4.00 TiB" in raised["message"], raised
    assert "64.00 GiB total capacity" in raised["message"], raised
    assert len(v["events"]) == 1, v["events"]
    args = v["events"][0]["args"]
    assert args["Device Type"] == 20 and args["Device Id"] == 0, args  # 20: c10::DeviceType::PrivateUse1
    assert args["Bytes"] >= 4 * 1024**4, args
    assert "dur" not in v["events"][0], v["events"][0]
    assert v["after"] == 8.0
