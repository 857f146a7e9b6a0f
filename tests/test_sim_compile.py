"""torch.compile with its default backend (inductor) on the simulated NPU (torch_mspti.sim.inductor):
inductor's CPU code generation serves the device, each compiled kernel runs on the host memory of the
npu tensors and appears as an NPU kernel of its own name on the device lane, linked to an op of that
name. A compiled training step must compute what eager CPU computes and profile with linked kernels;
cpp_wrapper mode is refused with an error naming aot_eager. One child process (sim_support), direct
launches (kernels launched inside their ops, so that they can be linked).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks

CHECKS = r"""
import json, os, tempfile
import torch._inductor.config
from torch.profiler import ProfilerActivity, profile

# Compile for real: a kernel cached by an earlier run (another build of this code) would hide
# what this build generates.
torch._inductor.config.force_disable_caches = True

def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

def _loss(model, x):
    return model(x).pow(2).mean()

def _step(loss_fn, opt, x):
    opt.zero_grad()
    loss = loss_fn(x)
    loss.backward()
    opt.step()
    return loss

def check_compiled_training_step():
    torch._dynamo.reset()
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
    ref = _model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    model = _model().to("npu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # The default backend (inductor), over the loss too: the compiled graphs hold reductions (the
    # loss's mean forward, the biases' gradients backward) as well as pointwise ops.
    compiled = torch.compile(lambda inp: _loss(model, inp))
    eager = lambda inp: _loss(ref, inp)
    losses = [(float(_step(compiled, opt, x.to("npu")).cpu()), float(_step(eager, ref_opt, x))) for _ in range(2)]
    torch.npu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        _step(compiled, opt, x.to("npu"))
        torch.npu.synchronize()
    _step(eager, ref_opt, x)
    diff = max(float((p.detach().cpu() - q.detach()).abs().max()) for p, q in zip(model.parameters(), ref.parameters()))
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    rows = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    return {
        "losses": losses,
        "param_diff": diff,
        "compiled": [(e["name"], e["pid"], e["tid"], ops.get(e["args"].get("External id"), {}).get("name"))
                     for e in rows if e["name"].startswith("cpp_")],
        "matmuls_linked": [ops.get(e["args"].get("External id"), {}).get("name") is not None
                           for e in rows if e["name"] == "MatMulV2"],
        "stream": int(torch.npu.current_stream().stream_id),
    }

def check_random_and_index_ops():
    # dropout, rand_like and arange lower to inductor's index_expr/random ops (CPU code generation's
    # arange path): they must compile on npu, give what eager gives (arange exactly; dropout keeps
    # each element or zeroes it, scaling kept ones by 1/(1-p)), and profile as linked NPU kernels.
    torch._dynamo.reset()
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(2))
    xn = x.to("npu")
    ar = torch.compile(lambda t: t + torch.arange(t.shape[-1], device=t.device))
    dr = torch.compile(lambda t: torch.nn.functional.dropout(t, 0.5, True))
    rl = torch.compile(lambda t: t + torch.rand_like(t))
    arange_ok = torch.equal(ar(xn).cpu(), x + torch.arange(32))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        d = dr(xn).cpu()
        u = (rl(xn) - xn).cpu()
        torch.npu.synchronize()
    kept = d != 0
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    compiled = [(e["name"], ops.get(e["args"].get("External id"), {}).get("name"))
                for e in events if e.get("ph") == "X" and e.get("cat") == "kernel" and e["name"].startswith("cpp_")]
    return {
        "arange_equal": arange_ok,
        "dropout_kept_share": float(kept.float().mean()),
        "dropout_scaled": bool(torch.allclose(d[kept], 2 * x[kept])),
        "rand_in_unit": bool(((u >= 0) & (u < 1)).all()) and float(u.std()) > 0.1,
        "compiled": compiled,
    }

def check_cpp_wrapper_refused():
    import torch._inductor.config as cfg
    torch._dynamo.reset()
    f = torch.compile(lambda t: (t * 2).relu())
    with cfg.patch(cpp_wrapper=True):
        try:
            f(torch.ones(4, device="npu"))
        except Exception as exc:
            return str(exc)
    return None
"""


@pytest.fixture(scope="module")
def results():
    require_simulator()
    return run_checks(CHECKS, enable={"launch_mode": "direct"}, timeout=480)


def test_compiled_training_step_computes_what_eager_cpu_does(results):
    r = result(results, "compiled_training_step")
    for got, want in r["losses"]:
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert r["param_diff"] < 1e-5


def test_compiled_kernels_are_npu_kernels_on_the_device_lane_linked_to_their_op(results):
    r = result(results, "compiled_training_step")
    # Forward and backward each have at least one fused kernel (relu; threshold_backward & co.),
    # and the reductions are compiled kernels too (the loss's mean; the biases' gradients).
    assert len(r["compiled"]) >= 2, r["compiled"]
    assert any("mean" in name or "sum" in name for name, *_ in r["compiled"]), r["compiled"]
    for name, pid, tid, op in r["compiled"]:
        assert (pid, tid) == (0, r["stream"]), (name, pid, tid)
        assert op == name, f"kernel {name} is linked to {op!r}"
    # What inductor leaves to ATen (the matmuls) runs as the device's ops, linked as well.
    assert r["matmuls_linked"] and all(r["matmuls_linked"]), r["matmuls_linked"]


def test_random_and_index_ops_compile_and_run_as_linked_npu_kernels(results):
    r = result(results, "random_and_index_ops")
    assert r["arange_equal"], r
    assert 0.35 < r["dropout_kept_share"] < 0.65 and r["dropout_scaled"], r
    assert r["rand_in_unit"], r
    assert len(r["compiled"]) >= 2, r["compiled"]  # dropout's and rand_like's kernels
    for name, op in r["compiled"]:
        assert op == name, f"kernel {name} is linked to {op!r}"


def test_cpp_wrapper_mode_is_refused_naming_aot_eager(results):
    message = result(results, "cpp_wrapper_refused")
    assert message is not None and "aot_eager" in message and "cpp_wrapper" in message, message
