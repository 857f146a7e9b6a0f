"""Demo workloads on the simulated NPU: phases, mlp, transformer run and write their traces, and
the demo entry point (torch_mspti.sim.demo.run, behind `torch-mspti demo`) exits 0."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, run_child

DEMO = "import sys\nfrom torch_mspti.sim import demo\nsys.exit(demo.run({args}))\n"


def _demo(tmp_path: Path, workload: str, size: int, steps: int) -> tuple[int, str, Path]:
    out = tmp_path / f"{workload}.json"
    args = f"workload={workload!r}, size={size}, steps={steps}, out={str(out)!r}, device='sim'"
    proc = run_child(DEMO.format(args=args))
    return proc.returncode, proc.stdout + proc.stderr, out


def _events(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return data["traceEvents"] if isinstance(data, dict) else data


@pytest.fixture(autouse=True)
def _needs_simulator():
    require_simulator()


def test_phases_demo(tmp_path):
    rc, out, trace = _demo(tmp_path, "phases", 128, 1)
    assert rc == 0, out
    assert "SIMULATED" in out and "ui.perfetto.dev" in out and str(trace) in out
    names = {e.get("name") for e in _events(trace)}
    assert {"matmul", "add", "sum", "aten::mm", "aten::add", "aten::sum"} <= names


def test_mlp_demo_profiles_training_steps(tmp_path):
    rc, out, trace = _demo(tmp_path, "mlp", 64, 4)
    assert rc == 0, out
    names = {e.get("name") for e in _events(trace)}
    assert {"forward", "backward", "optimizer"} <= names
    assert any("Backward" in (n or "") for n in names)
    assert list((tmp_path / "mlp_tb").glob("*.json"))


def _profiled_steps(trace: Path) -> list[str]:
    """Names of the host-side ProfilerStep spans (the device lanes carry gpu_user_annotation copies)."""
    events = _events(trace)
    return sorted(
        e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    )


@pytest.mark.parametrize("workload, steps", [("mlp", 1), ("mlp", 2), ("transformer", 2)])
def test_steps_is_the_number_of_profiled_steps(tmp_path, workload, steps):
    rc, out, trace = _demo(tmp_path, workload, 32, steps)
    assert rc == 0, out
    assert _profiled_steps(trace) == [f"ProfilerStep#{i}" for i in range(1, steps + 1)]
    kernels = [e for e in _events(trace) if e.get("cat") == "kernel"]
    assert kernels and f"kernels  {len(kernels)} " in out
    assert len(list((tmp_path / f"{workload}_tb").glob("*.json"))) == 1  # one cycle


def test_phases_steps_repeat_the_phases_inside_the_profile(tmp_path):
    rc, out, trace = _demo(tmp_path, "phases", 64, 2)
    assert rc == 0, out
    assert sum(1 for e in _events(trace) if e.get("name") == "matmul" and e.get("cat") == "user_annotation") == 2
    assert sum(1 for e in _events(trace) if e.get("cat") == "kernel" and e.get("name") == "MatMulV2") == 10


@pytest.mark.parametrize("arg", ["steps=0", "size=0", "steps=-3"])
def test_steps_and_size_below_one_are_usage_errors_before_any_device_is_touched(arg):
    import torch

    from torch_mspti.sim import demo  # in this process: the check must come before sim.enable()

    assert demo.run("mlp", **{arg.split("=")[0]: int(arg.split("=")[1])}) == 2
    assert torch._C._get_privateuse1_backend_name() == "privateuseone"


def test_unknown_workload_is_a_usage_error(tmp_path):
    rc, out, _ = _demo(tmp_path, "nope", 8, 1)
    assert rc == 2 and "unknown workload" in out
