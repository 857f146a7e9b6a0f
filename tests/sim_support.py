"""Helpers for tests of the simulated NPU (torch_mspti.sim).

Enabling the simulator renames PrivateUse1 for the whole process, irreversibly, so every check runs
in a child interpreter: a test module starts one child (module-scoped fixture) that runs all of the
module's checks and reports each one's result or traceback as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

_MARK = "@@SIM_RESULTS@@"

_RUNNER = r"""
import json, sys, traceback
results = {}
for _name in CHECKS:
    try:
        results[_name] = {"ok": True, "value": globals()["check_" + _name]()}
    except BaseException as exc:  # noqa: BLE001
        results[_name] = {"ok": False, "error": traceback.format_exc()}
print("@@SIM_RESULTS@@" + json.dumps(results, default=str), flush=True)
"""


def simulator_available() -> tuple[bool, str]:
    """Whether torch_mspti.sim, the device library and the MSPTI simulator can be found."""
    code = (
        "import os, torch_mspti.sim as s\n"
        "try:\n"
        "    d, m = s.device_library(), s.simulator_library()\n"
        "except FileNotFoundError as exc:\n"
        "    print(False, 'missing:', str(exc).replace(' ', '_'))\n"
        "else:\n"
        "    print(True, d, m)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return False, "torch_mspti.sim not importable: " + (lines[-1] if lines else f"rc={proc.returncode}")
    ok, dev, sim = proc.stdout.split()
    return ok == "True", f"device library {dev}, simulator {sim}"


def require_simulator() -> None:
    ok, why = simulator_available()
    if not ok:
        pytest.skip(f"simulated NPU not available ({why})")


def run_child(code: str, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; ``env`` entries are added to this process's environment."""
    child_env = dict(os.environ)
    child_env.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    child_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=child_env)


def run_demo(out, **kwargs: Any) -> tuple[subprocess.CompletedProcess, dict]:
    """``torch_mspti.sim.demo.run(out=out, device="sim", **kwargs)`` in a fresh interpreter; returns
    the finished process and the trace it wrote (parsed). Raises AssertionError when it failed."""
    args = ", ".join(f"{k}={v!r}" for k, v in {**kwargs, "out": str(out), "device": "sim"}.items())
    proc = run_child(f"import sys\nfrom torch_mspti.sim import demo\nsys.exit(demo.run({args}))\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads(Path(out).read_text())


def simulator_library_path() -> str:
    """Path of the MSPTI simulator torch_mspti.sim.enable() binds (as a child process sees it)."""
    code = "import torch_mspti.sim as s\nprint(s.simulator_library())\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return proc.stdout.strip().splitlines()[-1]


def run_checks(
    source: str,
    enable: dict[str, Any] | None,
    timeout: float = 240,
    real: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run every ``check_<name>()`` defined in ``source`` in one child process.

    ``enable``: keyword arguments for torch_mspti.sim.enable() run first (None: not enabled).
    ``real``: run on a real Ascend NPU instead (imports torch_npu; tests marked ``npu``), with
    torch_npu's task queue off so that launches happen inside their ops and can be linked.
    ``env``: environment entries for the child (e.g. an ``LD_PRELOAD`` that must be there at
    process start). Returns {name: {"ok": bool, "value"|"error": ...}}.
    """
    source = textwrap.dedent(source)
    names = [
        line.split("check_", 1)[1].split("(", 1)[0] for line in source.splitlines() if line.startswith("def check_")
    ]
    preamble = "import torch\n"
    if real:
        preamble = "import os\nos.environ['TASK_QUEUE_ENABLE'] = '0'\nimport torch, torch_npu, torch_mspti\n"
    elif enable is not None:
        preamble += f"import torch_mspti.sim as sim\nsim.enable(**{enable!r})\n"
    code = preamble + source + f"\nCHECKS = {names!r}\n" + _RUNNER
    proc = run_child(code, timeout=timeout, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK) :])
    raise AssertionError(
        f"child failed (rc={proc.returncode}):\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    )


def result(results: dict[str, Any], name: str) -> Any:
    r = results[name]
    assert r["ok"], f"check {name} failed in the child:\n{r['error']}"
    return r["value"]


def run_once(tmp_path_factory, name: str, make):
    """``make(out_dir)`` once per test session, even with xdist: the workers share the session's base
    directory, the first one runs it under a lock and the others read its JSON result (a failed run is
    retried by the next worker, which then reports its own failure). For the multi-process runs that
    several test modules or workers assert on."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    done = root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return json.loads(done.read_text())
        out = root / name
        out.mkdir(exist_ok=True)
        result = make(out)
        done.write_text(json.dumps(result))
        return result
