"""B2real / B1c-real kept working at tiny sizes: ``benchmarks/real_mspti.py`` against the real MSPTI of
the realmspti fixture (skipped when the fixture is absent). Checks what the benchmark reports, never
how fast: every plugin run holds its N kernels with N verified links, the seed-style consumer and
every B1c kind set got their kernel records back, each kind set got the records it asked for, and a
missing fixture is a clean skip (exit 0, ``skipped``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "real_mspti.py"
N, LAUNCHES = 20, 300


def _fixture() -> Path:
    env = os.environ.get("TORCH_MSPTI_REALMSPTI_DIR")
    return Path(env) if env else REPO.parent / "shared" / "realmspti"


needs_fixture = pytest.mark.skipif(
    not (_fixture() / "make_root.sh").is_file(), reason=f"the realmspti fixture is absent ({_fixture()})"
)


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "report.json"
    cmd = [sys.executable, str(SCRIPT), *args, "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env or dict(os.environ))
    return proc, (json.loads(out.read_text()) if out.exists() else {})


@needs_fixture
def test_real_mspti_small_run_is_complete(tmp_path):
    proc, d = _run(
        tmp_path,
        *("--sizes", str(N), "--delays", "0,200", "--runs", "1", "--arms", "plugin,seed"),
        *("--launches", str(LAUNCHES), "--launch-repeats", "2"),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert d["ok"] and not d.get("skipped") and d["problems"] == [], d.get("problems")
    for delay in (0, 200):
        cfg = d["drain"][f"{N}:{delay}"]
        plugin, seed = cfg["plugin"], cfg["seed"]
        assert plugin["lost"] == [0] and plugin["verified"] == [N] and plugin["all_verified"]
        assert "KERNEL" in plugin["enabled_kinds"] and "RUNTIME_API" in plugin["enabled_kinds"]
        assert set(plugin["exit_reasons"]) and set(plugin["pulled_by"])
        # the release ran after stop() and succeeded; the exit waited for it
        assert plugin["release_results"] == {"0": 1} and plugin["release_errors"] == []
        assert plugin["unsubscribe_ms"]["n"] == 1 and plugin["skipped_at_exit"] == 0
        assert len(seed["lost"]) == 1 and seed["unsubscribe_results"] == {"0": 1}
    arms = d["launch"]["arms"]
    assert d["launch"]["complete"]
    want = {  # kind set -> (EXTERNAL_CORRELATION, RUNTIME_API) records per launch
        "kernel_only": (0, 0),
        "kernel_pushpop": (0, 0),
        "hints": (1, 0),
        "calls": (0, 1),
        "plugin_kinds": (1, 1),
    }
    for name, (ext, calls) in want.items():
        assert arms[name]["kernels"] == [LAUNCHES] * 2, name
        assert arms[name]["external_correlation"] == [ext * LAUNCHES] * 2, name
        assert arms[name]["runtime_api"] == [calls * LAUNCHES] * 2, name
    assert arms["no_subscriber"]["cpu_ns"]["n"] == 2


def test_real_mspti_skips_without_the_fixture(tmp_path):
    env = dict(os.environ, TORCH_MSPTI_REALMSPTI_DIR=str(tmp_path / "absent"))
    proc, d = _run(tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert d["ok"] and "absent" in d["skipped"] and "drain" not in d and "launch" not in d
