"""TORCH_MSPTI_PROFILER next to a PrivateUse1 profiler registered in torch's PrivateUse1 profiler registry.

torch's registry keeps one factory (the last registered, with a warning "overwriting") and forwards it
to kineto at the first PrivateUse1 profile. Peers (tests/torch_npu_peer/standin, loaded in a fresh
process by tests/simrun.py):

* torch_npu's built-in MSPTI backend registering through the registry -- the branch its source
  prefers (`REGISTER_PRIVATEUSE1_PROFILER`); the 2.13.0 wheel registers straight with kineto instead
  (test_torch_npu_coexistence.py). For torch_npu's backend the coexistence rule holds: with auto or mspti
  torch-mspti serves, in either load order;
* another vendor's PrivateUse1 profiler (the same code under another name): auto leaves it in place,
  mspti replaces it, off registers nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import npu_peer
import pytest
import simrun
from coexistence_checks import KERNEL_OP, assert_names_torch_npu, assert_ours_serves, is_peer_kernel, run


def _registry_peer(variant: str) -> npu_peer.Peer:
    try:
        return npu_peer.standin_peer(variant)
    except npu_peer.PeerUnavailable as exc:  # torch 2.7: no registry, so nothing registers through it
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def registry_torch_npu() -> npu_peer.Peer:
    return _registry_peer("registry")


@pytest.fixture(scope="module")
def vendor() -> npu_peer.Peer:
    return _registry_peer("vendor")


@pytest.mark.parametrize("order", ["peer_first", "ours_first"])
@pytest.mark.parametrize("mode", ["auto", "mspti"])
def test_torch_npu_backend_in_the_registry_does_not_take_the_npu_lane(registry_torch_npu, order, mode, tmp_path):
    r = run(registry_torch_npu, order, mode, tmp_path)
    assert_ours_serves(r)
    assert_names_torch_npu(r, registry_torch_npu)


def _peer_served(r: simrun.SimResult) -> None:
    kernels = simrun.kernels(r.trace)
    assert sorted(k["name"] for k in kernels) == sorted(KERNEL_OP), kernels
    assert all(is_peer_kernel(k) for k in kernels), "kernels are not the peer's"
    assert r.trace.get("torch_mspti") is None, "torch-mspti collected"
    assert r.diagnostics["plugin"]["last_trace_used_ours"] is False, r.diagnostics["plugin"]


@pytest.mark.parametrize("order", ["peer_first", "ours_first"])
def test_off_leaves_the_npu_lane_to_torch_npu_in_the_registry(registry_torch_npu, order, tmp_path):
    r = run(registry_torch_npu, order, "off", tmp_path)
    _peer_served(r)
    assert r.diagnostics["plugin"]["registered"] is False


def _other_registered(plugin: dict) -> bool:
    """Diagnostics say another factory was in torch's registry (``other_factory``; older builds said
    so with ``other_profiler: true``)."""
    return bool(plugin.get("other_factory") or plugin.get("other_profiler") is True)


def test_auto_leaves_another_vendors_profiler_in_place(vendor, tmp_path):
    r = run(vendor, "peer_first", "auto", tmp_path)
    plugin = r.diagnostics["plugin"]
    assert _other_registered(plugin) and "torch_npu" not in json.dumps(plugin.get("other_profiler")), plugin
    assert plugin["registered"] is False
    assert "TORCH_MSPTI_PROFILER=mspti" in plugin["message"], plugin["message"]
    _peer_served(r)


def test_mspti_mode_replaces_another_vendors_profiler(vendor, tmp_path):
    r = run(vendor, "peer_first", "mspti", tmp_path)
    plugin = r.diagnostics["plugin"]
    assert _other_registered(plugin) and plugin["registered"] is True, plugin
    assert "replaced" in plugin["message"], plugin["message"]
    assert_ours_serves(r)


def test_off_mode_registers_nothing_next_to_another_vendor(vendor, tmp_path):
    r = run(vendor, "peer_first", "off", tmp_path)
    assert r.diagnostics["plugin"]["registered"] is False
    _peer_served(r)


@pytest.mark.parametrize("value", ["sometimes", "MSPTI "])
def test_profiler_mode_from_the_environment(value):
    code = "import torch_mspti, json; print(json.dumps(torch_mspti._C.plugin_report()))"
    env = {**os.environ, "TORCH_MSPTI_PROFILER": value}
    r = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    if value.strip().lower() == "mspti":
        assert report["mode"] == "mspti" and report["registered"] is True
    else:
        assert "TORCH_MSPTI_PROFILER='sometimes' is ignored" in r.stderr and "is not allowed" in r.stderr
        assert report["mode"] == "auto"
