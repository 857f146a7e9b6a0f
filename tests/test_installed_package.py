"""Rules for the installed torch-mspti distribution (after `pip install .` or the conda build).

These need the built package: `import torch` alone loads it through the torch.backends entry
point, the switches turn that off, a wrong torch minor gives the clear message, and the wheel
carries the runtime pin, the extension, the simulator, the stubs and nothing from the build tree.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import subprocess
import sys

import pytest

DIST = "torch-mspti"
HOOK_MESSAGE = "torch-mspti: the profiler plugin was not loaded"


@pytest.fixture(scope="module")
def dist() -> md.Distribution:
    try:
        return md.distribution(DIST)
    except md.PackageNotFoundError:
        pytest.fail(f"{DIST} is not installed; run: pip install --no-build-isolation .")


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TORCH_MSPTI_DISABLE", "TORCH_DEVICE_BACKEND_AUTOLOAD", "PYTHONPATH")
    }
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", code], env=full_env, capture_output=True, text=True, timeout=300
    )


def _torch_major_minor() -> tuple[int, int]:
    proc = _python("import torch; print(torch.__version__)", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    major, minor = re.match(r"(\d+)\.(\d+)", proc.stdout).groups()
    return int(major), int(minor)


def test_import_torch_alone_loads_the_plugin(dist):
    proc = _python("import sys, torch; print('torch_mspti' in sys.modules)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["True"]
    assert HOOK_MESSAGE not in proc.stderr, proc.stderr


def test_import_torch_mspti_first_works(dist):
    proc = _python("import torch_mspti, torch, sys; print(sys.modules['torch_mspti'] is torch_mspti)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["True"]
    assert HOOK_MESSAGE not in proc.stderr, proc.stderr


@pytest.mark.parametrize("switch", [{"TORCH_MSPTI_DISABLE": "1"}, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}])
def test_switches_keep_import_torch_from_loading_it(dist, switch):
    proc = _python("import sys, torch; print('torch_mspti' in sys.modules)", **switch)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["False"]


def test_wrong_torch_minor_gives_the_clear_message(dist):
    major, minor = _torch_major_minor()
    fake = f"{major}.{minor + 1}.0"
    code = (
        "import torch\n"
        f"torch.__version__ = {fake!r}\n"
        "try:\n    import torch_mspti\nexcept ImportError as exc:\n    print(exc)\n"
        "else:\n    print('imported')\n"
    )
    proc = _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout
    assert f"{major}.{minor}." in message and fake in message, message
    assert f'pip install "torch=={major}.{minor}.*"' in message
    assert "undefined symbol" not in message


def test_build_info_matches_the_running_torch(dist):
    code = "import torch_mspti._build_info as b, json; print(json.dumps([b.TORCH_VERSION, b.TORCH_CXX11_ABI]))"
    proc = _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode == 0, proc.stderr
    built, abi = json.loads(proc.stdout)
    assert tuple(map(int, built.split(".")[:2])) == _torch_major_minor()
    assert abi in (0, 1)


def test_metadata_pins_the_torch_minor_and_declares_the_entry_points(dist):
    major, minor = _torch_major_minor()
    torch_reqs = [r for r in dist.requires or [] if re.match(r"torch\b", r) and "extra" not in r]
    assert len(torch_reqs) == 1, dist.requires
    assert set(re.split(r"[ ,]+", torch_reqs[0].removeprefix("torch").strip())) == {
        f">={major}.{minor}",
        f"<{major}.{minor + 1}",
    }
    eps = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    assert eps[("torch.backends", "torch_mspti")] == "_torch_mspti_autoload:autoload"
    assert eps[("console_scripts", "torch-mspti")] == "torch_mspti_cli:main"


def _is_editable(dist: md.Distribution) -> bool:
    direct_url = dist.read_text("direct_url.json")
    return bool(direct_url and json.loads(direct_url).get("dir_info", {}).get("editable"))


def test_wheel_carries_the_extension_stubs_and_simulator_only(dist):
    if _is_editable(dist):
        pytest.skip("an editable install maps files from the source and build trees")
    files = [str(f) for f in dist.files or []]
    assert any(re.fullmatch(r"torch_mspti/_C\..*\.so", f) for f in files), files
    assert any(re.search(r"libmspti_sim\.so$", f) for f in files), files
    for required in (
        "torch_mspti/_C.pyi",
        "torch_mspti/py.typed",
        "torch_mspti/_build_info.py",
        "_torch_mspti_autoload/__init__.py",
    ):
        assert required in files
    leaked = [
        f for f in files if re.search(r"(CMakeFiles|CMakeCache\.txt|cmake_install\.cmake|\.ninja|\.o$|\.a$|\.in$)", f)
    ]
    assert not leaked
