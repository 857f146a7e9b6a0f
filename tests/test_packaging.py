"""Packaging rules that hold without the built extension.

The torch pin provider, the torch-minor guard, the autoload hook (against a stand-in
``torch_mspti`` that fails or succeeds, with the real torch), the sdist contents and the conda
recipe render. Rules that need the installed package are in test_installed_package.py.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import textwrap
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOOK_MESSAGE = "torch-mspti: the profiler plugin was not loaded"


def _installed_or_source(top: str, rel: str, source: Path) -> Path:
    """The installed copy of ``<top>/<rel>`` when ``top`` is importable (found, not imported), else ``source``."""
    spec = importlib.util.find_spec(top)
    if spec is not None and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / rel
        if candidate.is_file():
            return candidate
    if not source.is_file():
        pytest.fail(f"neither an installed {top}/{rel} nor {source} exists")
    return source


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def torch_version_mod() -> types.ModuleType:
    path = _installed_or_source("torch_mspti", "_torch_version.py", REPO / "src/torch_mspti/_torch_version.py")
    return _load(path, "torch_mspti_test_torch_version")


@pytest.fixture(scope="module")
def torch_pin() -> types.ModuleType:
    path = REPO / "_build_support" / "torch_pin.py"
    if not path.is_file():
        pytest.skip("_build_support/ is not beside the tests (installed-package test run)")
    return _load(path, "torch_mspti_test_torch_pin")


@pytest.fixture(scope="module")
def hook_dir() -> Path:
    """The directory holding the _torch_mspti_autoload package (installed or source)."""
    init = _installed_or_source("_torch_mspti_autoload", "__init__.py", REPO / "src/_torch_mspti_autoload/__init__.py")
    return init.parent.parent


# ---- torch-minor guard ---------------------------------------------------------------------


@pytest.mark.parametrize("running", ["2.13.0+cpu", "2.13.0", "2.13.1", "2.13.0a0+git1234"])
def test_same_minor_is_accepted(torch_version_mod, running):
    torch_version_mod.check_torch_version("2.13.0+cpu", running)


@pytest.mark.parametrize("running", ["2.14.0", "2.12.1+cu126", "3.13.0"])
def test_other_minor_names_both_versions_and_the_fix(torch_version_mod, running):
    with pytest.raises(ImportError) as info:
        torch_version_mod.check_torch_version("2.13.0+cpu", running)
    message = str(info.value)
    assert "2.13.0+cpu" in message and running in message
    assert 'pip install "torch==2.13.*"' in message
    assert "rebuild torch-mspti" in message


def test_unreadable_version_is_an_import_error(torch_version_mod):
    with pytest.raises(ImportError, match="cannot compare torch versions"):
        torch_version_mod.check_torch_version("2.13.0", "unknown")


# ---- runtime pin provider ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "pin"),
    [
        ("2.13.0+cpu", "torch>=2.13,<2.14"),
        ("2.13.1", "torch>=2.13,<2.14"),
        ("2.14.0a0+gitabc", "torch>=2.14,<2.15"),
        ("2.9.1+cu126", "torch>=2.9,<2.10"),
        ("3.0.0", "torch>=3.0,<3.1"),
    ],
)
def test_pin_follows_the_build_torch_minor(torch_pin, monkeypatch, version, pin):
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__=version))
    monkeypatch.setattr(torch_pin, "_state", "wheel")
    label = pin.split(">=", 1)[1].split(",", 1)[0]
    assert torch_pin.dynamic_metadata({}, {}) == {"dependencies": [pin], "version": f"0.1.0+torch{label}"}
    assert torch_pin.dynamic_wheel({}) == {"dependencies": True}


def test_sdist_without_torch_gets_no_pin_and_a_wheel_build_fails_clearly(torch_pin, monkeypatch):
    monkeypatch.setattr(torch_pin, "_state", torch_pin._state)  # restored afterwards
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    torch_pin.build_state("sdist")
    assert torch_pin.dynamic_metadata({}, {}) == {"dependencies": [], "version": torch_pin.BASE_VERSION}
    torch_pin.build_state("wheel")
    with pytest.raises(RuntimeError, match="needs torch in the build environment"):
        torch_pin.dynamic_metadata({}, {})


def test_provider_imports_torch_with_autoload_off_and_restores_the_env(torch_pin, tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "import os\n__version__ = '2.13.0+cpu'\nAUTOLOAD_AT_IMPORT = os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD')\n"
    )
    code = textwrap.dedent(f"""
        import importlib.util, os, sys
        sys.path.insert(0, {str(tmp_path)!r})
        spec = importlib.util.spec_from_file_location("torch_pin", {str(torch_pin.__file__)!r})
        pin = importlib.util.module_from_spec(spec); spec.loader.exec_module(pin)
        pin.build_state("wheel")
        print(pin.dynamic_metadata({{}}, {{}})["dependencies"])
        import torch
        print(torch.AUTOLOAD_AT_IMPORT, os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD"))
    """)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["['torch>=2.13,<2.14']", "0 1"]


def test_pyproject_wires_the_provider_and_the_entry_points():
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11+")
    pyproject = REPO / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("pyproject.toml is not beside the tests")
    data = tomllib.loads(pyproject.read_text())
    assert "torch==2.13.*" in data["build-system"]["requires"]
    assert "dependencies" in data["project"]["dynamic"]
    assert {"path": "_build_support", "module": "torch_pin"} in [
        e["provider"] for e in data["tool"]["dynamic-metadata"]
    ]
    hook = data["project"]["entry-points"]["torch.backends"]["torch_mspti"]
    # Outside the package: importing torch_mspti.<anything> would run its __init__ outside the hook's try.
    assert hook == "_torch_mspti_autoload:autoload"
    assert data["project"]["scripts"]["torch-mspti"] == "torch_mspti_cli:main"


# ---- autoload hook with a stand-in torch_mspti --------------------------------------------

_BROKEN = "raise RuntimeError('stand-in torch_mspti is broken')\n"
_GOOD = "import torch\nLOADED = True\n"


def _standin(tmp_path: Path, init: str, entry_point: bool) -> Path:
    """A path entry with a stand-in torch_mspti, a torch_npu that must stay unimported and,
    optionally, a dist-info that registers the hook as a torch.backends entry point."""
    root = tmp_path / "standin"
    (root / "torch_mspti").mkdir(parents=True)
    (root / "torch_mspti" / "__init__.py").write_text(init)
    (root / "torch_npu").mkdir()
    (root / "torch_npu" / "__init__.py").write_text("raise RuntimeError('torch_npu must not be imported')\n")
    if entry_point:
        info = root / "torch_mspti_standin-0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-mspti-standin\nVersion: 0.0\n")
        (info / "entry_points.txt").write_text("[torch.backends]\ntorch_mspti = _torch_mspti_autoload:autoload\n")
    return root


def _run(code: str, path: list[Path], **env: str) -> subprocess.CompletedProcess:
    full_env = {
        k: v for k, v in os.environ.items() if k not in ("TORCH_MSPTI_DISABLE", "TORCH_DEVICE_BACKEND_AUTOLOAD")
    }
    full_env.update(env, PYTHONPATH=os.pathsep.join(map(str, path)))
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", code], env=full_env, capture_output=True, text=True, timeout=300
    )


_CALL_HOOK = (
    "import sys, _torch_mspti_autoload as h\n"
    "h.autoload(); h.autoload()\n"
    "print('loaded' if 'torch_mspti' in sys.modules else 'not loaded')\n"
    "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
)


@pytest.mark.parametrize("failure", [_BROKEN, "raise SystemExit(3)\n", "import no_such_module_xyz\n"])
def test_hook_never_raises_and_warns_once(tmp_path, hook_dir, failure):
    proc = _run(_CALL_HOOK, [_standin(tmp_path, failure, False), hook_dir])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["not loaded", "no torch"]
    assert proc.stderr.count(HOOK_MESSAGE) == 1, proc.stderr
    assert "TORCH_MSPTI_DISABLE=1" in proc.stderr


def test_hook_survives_warnings_as_errors(tmp_path, hook_dir):
    code = "import _torch_mspti_autoload as h\nh.autoload()\nprint('ok')\n"
    path = [_standin(tmp_path, _BROKEN, False), hook_dir]
    env = {k: v for k, v in os.environ.items() if k != "TORCH_MSPTI_DISABLE"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


def test_disable_returns_before_importing_the_package(tmp_path, hook_dir):
    proc = _run(_CALL_HOOK, [_standin(tmp_path, _BROKEN, False), hook_dir], TORCH_MSPTI_DISABLE="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["not loaded", "no torch"]
    assert HOOK_MESSAGE not in proc.stderr


def test_import_torch_survives_a_broken_package(tmp_path, hook_dir):
    code = "import os, sys, torch\nprint('torch ok', os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD'))\n"
    proc = _run(code, [_standin(tmp_path, _BROKEN, True), hook_dir])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["torch ok None"]  # the hook left the variable alone
    assert proc.stderr.count(HOOK_MESSAGE) == 1, proc.stderr
    assert "stand-in torch_mspti is broken" in proc.stderr


@pytest.mark.parametrize("first", ["torch", "torch_mspti"])
def test_either_import_order_loads_the_package(tmp_path, hook_dir, first):
    code = f"import sys, {first}\nimport torch_mspti\nprint(torch_mspti.LOADED, 'torch_npu' in sys.modules)\n"
    proc = _run(code, [_standin(tmp_path, _GOOD, True), hook_dir])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["True False"]
    assert HOOK_MESSAGE not in proc.stderr


@pytest.mark.parametrize("switch", [{"TORCH_MSPTI_DISABLE": "1"}, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}])
def test_switches_keep_import_torch_from_loading_it(tmp_path, hook_dir, switch):
    code = "import sys, torch\nprint('torch_mspti' in sys.modules)\n"
    proc = _run(code, [_standin(tmp_path, _BROKEN, True), hook_dir], **switch)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["False"]
    assert HOOK_MESSAGE not in proc.stderr


def test_hook_source_leaves_the_backend_to_torch_npu(hook_dir):
    source = (hook_dir / "_torch_mspti_autoload" / "__init__.py").read_text()
    code_lines = [line for line in source.splitlines() if line.startswith(("import", "from"))]
    assert all("torch" not in line for line in code_lines), code_lines
    for forbidden in ("rename_privateuse1_backend", "_register_device_module", "os.environ["):
        assert forbidden not in source


# ---- sdist and conda recipe ----------------------------------------------------------------


def test_sdist_carries_the_build_inputs(tmp_path):
    pytest.importorskip("scikit_build_core", reason="scikit-build-core is a build-only dependency")
    if not (REPO / "CMakeLists.txt").is_file():
        pytest.skip("not a source checkout")
    code = f"from scikit_build_core.build import build_sdist; print(build_sdist({str(tmp_path)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with tarfile.open(tmp_path / proc.stdout.strip().splitlines()[-1]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
        pkg_info = (
            sdist.extractfile(next(m for m in sdist.getmembers() if m.name.endswith("/PKG-INFO"))).read().decode()
        )
    for required in (
        "pyproject.toml",
        "CMakeLists.txt",
        "_build_support/torch_pin.py",
        "cmake/BuildInfo.cmake",
        "src/torch_mspti/_build_info.py.in",
        "src/_torch_mspti_autoload/__init__.py",
    ):
        assert required in names
    assert not [n for n in names if n.startswith(("build/", "dist/")) or n.endswith((".so", ".whl", ".pyc"))]
    assert "Dynamic: Requires-Dist" in pkg_info


def test_the_recipe_states_the_providers_base_version(torch_pin):
    recipe = (REPO / "recipe" / "recipe.yaml").read_text()
    assert f'version: "{torch_pin.BASE_VERSION}"' in recipe


def test_recipe_renders_for_both_linux_platforms():
    pytest.importorskip("rattler_build", reason="py-rattler-build is not installed (ci/install.sh installs it)")
    script = REPO / "ci" / "render_recipe.py"
    if not script.is_file():
        pytest.skip("ci/ is not beside the tests: a copy of tests/ without the source tree")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 3 Pythons x 8 torch minors (recipe/variants.yaml)
    assert "linux-64: 24 variant(s)" in proc.stdout
    assert "linux-aarch64: 24 variant(s)" in proc.stdout
    assert "osx-arm64: 0 variant(s)" in proc.stdout


def test_every_test_named_by_a_ci_script_exists():
    # a renamed test would leave a CI stage collecting nothing (pytest exit 5)
    import ast
    import re

    root = Path(__file__).resolve().parent.parent
    named = set()
    for script in (root / "ci").glob("*.sh"):
        named |= set(re.findall(r"(tests/[\w/]+\.py)::(\w+)", script.read_text()))
    assert named, "no test node ids found in ci/*.sh"
    for path, name in sorted(named):
        tree = ast.parse((root / path).read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in defined, f"{path}::{name} (named in ci/) does not exist"


def test_recipe_check_refuses_a_recipe_the_build_could_not_use(tmp_path):
    # Each defect of a copy of the recipe, checked against the sources (pyproject's build-system,
    # CMakeLists.txt's languages, the oldest simulated MSPTI), not against the recipe itself.
    pytest.importorskip("rattler_build", reason="py-rattler-build is not installed (ci/install.sh installs it)")
    script = REPO / "ci" / "render_recipe.py"
    if not script.is_file():
        pytest.skip("ci/ is not beside the tests: a copy of tests/ without the source tree")
    shutil.copytree(REPO / "recipe", tmp_path / "recipe")
    recipe = tmp_path / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    for old, new in (
        ("    - nanobind >=2.4\n", ""),
        ("    - ${{ compiler('c') }}\n", ""),
        ("        - cross-python_${{ target_platform }}\n", ""),
        ("    - numpy\n", "    - numpy\n    - libmspti\n"),
        ("    - cann-toolkit >=8.0.rc3\n", "    - cann-toolkit >=7.0\n"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    recipe.write_text(text)
    proc = subprocess.run(
        [sys.executable, str(script), "--recipe", str(recipe)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    other_platform = "linux-64" if platform.machine() == "aarch64" else "linux-aarch64"  # the cross-built one
    for message in (
        "host lacks 'nanobind >=2.4'",
        "no gcc_* compiler",
        f"a cross build needs 'cross-python_{other_platform}'",
        "CANN must not be a dependency: ['libmspti']",
        "expected ['cann-toolkit >=8.0.rc3']",
    ):
        assert message in proc.stderr, (message, proc.stderr[-3000:])
