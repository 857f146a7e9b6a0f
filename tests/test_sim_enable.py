"""torch_mspti.sim.enable(): argument validation, the user's choice of simulator library, and a
failed call leaving the PrivateUse1 backend name alone. Each scenario runs in a child process
(enabling renames PrivateUse1 for good) and prints one JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator

_MARK = "@@RESULT@@"


@pytest.fixture(autouse=True)
def _needs_simulator():
    require_simulator()


def _child(code: str, **env: str) -> dict:
    """Run ``code`` (which sets ``result``) after ``import torch, torch_mspti``; return ``result``."""
    source = "import json, torch, torch_mspti\nfrom torch_mspti import sim\nresult = {}\n"
    source += textwrap.dedent(code)
    source += f"\nresult['backend'] = torch._C._get_privateuse1_backend_name()\nprint({_MARK!r} + json.dumps(result))\n"
    full_env = {k: v for k, v in os.environ.items() if k != "TORCH_MSPTI_LIBRARY"}
    full_env.update(env)
    proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=240, env=full_env)
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK) :])
    raise AssertionError(f"child failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


_PROFILE = """
from torch.profiler import profile, ProfilerActivity
x = torch.ones(8, device="npu")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
    y = x + 1
    torch.npu.synchronize()
d = torch_mspti.diagnostics().to_dict()
result.update(settings=sim.settings()["simulator_library"], library=d["library"]["path"],
              kernels=d["last_session"]["rows"]["kernels"], linked=d["last_session"]["linked_rows"])
"""


_TRY_ENABLE = """
try:
    sim.enable()
except RuntimeError as exc:
    result['error'] = str(exc)
result['library_path'] = torch_mspti.config.library_path
result['enabled'] = sim.is_enabled()
"""


def test_enable_honours_torch_mspti_library_naming_a_simulator():
    import torch_mspti

    chosen = torch_mspti.simulator_library("8.0.RC3")
    # before 26.0 a device is known only through the preloaded library (mspti.md 5.5)
    r = _child("sim.enable(launch_mode='direct')\n" + _PROFILE, TORCH_MSPTI_LIBRARY=chosen, LD_PRELOAD=chosen)
    assert r["settings"] == r["library"] == chosen  # device and plugin share the chosen simulator
    assert r["kernels"] == r["linked"] == 1 and r["backend"] == "npu"


def test_enable_honours_use_library_naming_a_simulator():
    import torch_mspti

    r = _child(
        "chosen = torch_mspti.simulator_library('8.1')\ntorch_mspti.use_library(chosen)\n"
        "sim.enable(launch_mode='direct')\nresult['chosen'] = chosen\n" + _PROFILE,
        LD_PRELOAD=torch_mspti.simulator_library("8.1"),  # 8.1 knows a device only when preloaded
    )
    assert r["settings"] == r["library"] == r["chosen"] and r["chosen"].endswith("libmspti_sim_8_1.so")
    assert r["kernels"] == r["linked"] == 1


def test_a_library_variable_set_after_import_is_named_with_use_library_by_enable():
    code = (
        "import os, warnings\n"
        "os.environ['TORCH_MSPTI_LIBRARY'] = torch_mspti.simulator_library('8.2')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    sim.enable(launch_mode='direct')\n"
        "result['warnings'] = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]\n"
        "result['warned_at'] = [w.filename for w in caught if issubclass(w.category, RuntimeWarning)]\n" + _PROFILE
    )
    r = _child(code)
    import torch_mspti

    assert r["library"] == torch_mspti.simulator_library(), r  # the default, as the warning says
    (warning,) = [w for w in r["warnings"] if "TORCH_MSPTI_LIBRARY" in w]
    assert "set after torch_mspti was imported" in warning and "torch_mspti.use_library(" in warning, warning
    assert "libmspti_sim_8_2.so" in warning, warning


def test_enable_without_a_choice_uses_the_default_simulator():
    import torch_mspti

    r = _child("sim.enable(launch_mode='direct')\n" + _PROFILE)
    assert r["settings"] == r["library"] == torch_mspti.simulator_library()


def test_enable_refuses_a_library_that_is_not_a_simulator(tmp_path):
    other = tmp_path / "libmspti.so"
    other.write_bytes(b"\x7fELF not really")
    r = _child(_TRY_ENABLE, TORCH_MSPTI_LIBRARY=str(other))
    assert "not one of torch-mspti's simulated MSPTI libraries" in r["error"] and str(other) in r["error"]
    assert "TORCH_MSPTI_LIBRARY" in r["error"] and "simulator_library(" in r["error"]
    assert "TORCH_MSPTI_SIM_CANN_ROOT" in r["error"]  # the way to a real libmspti in a fake CANN root
    assert r["backend"] == "privateuseone" and r["library_path"] == str(other)


def test_enable_says_a_missing_library_is_missing(tmp_path):
    missing = tmp_path / "nowhere" / "libmspti.so"
    r = _child(_TRY_ENABLE, TORCH_MSPTI_LIBRARY=str(missing))
    assert f"{missing}" in r["error"] and "does not exist" in r["error"], r["error"]
    assert "not one of torch-mspti's simulated MSPTI libraries" not in r["error"], r["error"]
    assert "TORCH_MSPTI_LIBRARY" in r["error"] and "simulator_library(" in r["error"], r["error"]


BAD_ARGUMENTS = [
    ({"duration_scale": -1}, ValueError, "duration_scale"),
    ({"duration_scale": float("inf")}, ValueError, "duration_scale"),
    ({"min_duration_ns": -5}, ValueError, "min_duration_ns"),
    ({"fixed_duration_ns": -1}, ValueError, "fixed_duration_ns"),
    ({"queue_pickup_us": float("nan")}, ValueError, "queue_pickup_us"),
    ({"queue_pickup_us": -0.5}, ValueError, "queue_pickup_us"),
    ({"housekeeping_every": -1}, ValueError, "housekeeping_every"),
    ({"device_count": 0}, ValueError, "device_count"),
    ({"device_count": 17}, ValueError, "device_count"),
    ({"launch_mode": "eager"}, ValueError, "launch_mode"),
    ({"device_count": 2.0}, TypeError, "device_count"),
    ({"min_duration_ns": "2000"}, TypeError, "min_duration_ns"),
    ({"fixed_duration_ns": True}, TypeError, "fixed_duration_ns"),
]


def test_every_bad_argument_is_refused_before_the_backend_is_renamed():
    cases = json.dumps([kw for kw, _, _ in BAD_ARGUMENTS])  # Python's json keeps inf and nan
    r = _child(
        f"""
        result['errors'] = []
        for kwargs in json.loads({cases!r}):
            try:
                sim.enable(**kwargs)
                result['errors'].append(None)
            except Exception as exc:
                result['errors'].append([type(exc).__name__, str(exc)])
        """
    )
    assert r["backend"] == "privateuseone"
    for (kwargs, exc_type, name), got in zip(BAD_ARGUMENTS, r["errors"], strict=True):
        assert got is not None, kwargs
        kind, message = got
        assert kind == exc_type.__name__, (kwargs, got)
        assert message.startswith(f"{name} must be") and repr(kwargs[name]) in message, (kwargs, message)
        if name != "launch_mode":
            assert " in [" in message, message


def test_a_device_library_that_fails_to_load_leaves_the_backend_alone(tmp_path):
    broken = tmp_path / "libtorch_mspti_npu_sim.so"
    broken.write_text("not a shared object\n")
    r = _child(_TRY_ENABLE, TORCH_MSPTI_NPU_SIM_LIBRARY=str(broken))
    assert "cannot load the simulated NPU" in r["error"]
    assert r["backend"] == "privateuseone" and r["enabled"] is False
    assert r["library_path"] == ""  # the plugin's library choice is restored too


@pytest.mark.parametrize(("task_queue", "mode"), [("0", "direct"), ("1", "queued"), (None, "queued")])
def test_default_launch_mode_follows_task_queue_enable_as_torch_npu_does(task_queue, mode):
    code = """
import os
if os.environ.get("TEST_UNSET_TASK_QUEUE"):
    del os.environ["TASK_QUEUE_ENABLE"]
sim.enable()
result['mode'] = sim.settings()["launch_mode"]
"""
    env = (
        {"TEST_UNSET_TASK_QUEUE": "1", "TASK_QUEUE_ENABLE": "x"}
        if task_queue is None
        else {"TASK_QUEUE_ENABLE": task_queue}
    )
    assert _child(code, **env)["mode"] == mode
