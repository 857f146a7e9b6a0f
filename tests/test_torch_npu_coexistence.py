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

import npu_peer
import pytest
import simrun
from coexistence_checks import KERNEL_OP, assert_names_torch_npu, assert_ours_serves, explain, run


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
    assert all("streamId" in k.get("args", {}) for k in kernels), "kernels are not the peer's" + explain(r)
    assert trace.get("torch_mspti") is None, "torch-mspti collected although TORCH_MSPTI_PROFILER=off"
    plugin = r.diagnostics["plugin"]
    assert plugin.get("last_trace_used_ours") is False, plugin
    assert_names_torch_npu(r, peer)


@pytest.mark.parametrize("order", simrun.PEER_ORDERS)
def test_peer_writes_no_device_process_of_its_own(peer, order, tmp_path):
    """Stricter than the lane checks above: no process row of the peer's shape ("NPU" / "Ascend NPU",
    sort index 0x1000000) for our device pid. FINDINGS.md e.5: the released backend returns that
    DeviceInfo for every PrivateUse1 trace and kineto has no way to drop a child profiler, so this holds
    only if torch-mspti finds a way to keep the peer's session from existing."""
    r = run(peer, order, "auto", tmp_path)
    rows = [
        (e["name"], e["args"])
        for e in simrun.events(r.trace)
        if e.get("ph") == "M" and e.get("pid") == 0 and e["name"].startswith("process_")
    ]
    foreign = [row for row in rows if row[1] in ({"name": "NPU"}, {"labels": "Ascend NPU"}, {"sort_index": 0x1000000})]
    assert not foreign, f"the peer's device process metadata for pid 0: {foreign}; all rows: {rows}"
