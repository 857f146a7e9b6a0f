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


def test_transformer_demo_runs_several_cycles(tmp_path):
    rc, out, trace = _demo(tmp_path, "transformer", 32, 8)  # schedule cycle = 4 steps
    assert rc == 0, out
    assert len(list((tmp_path / "transformer_tb").glob("*.json"))) >= 2
    assert trace.is_file()


def test_unknown_workload_is_a_usage_error(tmp_path):
    rc, out, _ = _demo(tmp_path, "nope", 8, 1)
    assert rc == 2 and "unknown workload" in out
