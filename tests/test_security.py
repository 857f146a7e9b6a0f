"""Library search hygiene: nothing is loaded from the current directory or a relative path; an
explicit relative path is made absolute and reported; a path that is not UTF-8 reaches the trace,
diagnostics() and `torch-mspti doctor` escaped, never as invalid JSON or an exception.

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

from torch_mspti_cli.check import check_trace

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
        pytest.skip(
            "needs a machine without CANN: the plugin searches /usr/local/Ascend, where this machine has a real libmspti.so that it would load"
        )
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


# ---------------------------------------------------------------------------------------------
# Paths that are not UTF-8 (a file system is a sequence of bytes)

NOT_UTF8 = b"lib \xff\xfe dir"  # bytes no UTF-8 decoder accepts


def _simulator_under_non_utf8_directory(tmp_path: Path) -> bytes:
    directory = os.fsencode(tmp_path) + b"/" + NOT_UTF8
    os.makedirs(directory)
    shutil.copy(simrun._simulator_path(), os.fsdecode(directory + b"/libmspti.so"))
    return directory


def test_explicit_library_under_a_non_utf8_directory_gives_valid_json_and_diagnostics(tmp_path):
    directory = _simulator_under_non_utf8_directory(tmp_path)
    library = directory + b"/libmspti.so"
    workload = f"""
import ctypes, json, os
lib = ctypes.CDLL(os.fsdecode({library!r}))  # the very library the plugin loaded
lib.msptiSimLaunchKernel.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64]
lib.msptiSimSynchronize.argtypes = [ctypes.c_int32]
torch.ones(2) + 1  # an op, so the trace has a host process
lib.msptiSimLaunchKernel(b"UnderBadBytes", b"KERNEL_AICORE", 0, 1, 20000)
lib.msptiSimSynchronize(-1)
d = torch_mspti.diagnostics()
out["path"] = d.library.path
out["json"] = json.loads(d.to_json())["library"]["path"]
out["repr"] = repr(d)
"""
    run = simrun.run(workload, tmp_path / "run", library=os.fsdecode(library))
    assert run.returncode == 0, run.stderr[-3000:]
    # the trace is JSON (simrun parsed it) and names the path, each byte that is not UTF-8 as '?'
    # (kineto turns every backslash of a metadata value into '/', so no escape survives there)
    health = run.trace["torch_mspti"]
    assert health["library"]["path"] == library.replace(b"\xff", b"?").replace(b"\xfe", b"?").decode(), health
    assert [k["name"] for k in simrun.kernels(run.trace)] == ["UnderBadBytes"]
    assert check_trace(run.trace).ok
    # diagnostics(): str with surrogate escapes, os.fsencode gives the bytes back; to_json() and repr work
    assert os.fsencode(run.extra["path"]) == library and os.fsencode(run.extra["json"]) == library
    assert os.fsencode(run.diagnostics["library"]["path"]) == library
    assert "UnderBadBytes" not in run.extra["repr"] and "library:" in run.extra["repr"]


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_doctor_reports_a_library_found_in_a_non_utf8_ld_library_path_entry(json_output, tmp_path):
    directory = _simulator_under_non_utf8_directory(tmp_path)
    env = {os.fsencode(k): os.fsencode(v) for k, v in simrun.clean_environment().items()}
    env[b"LD_LIBRARY_PATH"] = directory
    env[b"PYTHONIOENCODING"] = b"utf-8"  # a strict stream: surrogates cannot be written as they are
    env[b"COLUMNS"] = b"1000"  # one line per row
    cmd = [sys.executable, "-m", "torch_mspti_cli", "doctor"] + (["--json"] if json_output else [])
    proc = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    out = proc.stdout.decode("utf-8")  # valid UTF-8, whatever the path
    assert proc.returncode == 0, out + proc.stderr.decode(errors="backslashreplace")
    if json_output:
        lib = json.loads(out)["library"]
        assert os.fsencode(lib["path"]) == directory + b"/libmspti.so" and lib["found_by"] == "LD_LIBRARY_PATH", lib
    else:
        assert "lib \\udcff\\udcfe dir/libmspti.so" in out, out  # escaped, never a crash
        assert "OK: NPU collection is possible" in out


def test_library_path_with_quotes_and_backslashes_gives_a_valid_trace(tmp_path):
    directory = tmp_path / 'say "hi" \\ there'
    directory.mkdir()
    shutil.copy(simrun._simulator_path(), directory / "libmspti.so")
    run = simrun.run("torch.ones(2) + 1\n", tmp_path / "run", library=str(directory / "libmspti.so"))
    # simrun parsed the trace; the path reads as kineto writes names: ' for ", / for backslash
    assert run.trace["torch_mspti"]["library"]["path"] == str(directory / "libmspti.so").replace('"', "'").replace(
        "\\", "/"
    )
    assert run.diagnostics["library"]["path"] == str(directory / "libmspti.so")  # exact in diagnostics()
