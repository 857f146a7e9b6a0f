"""torch-mspti next to torch_npu's built-in MSPTI backend: which one serves the NPU lane.

Every torch_npu release on PyPI (2.12.0.post3, 2.13.0, 2.14.0) carries a kineto profiler of its own
that collects NPU kernels through MSPTI (tests/torch_npu_peer/FINDINGS.md). These tests define
"fixed" for that coexistence:

* with TORCH_MSPTI_PROFILER=auto or mspti, whichever is loaded first, the trace's NPU lane is
  torch-mspti's: its health report says it collected, every kernel launched in the window is in the
  trace exactly once on torch-mspti's lanes and linked to the op that launched it, the peer adds no
  kernel, flow or lane, nothing raises, and diagnostics name the peer and say ours served;
* with TORCH_MSPTI_PROFILER=off the peer serves and diagnostics say ours did not.

The peer is the stand-in (tests/torch_npu_peer/standin, always) or the real libtorch_npu.so of the
torch-npu 2.13.0 wheel (downloaded once; skipped with the reason when that is impossible). Orders:
the peer loaded before torch_mspti is imported, after it, or after it and after a first PrivateUse1
profile (kineto then runs our session before the peer's). Each case runs in its own process
(tests/simrun.py with ``peer=``), both backends reaching one MSPTI simulator through a logging shim.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import coexistence_checks
import npu_peer
import pytest
import simrun
from coexistence_checks import (
    KERNEL_OP,
    assert_names_torch_npu,
    assert_ours_serves,
    call_shape,
    explain,
    is_peer_kernel,
    run,
)


@pytest.fixture(scope="session", params=["standin", "real"])
def peer(request) -> npu_peer.Peer:
    if request.param == "standin":
        return npu_peer.standin_peer()
    try:
        return npu_peer.real_peer()
    except npu_peer.PeerUnavailable as exc:
        pytest.skip(f"real torch_npu wheel unavailable: {exc}")


@pytest.mark.parametrize("order", simrun.PEER_ORDERS)
@pytest.mark.parametrize("mode", ["auto", "mspti"])
def test_torch_mspti_serves_the_npu_lane(peer, order, mode, tmp_path):
    r = run(peer, order, mode, tmp_path, profiles=2)
    for profile in range(2):
        assert_ours_serves(r, profile)
    assert_names_torch_npu(r, peer)


@pytest.mark.parametrize("order", simrun.PEER_ORDERS)
def test_off_lets_the_peer_serve(peer, order, tmp_path):
    r = run(peer, order, "off", tmp_path)
    trace = r.trace
    kernels = simrun.kernels(trace)
    assert sorted(k["name"] for k in kernels) == sorted(KERNEL_OP), explain(r)
    assert all(is_peer_kernel(k) for k in kernels), "kernels are not the peer's" + explain(r)
    assert trace.get("torch_mspti") is None, "torch-mspti collected although TORCH_MSPTI_PROFILER=off"
    plugin = r.diagnostics["plugin"]
    assert plugin.get("last_trace_used_ours") is False, plugin
    assert_names_torch_npu(r, peer)


@pytest.mark.parametrize("order", simrun.PEER_ORDERS)
def test_device_process_is_described_once_whatever_the_order(peer, order, tmp_path):
    """The peer returns its DeviceInfo {0, "NPU", "Ascend NPU", 0x1000000} for every PrivateUse1
    trace and kineto cannot drop a child profiler (FINDINGS.md e.5): torch-mspti describes device 0
    the same way, so the trace never holds two conflicting descriptions of one device process."""
    r = run(peer, order, "auto", tmp_path)
    coexistence_checks.assert_one_description_of_device_0(r.trace)


HARDWARE_CHILD = r"""
import importlib.metadata, json, os, sys, tempfile
os.environ["TASK_QUEUE_ENABLE"] = "0"  # launches inside their ops, so they can be linked
import torch
if sys.argv[1] == "peer_first":
    import torch_npu, torch_mspti
else:
    import torch_mspti, torch_npu
from torch.profiler import ProfilerActivity, profile
x = torch.randn(64, 64, device="npu")
torch.npu.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    for _ in range(3):
        y = (x @ x + 1).sum()
path = tempfile.mktemp(suffix=".json")
prof.export_chrome_trace(path)
print("@@" + json.dumps({"trace": path, "version": importlib.metadata.version("torch_npu"),
                         "plugin": torch_mspti.diagnostics(load_library=False).to_dict()["plugin"]}, default=str))
"""


@pytest.mark.npu
@pytest.mark.parametrize("order", ["peer_first", "ours_first"])
@pytest.mark.parametrize("mode", ["auto", "mspti", "off"])
def test_real_torch_npu_on_ascend(order, mode):
    """The same rule with the real torch_npu and CANN on an Ascend device (marker npu)."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "TORCH_MSPTI_PROFILER": mode}
    proc = subprocess.run(
        [sys.executable, "-c", HARDWARE_CHILD, order], capture_output=True, text=True, env=env, timeout=600
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    out = json.loads(lines[-1][2:])
    trace = json.loads(Path(out["trace"]).read_text())
    kernels = simrun.kernels(trace)
    assert kernels, "no kernels in the trace"
    other = json.dumps(out["plugin"].get("other_profiler"))
    assert "torch_npu" in other and out["version"] in other, out["plugin"]
    if mode == "off":
        assert out["plugin"]["last_trace_used_ours"] is False
        assert trace.get("torch_mspti") is None
        return
    assert trace["torch_mspti"]["state"] == "processed" and not trace["torch_mspti"]["errors"], trace["torch_mspti"]
    assert out["plugin"]["last_trace_used_ours"] is True
    assert not any(is_peer_kernel(k) for k in kernels), "kernels of torch_npu's backend in the trace"
    keys = [(k["pid"], k["tid"], k["ts"], k["name"]) for k in kernels]
    assert len(keys) == len(set(keys)), "a kernel appears twice"
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in simrun.metadata(trace, "thread_name")}
    assert not [n for n in threads.values() if n.startswith("NPU stream")], threads
    for pid in {k["pid"] for k in kernels}:
        rows = [e["args"] for e in simrun.metadata(trace, "process_sort_index") if e["pid"] == pid]
        assert rows and rows[-1] == {"sort_index": 5_000_000 + pid}, rows
    ops = {e["args"]["External id"] for e in simrun.cpu_ops(trace) if "External id" in e.get("args", {})}
    linked = [k for k in kernels if k.get("args", {}).get("External id") in ops]
    assert linked, "no kernel is linked to an op"


@pytest.mark.parametrize(("order", "mode"), [("peer_first", "off"), ("ours_first_profiled", "auto")])
def test_standin_makes_the_calls_the_real_backend_makes(order, mode, tmp_path):
    """The stand-in stays faithful: the same MSPTI call sequence as the released binary, alone and
    after torch-mspti took the subscriber (its failed-Subscribe path)."""
    try:
        real = npu_peer.real_peer()
    except npu_peer.PeerUnavailable as exc:
        pytest.skip(f"real torch_npu wheel unavailable: {exc}")
    standin = npu_peer.standin_peer()
    shapes = {p.kind: call_shape(run(p, order, mode, tmp_path / p.kind), p) for p in (real, standin)}
    assert any(line.startswith("peer msptiSubscribe") for line in shapes["real"]), shapes["real"]
    assert shapes["standin"] == shapes["real"], "\n".join(
        difflib.unified_diff(shapes["real"], shapes["standin"], "real", "standin", lineterm="")
    )


@pytest.mark.parametrize("order", ["peer_first", "ours_first"])
def test_when_our_library_is_refused_the_user_is_told_the_peer_serves(peer, order, tmp_path):
    """torch-mspti's session fails (its TORCH_MSPTI_LIBRARY does not exist) while torch_npu's backend
    finds MSPTI on its own: the lane holds the peer's kernels, so neither the warning nor
    plugin.message may say the lane is empty or that the peer is "kept quiet"."""
    missing = tmp_path / "missing" / "libmspti.so"
    r = simrun.run(
        coexistence_checks.WORKLOAD,
        tmp_path,
        peer=(peer, order),
        env={"TORCH_MSPTI_PROFILER": "auto", "TORCH_MSPTI_LIBRARY": str(missing)},
        timeout=300,
    )
    kernels = simrun.kernels(r.trace)
    assert sorted(k["name"] for k in kernels) == sorted(KERNEL_OP), explain(r)
    assert all(is_peer_kernel(k) for k in kernels), "the kernels are not the peer's" + explain(r)
    warned = r.doctor_warnings()
    assert len(warned) == 1, warned
    assert "will be empty" not in warned[0] and "torch_npu" in warned[0] and peer.version in warned[0], warned[0]
    assert str(missing) in warned[0], warned[0]  # and why ours collected nothing
    plugin = r.diagnostics["plugin"]
    assert plugin["last_trace_used_ours"] is False, plugin
    message = plugin["message"]
    assert "kept quiet" not in message and "did not collect" in message, message
    assert "torch_npu" in message and peer.version in message, message


@pytest.mark.parametrize("order", simrun.PEER_ORDERS)
def test_plugin_message_names_the_peer_in_every_load_order(peer, order, tmp_path):
    r = run(peer, order, "auto", tmp_path)
    assert_ours_serves(r)
    message = r.diagnostics["plugin"]["message"]
    assert "served the last trace's NPU lane" in message, message
    assert "torch_npu" in message and peer.version in message, message
