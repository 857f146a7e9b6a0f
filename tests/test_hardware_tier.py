"""The hardware test tier: device pinning of xdist workers, the npu/cann probes, and the tests that
only run on an Ascend machine (marked ``npu`` / ``cann``; skipped with a reason elsewhere)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import hw_support
import pytest
from hw_support import pin_device

TESTS = Path(__file__).resolve().parent


# ---- pinning (pure) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("worker", "expected"),
    [("gw0", "0"), ("gw1", "1"), ("gw2", "2"), ("gw3", "3"), ("gw4", "0"), ("gw5", "1")],
)
def test_pin_device_round_robin_over_four_devices(worker, expected):
    assert pin_device(worker, "0,1,2,3") == expected


def test_pin_device_uses_the_listed_ids_not_positions():
    devices = " 4, 5 ,6,7 "
    assert [pin_device(f"gw{i}", devices) for i in range(6)] == ["4", "5", "6", "7", "4", "5"]
    assert pin_device("gw3", ["2"]) == "2"


@pytest.mark.parametrize("worker", ["master", "gw", "gwx", "", "0"])
def test_pin_device_rejects_non_worker_ids(worker):
    with pytest.raises(ValueError, match="worker id"):
        pin_device(worker, "0,1")


@pytest.mark.parametrize("devices", ["", " , ", "0,npu1", "a"])
def test_pin_device_rejects_bad_device_lists(devices):
    with pytest.raises(ValueError, match="TORCH_MSPTI_TEST_DEVICES"):
        pin_device("gw0", devices)


def test_pin_worker_from_env_only_in_a_worker_with_devices():
    env = {"TORCH_MSPTI_TEST_DEVICES": "0,1,2,3"}
    assert hw_support.pin_worker_from_env(env) is None  # the controller / a run without -n
    assert "ASCEND_RT_VISIBLE_DEVICES" not in env
    env["PYTEST_XDIST_WORKER"] = "gw6"
    assert hw_support.pin_worker_from_env(env) == "2"
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "2"
    assert hw_support.pin_worker_from_env({"PYTEST_XDIST_WORKER": "gw1"}) is None


# ---- probes ----------------------------------------------------------------------------------


def test_npu_probe_names_what_is_missing(tmp_path):
    ok, reason = hw_support.npu_status(
        {}, has_module=lambda name: False, which=lambda name: None, dev_glob=str(tmp_path / "davinci*")
    )
    assert not ok
    assert "torch_npu is not installed" in reason and "no Ascend device" in reason


def test_npu_probe_accepts_device_nodes_and_cann(tmp_path):
    (tmp_path / "davinci0").touch()
    ok, reason = hw_support.npu_status(
        {"ASCEND_HOME_PATH": str(tmp_path)},
        has_module=lambda name: name == "torch_npu",
        which=lambda name: None,
        dev_glob=str(tmp_path / "davinci[0-9]*"),
    )
    assert ok, reason


def test_cann_probe_finds_a_real_library_but_not_the_simulator(tmp_path):
    lib = tmp_path / "tools" / "mspti" / "lib64" / "libmspti.so"
    lib.parent.mkdir(parents=True)
    lib.touch()
    assert hw_support.find_real_libmspti({"ASCEND_HOME_PATH": str(tmp_path)}) == str(lib)
    sim = tmp_path / "libmspti_sim.so"
    sim.touch()
    env = {"TORCH_MSPTI_LIBRARY": str(sim), "ASCEND_HOME_PATH": str(tmp_path / "nowhere")}
    found = hw_support.find_real_libmspti(env)
    assert found is None or "mspti_sim" not in found


# ---- the conftest in real xdist workers --------------------------------------------------------

_INNER_TESTS = """
import os
import pytest

EXPECTED = {"gw0": "6", "gw1": "7"}

@pytest.mark.parametrize("i", range(6))
def test_pinned(i):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    assert os.environ["ASCEND_RT_VISIBLE_DEVICES"] == EXPECTED[worker]

@pytest.mark.npu
def test_needs_npu():
    pass
"""


@pytest.mark.skipif(shutil.which("npu-smi") is not None, reason="the inner npu test would run on this machine")
def test_xdist_workers_pin_themselves_and_npu_tests_skip(tmp_path):
    pytest.importorskip("xdist")
    for name in ("conftest.py", "hw_support.py"):
        shutil.copy(TESTS / name, tmp_path / name)
    (tmp_path / "test_inner.py").write_text(_INNER_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_RT_VISIBLE_DEVICES"}
    env["TORCH_MSPTI_TEST_DEVICES"] = "6,7"
    # Only xdist is loaded (fast worker start); -p is forwarded to the workers.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "xdist.plugin",
            "-n",
            "2",
            "-rs",
            "-p",
            "no:cacheprovider",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "6 passed, 1 skipped" in out, out
    assert "[npu] needs Ascend hardware" in out, out


# ---- hardware (skipped without it) -------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.mark.cann
def test_doctor_finds_the_real_libmspti(tmp_path):
    proc = _cli("doctor", "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    library = report["library"]
    assert library["available"], library
    assert "mspti_sim" not in (library["path"] or "")
    assert library["capabilities"]["kernel"], library


@pytest.mark.npu
def test_real_device_trace_links_kernels_to_their_ops(tmp_path):
    devices = os.environ.get(hw_support.DEVICES_ENV)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if devices and worker:
        assert os.environ[hw_support.VISIBLE_ENV] == pin_device(worker, devices)
    trace = tmp_path / "trace.json"
    demo = _cli("demo", "--device", "real", "--workload", "mlp", "--out", str(trace), cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    check = _cli("check", str(trace), "--json", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
