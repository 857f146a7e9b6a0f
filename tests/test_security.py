"""Library search hygiene (issue 7, item 5): nothing is loaded from the current directory or a
relative path; an explicit relative path is made absolute and reported.

Environment values are validated by tests/test_config.py (bad TORCH_MSPTI_* values are reported
and ignored); the record walker's bounds (no read at or past validSize, checked under ASan) by
tests/cpp/core/MsptiRecordWalkerTest.cpp.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun

_PROBE = r"""
import json
import torch_mspti
lib = torch_mspti.diagnostics(load_library=True).to_dict()["library"]
maps = open("/proc/self/maps").read()
print(json.dumps({"library": lib, "maps": maps}))
"""


def _probe(cwd: Path, env_extra: dict[str, str]) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TORCH_MSPTI_")
        and k not in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "LD_LIBRARY_PATH", "LD_PRELOAD")
    }
    env.update(env_extra)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(proc.stdout.splitlines()[-1])


def test_search_never_loads_from_the_current_directory_or_a_relative_path(tmp_path):
    if Path("/usr/local/Ascend").exists():
        pytest.skip("a CANN installation exists under /usr/local/Ascend")
    sim = simrun._simulator_path()
    # a loadable libmspti.so in the current directory and in relative LD_LIBRARY_PATH entries
    for d in (tmp_path, tmp_path / "rel", tmp_path / "cann" / "lib64"):
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(sim, d / "libmspti.so")
        shutil.copy(sim, d / "libprofapi.so")  # so that the profapi check would not stop a candidate
    out = _probe(
        tmp_path, {"LD_LIBRARY_PATH": "rel::.:./rel", "ASCEND_HOME_PATH": "cann", "ASCEND_TOOLKIT_HOME": "./cann"}
    )
    lib = out["library"]
    assert lib["available"] is False, lib
    assert str(tmp_path) not in out["maps"], "a library from the test directory was mapped"
    paths = [c["path"] for c in lib["candidates"]]
    assert all(p == "" or os.path.isabs(p) for p in paths), paths
    # the relative entries are reported as never searched, not silently ignored
    skipped = [c for c in lib["candidates"] if c["outcome"] == "skipped" and c["path"] == ""]
    reasons = " | ".join(c["reason"] for c in skipped)
    for entry in ("'rel'", "''", "'.'", "'./rel'", "'cann'", "'./cann'"):
        assert entry in reasons, (entry, reasons)


def test_explicit_relative_library_path_is_made_absolute_and_reported(tmp_path):
    sim = simrun._simulator_path()
    (tmp_path / "sub").mkdir()
    shutil.copy(sim, tmp_path / "sub" / "libmspti_sim.so")
    out = _probe(tmp_path, {"TORCH_MSPTI_LIBRARY": "sub/../sub/libmspti_sim.so"})
    lib = out["library"]
    expected = str(tmp_path / "sub" / "libmspti_sim.so")
    assert lib["available"] is True, lib
    assert lib["path"] == expected and lib["found_by"] == "explicit", lib
    loaded = [c for c in lib["candidates"] if c["outcome"] == "loaded"]
    assert len(loaded) == 1 and loaded[0]["path"] == expected, lib["candidates"]
    assert "relative path 'sub/../sub/libmspti_sim.so'" in loaded[0]["reason"], loaded[0]
    assert expected in out["maps"]


def test_explicit_relative_path_that_fails_names_both_forms(tmp_path):
    out = _probe(tmp_path, {"TORCH_MSPTI_LIBRARY": "missing/libmspti.so"})
    lib = out["library"]
    assert lib["available"] is False
    cand = [c for c in lib["candidates"] if c["source"] == "explicit"]
    assert len(cand) == 1 and cand[0]["path"] == str(tmp_path / "missing" / "libmspti.so"), cand
    assert "missing/libmspti.so" in lib["reason"], lib
