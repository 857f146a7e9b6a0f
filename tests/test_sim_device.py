"""The simulated NPU device (torch_mspti.sim): tensors, ops, autograd, streams, events, timeline,
launch modes and the refusals of enable(). Every check runs in a child process (sim_support)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks, run_child

CHECKS = r"""
import ctypes, os, time
import torch_mspti.sim as sim

def _lib():
    return ctypes.CDLL(sim.settings()["simulator_library"], mode=os.RTLD_LOCAL)

def check_placement():
    a = torch.randn(8, 8, device="npu")
    b = torch.ones(3, device="npu:1")
    c = torch.zeros(2, 2).to("npu:1")
    return [str(a.device), str(b.device), str(c.device), a.is_npu, torch.npu.device_count()]

def check_roundtrip():
    x = torch.randn(33, 17)
    y = x.to("npu").to("npu:1").cpu()
    h = x.half().npu().float().cpu()
    return [bool(torch.equal(x, y)), bool(torch.equal(x.half().float(), h))]

def check_fallback_values():
    torch.manual_seed(0)
    a, b = torch.randn(16, 24), torch.randn(24, 8)
    an, bn = a.npu(), b.npu()
    pairs = {
        "mm": (a @ b, an @ bn),
        "add": (a + 1.5 * a, an + 1.5 * an),
        "sum_dim": (a.sum(1), an.sum(1)),
        "softmax": (a.softmax(-1), an.softmax(-1)),
        "transpose_contig": (a.t().contiguous(), an.t().contiguous()),
        "slice": (a[2:9:3, 1:], an[2:9:3, 1:]),
        "cat": (torch.cat([a, a]), torch.cat([an, an])),
        "index_select": (a.index_select(0, torch.tensor([3, 1])), an.index_select(0, torch.tensor([3, 1]).npu())),
        "where": (torch.where(a > 0, a, -a), torch.where(an > 0, an, -an)),
        "cumsum": (a.cumsum(0), an.cumsum(0)),
        "nonzero": (torch.nonzero(a > 1), torch.nonzero(an > 1)),
        "sort": (a.sort(1).values, an.sort(1).values),
        "topk": (a.topk(3).indices, an.topk(3).indices),
    }
    ai, ani = a.clone(), an.clone()
    ai.mul_(2).add_(1); ani.mul_(2).add_(1)
    pairs["inplace"] = (ai, ani)
    out = torch.empty(0, device="npu")
    torch.add(an, an, out=out)
    pairs["out_resized"] = (a + a, out)
    aw = an.clone()
    v = aw.view(4, 4, 24)
    v[0].zero_()
    pairs["view_write"] = (a.view(4, 4, 24).index_fill(0, torch.tensor([0]), 0).view(16, 24), aw)
    diffs = {k: float((c.double() - n.cpu().double()).abs().max()) if c.numel() else 0.0
             for k, (c, n) in pairs.items()}
    devices = {k: str(n.device) for k, (c, n) in pairs.items()}
    return {"diffs": diffs, "devices": devices, "item": an.sum().item() - a.sum().item()}

def check_autograd_optimizer():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    dev = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    dev.load_state_dict(ref.state_dict()); dev = dev.npu()
    x, t = torch.randn(8, 12), torch.randn(8, 4)
    losses = []
    for model, xx, tt in ((ref, x, t), (dev, x.npu(), t.npu())):
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xx), tt)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    pdiff = max(float((p.detach() - q.detach().cpu()).abs().max())
                for p, q in zip(ref.parameters(), dev.parameters()))
    return {"losses": losses, "pdiff": pdiff, "grad_device": str(dev[0].weight.grad.device)}

def check_streams_events():
    default = torch.npu.current_stream()
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        inside = torch.npu.current_stream().stream_id
        start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        start.record()
        x = torch.randn(128, 128, device="npu")
        for _ in range(5):
            x = x @ x
        end.record()
    end.synchronize()
    s1 = torch.npu.Stream(device="npu:1")
    return {"default": default.stream_id, "new": s.stream_id, "inside": inside,
            "after": torch.npu.current_stream().stream_id, "elapsed_ms": start.elapsed_time(end),
            "query": end.query(), "dev1_stream": [s1.device_index, s1.stream_id]}

def check_synchronize_waits():
    lib = _lib()
    lib.msptiSimStreamTail.restype = ctypes.c_uint64
    x = torch.randn(64, 64, device="npu")
    for _ in range(20):
        x = x + 1
    torch.npu.synchronize()
    tail = lib.msptiSimStreamTail(0, 1)
    return {"tail_ns": tail, "now_ns": time.time_ns()}

def check_kernels_launched():
    before = sim.simulator_stats()["kernels_launched"]
    c0 = sim.device_counters()
    x = torch.randn(32, 32, device="npu")
    for _ in range(10):
        x = torch.mm(x, x).sum(0, keepdim=True).expand(32, 32).contiguous()
    torch.npu.synchronize()
    after = sim.simulator_stats()["kernels_launched"]
    c1 = sim.device_counters()
    return {"sim_delta": after - before, "ops_delta": c1["ops"] - c0["ops"],
            "housekeeping": c1["housekeeping"], "mode": torch.ops.npu_sim.launch_mode()}

def check_launch_timing():
    lib = _lib()
    x = torch.randn(16, 16, device="npu")
    torch.npu.synchronize()
    before = sim.simulator_stats()["kernels_launched"]
    y = x + x
    right_after = sim.simulator_stats()["kernels_launched"] - before
    torch.npu.synchronize()
    drained = sim.simulator_stats()["kernels_launched"] - before
    return {"right_after": right_after, "drained": drained}

def check_idempotent_enable():
    import inspect
    # what enable() applied, as its arguments (settings() adds the libraries and the MSPTI in use)
    s = {k: v for k, v in sim.settings().items() if k in inspect.signature(sim.enable).parameters}
    sim.enable(**s)
    try:
        sim.enable(device_count=s["device_count"] + 1, launch_mode=s["launch_mode"])
        return "no error"
    except RuntimeError as e:
        return str(e)
"""


@pytest.fixture(scope="module")
def queued():
    require_simulator()
    return run_checks(CHECKS, {"device_count": 2, "launch_mode": "queued", "queue_pickup_us": 30000})


@pytest.fixture(scope="module")
def direct():
    require_simulator()
    return run_checks(CHECKS, {"device_count": 2, "launch_mode": "direct"})


def test_tensors_on_two_devices(queued):
    assert result(queued, "placement") == ["npu:0", "npu:1", "npu:1", True, 2]


def test_roundtrip_is_exact(queued):
    assert result(queued, "roundtrip") == [True, True]


@pytest.mark.parametrize("mode", ["queued", "direct"])
def test_fallback_matches_cpu(mode, request):
    v = result(request.getfixturevalue(mode), "fallback_values")
    bad = {k: d for k, d in v["diffs"].items() if d > 1e-4}
    assert not bad, bad
    assert set(v["devices"].values()) == {"npu:0"}
    assert abs(v["item"]) < 1e-3


def test_autograd_and_optimizer(queued):
    v = result(queued, "autograd_optimizer")
    assert v["grad_device"] == "npu:0"
    assert abs(v["losses"][0] - v["losses"][1]) < 1e-5
    assert v["pdiff"] < 1e-5


def test_streams_and_events(queued):
    v = result(queued, "streams_events")
    assert v["default"] == 1 and v["new"] >= 2 and v["inside"] == v["new"] and v["after"] == 1
    assert v["elapsed_ms"] > 0 and v["query"] is True
    assert v["dev1_stream"][0] == 1 and v["dev1_stream"][1] >= 2


@pytest.mark.parametrize("mode", ["queued", "direct"])
def test_synchronize_waits_for_timeline(mode, request):
    v = result(request.getfixturevalue(mode), "synchronize_waits")
    assert v["tail_ns"] > 0 and v["now_ns"] >= v["tail_ns"]


@pytest.mark.parametrize("mode", ["queued", "direct"])
def test_ops_launch_kernels(mode, request):
    v = result(request.getfixturevalue(mode), "kernels_launched")
    assert v["mode"] == mode
    assert v["ops_delta"] >= 30  # mm, sum, contiguous per iteration (expand is a view)
    assert v["sim_delta"] >= v["ops_delta"]
    assert v["housekeeping"] >= 1  # allocator work outside any op


def test_queued_mode_launches_after_the_op(queued):
    v = result(queued, "launch_timing")
    assert v["right_after"] == 0 and v["drained"] >= 1


def test_direct_mode_launches_inside_the_op(direct):
    v = result(direct, "launch_timing")
    assert v["right_after"] >= 1


def test_enable_is_idempotent_and_refuses_other_settings(queued):
    msg = result(queued, "idempotent_enable")
    assert "already enabled" in msg


def _child_error(code: str) -> str:
    proc = run_child(code)
    return proc.stdout + proc.stderr


def test_never_activates_by_itself():
    require_simulator()
    out = _child_error(
        "import torch, torch_mspti.sim\nprint(torch._C._get_privateuse1_backend_name(), hasattr(torch, 'npu'))"
    )
    assert "privateuseone False" in out


def test_refuses_when_torch_npu_loaded():
    require_simulator()
    out = _child_error(
        "import sys, types, torch\nsys.modules['torch_npu'] = types.ModuleType('torch_npu')\n"
        "import torch_mspti.sim as s\ntry:\n    s.enable()\nexcept RuntimeError as e:\n"
        "    print('REFUSED', e)\n"
    )
    assert "REFUSED" in out and "torch_npu is imported" in out


def test_refuses_other_backend_name():
    require_simulator()
    out = _child_error(
        "import torch\ntorch.utils.rename_privateuse1_backend('foo')\n"
        "import torch_mspti.sim as s\ntry:\n    s.enable()\nexcept RuntimeError as e:\n"
        "    print('REFUSED', e)\n"
    )
    assert "REFUSED" in out and "'foo'" in out
