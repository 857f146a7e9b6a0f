"""Rules for the installed torch-mspti distribution (after `pip install .` or the conda build).

These need the built package: `import torch` alone loads it through the torch.backends entry
point, the switches turn that off, a wrong torch minor gives the clear message, and the wheel
carries the runtime pin, the extension, the simulator, the stubs and nothing from the build tree.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


def test_the_installed_package_finds_its_simulator_libraries(dist):
    """In whichever install this is (a wheel's, or the README's development install ``pip install
    --no-build-isolation -ve .``, whose libraries CMake installs into site-packages while the Python
    files are imported from src/), the simulator's libraries are found and the demo runs. Before
    _paths looked beyond the folder of its own file, the editable install raised FileNotFoundError
    here (src/torch_mspti/lib does not exist)."""
    code = (
        "import json, torch_mspti, torch_mspti.sim as sim\n"
        "from torch_mspti import _paths\n"
        "print(json.dumps([torch_mspti.simulator_library(), _paths.npu_device_library(),"
        " torch_mspti.simulator_generations()]))\n"
    )
    proc = _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode == 0, proc.stderr
    default, device, generations = json.loads(proc.stdout)
    assert Path(default).name == "libmspti_sim.so" and Path(default).is_file(), default
    assert Path(device).name == "libtorch_mspti_npu_sim.so" and Path(device).parent == Path(default).parent
    assert generations == ["8.0.RC3", "8.1", "8.2", "26.0", "26.1"], generations


# A stand-in for scikit-build-core's editable redirect (its _editable_skbc_<name>.py, loaded by a .pth):
# the package's Python files come from the source tree while its __path__ also holds the folder that
# CMake installed _C and lib/ into. scikit-build-core 1.x lists the install tree first; both orders are
# tried. Own code, so that the test does not depend on scikit-build-core's internals.
_EDITABLE_CHILD = """
import importlib.machinery, importlib.util, json, sys

SRC, INSTALL, ORDER = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])


class EditableRedirect:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("torch_mspti."):  # by the package's __path__ (not by an editable install's own redirect)
            return importlib.machinery.PathFinder.find_spec(name, path)
        if name != "torch_mspti":
            return None
        return importlib.util.spec_from_file_location(
            name, SRC + "/__init__.py", submodule_search_locations=[{"src": SRC, "install": INSTALL}[k] for k in ORDER]
        )


sys.meta_path.insert(0, EditableRedirect())
import torch_mspti
from torch_mspti import _paths

out = {"init": torch_mspti.__file__, "C": torch_mspti._C.__file__, "paths": _paths.__file__}
try:
    out["default"] = torch_mspti.simulator_library()
    out["by_generation"] = {g: torch_mspti.simulator_library(g) for g in _paths.SIMULATOR_GENERATIONS}
    out["device"] = _paths.npu_device_library()
    out["generations"] = torch_mspti.simulator_generations()
    out["generation_of"] = _paths.simulator_generation_of(out["by_generation"]["8.1"])
    if "--enable" in sys.argv:
        import torch
        import torch_mspti.sim as sim

        sim.enable()
        out["sum"] = (torch.ones(4, device="npu") + 1).sum().item()
except FileNotFoundError as exc:
    out["error"] = str(exc)
print(json.dumps(out))
"""


def _editable_layout(tmp_path: Path, with_lib: bool = True) -> tuple[Path, Path]:
    """(src/torch_mspti, site-packages/torch_mspti) as an editable install lays them out: the Python
    files, copied (a symlink would resolve back to the installed folder), without lib/ or _C in the
    source tree; _C and, with ``with_lib``, lib/ (links to the installed files) in the install tree."""
    spec = importlib.util.find_spec("torch_mspti")
    assert spec is not None and spec.origin and spec.submodule_search_locations, spec
    locations = [Path(p) for p in spec.submodule_search_locations]
    lib = next((p / "lib" for p in locations if (p / "lib" / "libmspti_sim.so").is_file()), None)
    ext = next((c for p in locations for c in sorted(p.glob("_C.*.so"))), None)
    if lib is None or ext is None:
        pytest.fail(f"the installed torch_mspti has no lib/libmspti_sim.so or _C in {locations}")
    src = tmp_path / "src" / "torch_mspti"
    shutil.copytree(Path(spec.origin).parent, src, ignore=shutil.ignore_patterns("lib", "_C.*", "__pycache__", "*.pyc"))
    install = tmp_path / "site-packages" / "torch_mspti"
    install.mkdir(parents=True)
    (install / ext.name).symlink_to(ext)
    if with_lib:
        (install / "lib").mkdir()
        for f in lib.iterdir():
            (install / "lib" / f.name).symlink_to(f)
    for f in ("_build_info.py",):  # installed by CMake: in the install tree only, as in an editable install
        if not (src / f).is_file():
            found = next((p / f for p in locations if (p / f).is_file()), None)
            if found is not None:
                shutil.copy(found, install / f)
    return src, install


def _editable_child(src: Path, install: Path, order: list[str], *extra: str) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "TORCH_MSPTI_SIM_LIBRARY", "TORCH_MSPTI_NPU_SIM_LIBRARY")
    }
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    proc = subprocess.run(
        [sys.executable, "-c", _EDITABLE_CHILD, str(src), str(install), json.dumps(order), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("order", [["install", "src"], ["src", "install"]])
def test_an_editable_layout_finds_the_libraries_cmake_installed_beside_the_source(dist, tmp_path, order):
    """The README's development install (``pip install --no-build-isolation -ve .``) imports
    torch_mspti from src/ while CMake installs lib/ into site-packages: simulator_library(),
    every generation, the device library and sim.enable() find them there (through the package's
    __path__). Before, each raised FileNotFoundError naming src/torch_mspti/lib."""
    src, install = _editable_layout(tmp_path)
    out = _editable_child(src, install, order, *(["--enable"] if order[0] == "install" else []))
    assert "error" not in out, out["error"]
    assert Path(out["init"]).parent == src and Path(out["paths"]).parent == src, out
    assert Path(out["C"]).parent == install, out
    lib = install / "lib"
    assert out["default"] == str(lib / "libmspti_sim.so"), out
    assert out["by_generation"] == {g: str(lib / n) for g, n in SIMULATOR_FILES.items()}, out
    assert out["device"] == str(lib / "libtorch_mspti_npu_sim.so"), out
    assert out["generations"] == list(SIMULATOR_FILES) and out["generation_of"] == "8.1", out
    if order[0] == "install":
        assert out["sum"] == 8.0, out


def test_a_layout_without_libraries_names_every_folder_it_looked_in_and_the_fix(dist, tmp_path):
    src, install = _editable_layout(tmp_path, with_lib=False)
    out = _editable_child(src, install, ["install", "src"])
    message = out.get("error", "")
    assert "libmspti_sim.so not found in torch_mspti/lib" in message, out
    assert str(install / "lib") in message and str(src / "lib") in message, message
    assert "pip install --no-build-isolation -ve ." in message, message


SIMULATOR_FILES = {
    "8.0.RC3": "libmspti_sim_8_0_rc3.so",
    "8.1": "libmspti_sim_8_1.so",
    "8.2": "libmspti_sim_8_2.so",
    "26.0": "libmspti_sim_26_0.so",
    "26.1": "libmspti_sim.so",
}
