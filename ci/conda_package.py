#!/usr/bin/env python3
"""Builds the conda package from ``recipe/`` offline, checks it, installs it and runs it.

CI stage ``conda_package`` (``ci/conda_package.sh`` installs the tools and calls this). No conda
channel can be reached from CI, so everything the build and the install need comes from a local
``file://`` channel made here (``build/conda/channel``), and the steps are:

1. **Channel.** The run requirements' closure (``torch`` at the machine's version, ``rich``,
   ``numpy`` and what they need) is downloaded as wheels from the package index CI uses. Every
   wheel but torch's becomes a conda package with ``whl2conda``; torch's wheel (``whl2conda``
   refuses its ``+cpu`` local version) becomes ``pytorch`` with ``rattler_build.assemble_package``,
   its ``Requires-Dist`` named as whl2conda names packages (``conda_name``). ``python`` is a
   stand-in for the machine's interpreter: a virtual environment of it (``pyvenv.cfg`` and
   ``bin/python`` links), packaged, so a prefix made from the channel runs that interpreter on
   the prefix's own site-packages and sees nothing of the machine's. ``python_abi`` is the
   metapackage conda-forge's python pins to. The channel is indexed with ``rattler.index``.
2. **Build.** ``recipe/recipe.yaml`` is built by rattler-build (``rattler_build.build_recipes``)
   as a *CI variant* written to ``build/conda/recipe``: the same package, source, build number,
   run requirements, run constraints and about section, with these differences (each listed in
   ``VARIANT_CHANGES``).
3. **Inspect** the ``.conda``: metadata and contents (see ``inspect_tree``), then the same checks
   on tampered copies of it, each of which must be caught (``checks_can_fail``).
4. **Install** it with ``rattler.solve`` and ``rattler.install`` into a fresh prefix from the local
   channel alone, then run ``torch-mspti demo`` and ``torch-mspti doctor`` from that prefix, with
   the environment cleared of the machine's Python paths, and check that every kernel is linked.

Exits 1 with the list of problems when a check fails. Needs py-rattler-build, py-rattler,
whl2conda, PyYAML and the machine's torch (ci/install.sh); TORCH_DEVICE_BACKEND_AUTOLOAD=0 is set
for every probe of the machine's torch.
"""

from __future__ import annotations

import argparse
import asyncio
import configparser
import copy
import hashlib
import importlib.metadata as md
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import rattler
import rattler.index
import rattler.package_streaming
import rattler_build
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (ci/conda_package.sh installs tomli there)
    import tomli as tomllib
from conda_package_handling import conda_fmt
from packaging.markers import default_environment
from packaging.requirements import Requirement
from render_recipe import simulator_generations_in  # ci/, beside this script
from whl2conda.api.converter import CondaPackageFormat, Wheel2CondaConverter

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipe" / "recipe.yaml"
PLATFORM = "linux-64"
# What a conda-forge build of recipe/ has that the CI variant replaces, and why the package's
# contents stay the same (the README's conda section repeats this).
VARIANT_CHANGES = (
    "requirements.build (compiler, stdlib, cmake, ninja): none; the machine's g++ and cmake compile "
    "the same sources with the same CMake options, through make (rattler-build sets "
    "CMAKE_GENERATOR=Unix Makefiles, as on conda-forge), CMAKE_BUILD_PARALLEL_LEVEL=$CPU_COUNT",
    "requirements.host (python, pip, scikit-build-core, nanobind, pytorch, libtorch, fmt): none; the "
    "recipe's own build command runs with the machine's python in place of ${{ PYTHON }}, against its "
    "pip torch wheel (the same torch minor and headers), into $PREFIX with --prefix",
    "run: the pins host's run_exports would add for python, python_abi and pytorch are written out; "
    "those of libtorch, fmt and the compiler's runtime (libgcc, libstdcxx, __glibc) are absent: the "
    "channel's pytorch bundles libtorch, and the machine's compiler is not a conda package",
    "the binaries need the machine's glibc (2.34 for this build, Debian 12's gcc 12) where "
    "conda-forge's sysroot gives 2.17 and gcc 14",
    "build.string: py<python>_torch<minor>_ci_<number> (no variant hash: no host variant is used)",
    "bin/torch-mspti's shebang is set to $PREFIX/bin/python, which is what pip writes when python "
    "is in the host prefix",
    "tests: built with test=skip; the recipe's tests then run through rattler-build against the "
    "local channel, all but the CPU tier of the test suite (too long for this stage)",
)


# whl2conda warns for each marker requirement of a pure wheel it leaves out (convert_wheel checks
# that none of them applies here) and for numpy's bundled libraries (expected: a pip wheel's).
logging.getLogger("whl2conda").setLevel(logging.ERROR)


def log(message: str) -> None:
    print(f"conda_package: {message}", flush=True)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, **kwargs)


# ------------------------------------------------------------------------------------------------
# The machine


class Machine:
    """The interpreter and torch that build the package and stand in for conda's python."""

    def __init__(self) -> None:
        self.python = Path(sys.executable)  # unresolved: a venv's python keeps its site-packages
        major, minor = sys.version_info[:2]
        self.py = f"{major}.{minor}"
        self.py_next = f"{major}.{minor + 1}"
        self.py_full = ".".join(str(v) for v in sys.version_info[:3])
        self.cp = f"cp{major}{minor}"
        self.torch = md.version("torch").split("+")[0]  # 2.13.0 (the +cpu variant is the wheel's)
        t_major, t_minor = (int(v) for v in self.torch.split(".")[:2])
        self.torch_minor = f"{t_major}.{t_minor}"
        self.torch_next = f"{t_major}.{t_minor + 1}"
        self.site = f"lib/python{self.py}/site-packages"

    def run_pins(self) -> list[str]:
        """What the host's python and pytorch would add to run through their run_exports."""
        return [
            f"python >={self.py},<{self.py_next}.0a0",
            f"python_abi {self.py}.* *_{self.cp}",
            f"pytorch >={self.torch_minor},<{self.torch_next}.0a0",
        ]


# ------------------------------------------------------------------------------------------------
# 1. The local channel


def subdir_dir(channel: Path, subdir: str) -> Path:
    d = channel / subdir
    d.mkdir(parents=True, exist_ok=True)
    return d


def download_wheels(m: Machine, into: Path) -> list[Path]:
    """The wheels of the run requirements' closure, at the versions this machine has."""
    # torch exactly as installed (2.13.0+cpu: PyPI's plain 2.13.0 is the CUDA build); pip for the
    # recipe's pip_check test.
    pins = [f"torch=={md.version('torch')}"]
    for name in ("rich", "numpy", "pip"):  # the machine's versions when it has them
        try:
            pins.append(f"{name}=={md.version(name)}")
        except md.PackageNotFoundError:
            pins.append(name)
    run(
        [sys.executable, "-m", "pip", "download", "--progress-bar", "off", "-q", "--only-binary=:all:", "-d", into]
        + pins
    )
    return sorted(into.glob("*.whl"))


def conda_name(pypi_name: str) -> str:
    """A package's name in this channel: whl2conda's (the normalised PyPI name: it cannot name a
    package typing_extensions as conda-forge does), and pytorch for torch."""
    name = re.sub(r"[-_.]+", "-", pypi_name).lower()
    return "pytorch" if name == "torch" else name


def conda_requirements(wheel: Path, m: Machine) -> list[str]:
    """A wheel's Requires-Dist for this interpreter, as conda match specs (whl2conda's names)."""
    with zipfile.ZipFile(wheel) as z:
        metadata = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(metadata).decode().splitlines()
    env = default_environment()
    env.update(python_version=m.py, python_full_version=m.py_full, extra="")
    specs = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = conda_name(req.name)
        specs.append(f"{name} {req.specifier}".strip() if req.specifier else name)
    return specs


def assemble(channel: Path, name: str, version: str, build_string: str, files: Path, **about) -> Path:
    """A linux-64 package of the files under ``files`` (laid out as in a prefix), into the channel."""
    made = rattler_build.assemble_package(
        name=name,
        version=version,
        target_platform=PLATFORM,
        build_string=build_string,
        output_dir=subdir_dir(channel, PLATFORM),
        files_dir=files,
        detect_prefix=False,
        **about,
    )
    return Path(made.path)


def package_torch(wheel: Path, m: Machine, channel: Path, work: Path) -> Path:
    """conda ``pytorch`` from the torch wheel: its files under site-packages, its requirements."""
    stage = work / "stage-pytorch"
    shutil.rmtree(stage, ignore_errors=True)
    site = stage / m.site
    site.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    for data in site.glob("*.data"):  # headers/scripts of a wheel's .data: not needed to run torch
        shutil.rmtree(data)
    depends = m.run_pins()[:2]  # python and python_abi
    depends += conda_requirements(wheel, m)
    made = assemble(
        channel,
        "pytorch",
        m.torch,
        f"cpu_py{m.cp[2:]}_pypi_0",
        stage,
        depends=depends,
        summary=f"torch {m.torch} from its PyPI wheel {wheel.name} (CI's local channel)",
        license="BSD-3-Clause",
        compression_level=1,
    )
    shutil.rmtree(stage)
    return made


def package_python(m: Machine, channel: Path, work: Path) -> list[Path]:
    """``python`` (a virtual environment of the machine's interpreter) and ``python_abi``."""
    stage = work / "stage-python"
    shutil.rmtree(stage, ignore_errors=True)
    subprocess.run([m.python, "-m", "venv", "--without-pip", stage], check=True)
    for script in stage.glob("bin/[Aa]ctivate*"):
        script.unlink()  # they name the staging path
    # pyvenv.cfg without the `command` line (it names the staging path too).
    cfg = [line for line in (stage / "pyvenv.cfg").read_text().splitlines() if not line.startswith("command")]
    (stage / "pyvenv.cfg").write_text("\n".join(cfg) + "\n")
    (stage / m.site).mkdir(parents=True, exist_ok=True)
    (stage / m.site / "README-torch-mspti-ci").write_text(
        f"site-packages of a prefix whose python is {m.python} (torch-mspti CI's stand-in)\n"
    )
    python = assemble(
        channel,
        "python",
        m.py_full,
        f"machine_{m.cp}_0",
        stage,
        summary=f"stand-in for the machine's interpreter {m.python} (torch-mspti CI)",
        license="PSF-2.0",
    )
    empty = work / "stage-empty"
    empty.mkdir(exist_ok=True)
    (empty / "README-python_abi").write_text(f"python_abi {m.py} (metapackage)\n")
    abi = assemble(channel, "python_abi", m.py, f"0_{m.cp}", empty, summary="python ABI pin", license="BSD-3-Clause")
    shutil.rmtree(stage)
    return [python, abi]


def convert_wheel(wheel: Path, channel: Path, work: Path, m: Machine) -> Path:
    """A non-torch wheel as a conda package (noarch python, or linux-64 when it has binaries).
    whl2conda leaves out a pure wheel's requirements that carry an environment marker (it cannot
    evaluate them for noarch): the stage stops if one of them applies to this machine."""
    out = work / "whl2conda"
    shutil.rmtree(out, ignore_errors=True)
    converter = Wheel2CondaConverter(wheel, out)
    converter.allow_impure = True
    converter.interactive = False
    converter.out_format = CondaPackageFormat.V2
    # whl2conda writes `~=0.1` as `>=0.1,==0.*`, which rattler reads as "exactly 0" (mdurl for
    # markdown-it-py): the conda form of the prefix match is `0.*`.
    translate = converter.translate_version_spec
    converter.translate_version_spec = lambda spec: re.sub(r"==([^,]*\.\*)", r"\1", translate(spec))
    # Packed at zstd level 3, not 19: these packages only serve this run (19 takes ~1 min for numpy).
    conda_fmt.ZSTD_COMPRESS_LEVEL = 3
    made = Path(converter.convert())
    package = rattler_build.Package.from_file(made)
    have = {conda_name(d.split()[0]) for d in package.depends}
    dropped = [spec for spec in conda_requirements(wheel, m) if spec.split()[0] not in have]
    if dropped:
        raise SystemExit(f"whl2conda left {dropped} out of {made.name}'s depends: they apply to python {m.py_full}")
    subdir = package.subdir
    target = subdir_dir(channel, subdir) / made.name
    shutil.move(made, target)
    return target


def index(channel: Path) -> None:
    for sub in ("noarch", PLATFORM):
        subdir_dir(channel, sub)
    asyncio.run(rattler.index.index_fs(channel, force=True))


def make_channel(m: Machine, work: Path) -> Path:
    channel = work / "channel"
    wheels = work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for wheel in download_wheels(m, wheels):
        if wheel.name.startswith("torch-"):
            made = package_torch(wheel, m, channel, work)
        else:
            made = convert_wheel(wheel, channel, work, m)
        log(f"channel: {made.relative_to(channel)}")
    for made in package_python(m, channel, work):
        log(f"channel: {made.relative_to(channel)}")
    index(channel)
    for scratch in (wheels, work / "whl2conda", work / "stage-empty"):
        shutil.rmtree(scratch, ignore_errors=True)
    return channel


# ------------------------------------------------------------------------------------------------
# 2. The build


def variant_recipe(m: Machine, work: Path) -> Path:
    """recipe/recipe.yaml with the VARIANT_CHANGES applied, in build/conda/recipe."""
    recipe = yaml.safe_load(RECIPE.read_text())
    variant = copy.deepcopy(recipe)
    variant["source"] = {"path": str(ROOT)}
    reqs = variant["requirements"]
    reqs["build"] = []
    reqs["host"] = []
    conditional = [r for r in recipe["requirements"]["run"] if not isinstance(r, str)]
    if conditional:
        raise SystemExit(
            f"recipe/recipe.yaml's run requirements hold conditional entries {conditional}: "
            "update variant_recipe() and inspect_tree() in ci/conda_package.py to render them"
        )
    reqs["run"] = m.run_pins() + [r for r in recipe["requirements"]["run"] if r.split()[0] != "python"]
    # The recipe's own command, run by the machine's python into $PREFIX: a change to it (or an
    # `exit 1`) reaches this build.
    script = recipe["build"]["script"]
    if not isinstance(script, str) or "${{ PYTHON }} -m pip install ." not in script:
        raise SystemExit(
            f"recipe/recipe.yaml's build.script is no longer `${{{{ PYTHON }}}} -m pip install . ...` ({script!r}): "
            "update variant_recipe() in ci/conda_package.py to run the new command with the machine's python"
        )
    variant["build"]["string"] = f"py{m.cp[2:]}_torch{m.torch_minor.replace('.', '')}_ci_{recipe['build']['number']}"
    variant["build"]["script"] = {
        "env": {"MACHINE_PYTHON": str(m.python), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        "content": [
            'export PATH="$(dirname "$MACHINE_PYTHON"):$PATH"',
            'export CMAKE_BUILD_PARALLEL_LEVEL="${CPU_COUNT:-2}"',
            script.replace("${{ PYTHON }}", '"$MACHINE_PYTHON"') + ' --prefix "$PREFIX"',
            'sed -i "1s|^#!.*|#!$PREFIX/bin/python|" "$PREFIX/bin/torch-mspti"',
        ],
    }
    out = work / "recipe"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    header = "# Written by ci/conda_package.py from recipe/recipe.yaml; changes:\n" + "".join(
        f"#  - {change}\n" for change in VARIANT_CHANGES
    )
    (out / "recipe.yaml").write_text(header + yaml.safe_dump(variant, sort_keys=False))
    return out / "recipe.yaml"


def build(recipe: Path, channel: Path, work: Path) -> Path:
    """Builds the variant (its tests run afterwards, see run_recipe_tests); on failure prints the
    end of rattler-build's build log, which it does not print itself."""
    output = work / "output"
    shutil.rmtree(output, ignore_errors=True)
    # build_recipes and test_package are deprecated in 0.73 for Recipe/Package objects; the pinned
    # py-rattler-build (ci/conda_package.sh) still has them, and so does render_recipe.py's path.
    warnings.filterwarnings("ignore", "(build_recipes|test_package) is deprecated", DeprecationWarning)
    try:
        rattler_build.build_recipes(
            [recipe],
            channel=[channel.as_uri()],
            output_dir=output,
            ignore_recipe_variants=True,
            variant_overrides={"target_platform": [PLATFORM]},
            test="skip",
        )
    except Exception:
        for build_log in output.glob("bld/*/work/conda_build.log"):
            print(f"--- the last 80 lines of {build_log}", file=sys.stderr)
            print("\n".join(build_log.read_text(errors="replace").splitlines()[-80:]), file=sys.stderr)
        raise
    (made,) = (output / PLATFORM).glob("torch-mspti-*.conda")
    log(f"built {made} ({made.stat().st_size / 1e6:.1f} MB)")
    return made


def describe_test(test: dict) -> str:
    """One line for a recipe test: its kind and what it runs."""
    if "python" in test:
        spec = test["python"]
        return f"python: imports {', '.join(spec.get('imports', []))}, pip check {spec.get('pip_check', True)}"
    script = test.get("script", "")
    first = script[0] if isinstance(script, list) and script else str(script)
    return f"script: {first.strip().splitlines()[0][:100] if first.strip() else '?'}"


def machine_cann() -> str:
    """Why this machine may have CANN (its default install folder or an ``ASCEND_*`` variable of
    its set_env.sh naming an existing folder), else "". There, doctor finds a real libmspti.so: the recipe's doctor test
    and the install's doctor check, which expect a CANN-less builder, do not apply."""
    if Path("/usr/local/Ascend").exists():
        return "/usr/local/Ascend exists"
    names = sorted(k for k, v in os.environ.items() if k.startswith("ASCEND_") and v and Path(v).is_dir())
    return f"{', '.join(names)} name a CANN folder" if names else ""


def run_recipe_tests(package: Path, channel: Path) -> list[str]:
    """The recipe's own tests, run by rattler-build in a test environment from the channel: all
    but the CPU tier of the test suite (the test with `files`), which takes far longer than this
    stage may (build_and_test runs that suite on a pip install of the same sources, not on this
    package)."""
    tests = yaml.safe_load(RECIPE.read_text())["tests"]
    problems = []
    cann = machine_cann()
    for index, test in enumerate(tests):
        if cann and "doctor" in describe_test(test):
            log(f"recipe test {index} ({describe_test(test)}): skipped, it expects no CANN and {cann}")
            continue
        if "files" in test:
            log(
                f"recipe test {index} ({describe_test(test)}): skipped here (the CPU tier; build_and_test runs it on the same sources)"
            )
            continue
        log(f"recipe test {index} ({describe_test(test)})")
        try:
            rattler_build.test_package(package, channel=[channel.as_uri()], test_index=index)
        except Exception as exc:
            problems.append(f"recipe test {index} ({describe_test(test)}) failed: {exc}")
    return problems


# ------------------------------------------------------------------------------------------------
# 3. Inspection


def inspect_package(path: Path, m: Machine, wheel: Path) -> list[str]:
    """What is wrong with the built package's metadata and contents (empty when nothing is), read
    from the unpacked archive; then shows that each check can fail (``checks_can_fail``)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "package"
        extract(path, tree)
        problems = inspect_tree(tree, m, wheel)
        for problem in problems:
            log(f"PROBLEM: {problem}")
        if not problems:
            log(f"inspected: metadata, pins, entry points, license, shebang; site-packages as in {wheel.name}")
            problems += checks_can_fail(tree, Path(tmp), m, wheel)
    return problems


def inspect_tree(tree: Path, m: Machine, wheel: Path) -> list[str]:
    """The checks of step 3 on an unpacked package (``info/`` and the prefix's files). Each value
    is checked against a source the CI variant did not copy: the recipe only where the point is
    that the build kept it."""
    index_json = json.loads((tree / "info" / "index.json").read_text())
    recipe = yaml.safe_load(RECIPE.read_text())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    problems = []
    depends = list(index_json.get("depends", []))
    site_dir = tree / m.site
    dist_info = next(site_dir.glob("torch_mspti-*.dist-info"), site_dir / "no-dist-info")
    metadata = (dist_info / "METADATA").read_text() if (dist_info / "METADATA").is_file() else ""
    # The version is the wheel's public version (METADATA's 0.1.0+torch2.13 is 0.1.0 here: the
    # pytorch pin tells the minors apart).
    version = re.search(r"^Version: ([^+\s]+)", metadata, re.M)
    want = {"name": "torch-mspti", "version": version[1] if version else "?", "subdir": PLATFORM}
    for key, value in want.items():
        if str(index_json.get(key)) != value:
            problems.append(f"{key} is {index_json.get(key)!r}, expected {value!r}")
    # Run requirements: the recipe's kept by the build, and each of the wheel's own (pyproject's
    # dependencies, from METADATA) as a conda dependency with the same bounds.
    for spec in [r for r in recipe["requirements"]["run"] if isinstance(r, str) and r.split()[0] != "python"]:
        if spec not in depends:
            problems.append(f"run requirement {spec!r} of the recipe missing from depends {depends}")
    by_name = {conda_name(d.split()[0]): d for d in depends}
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:") or "extra ==" in line:
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        dep = by_name.get(conda_name(req.name))
        bounds = sorted(str(s) for s in req.specifier)
        # conda writes pip's `<2.14` as `<2.14.0a0` (before every pre-release of 2.14)
        conda_bounds = (
            sorted(b.removesuffix(".0a0") for b in dep.split(" ", 1)[1].split(",")) if dep and " " in dep else []
        )
        if dep is None or conda_bounds != bounds:
            problems.append(
                f"METADATA requires {req}, but depends has {dep!r} (expected {conda_name(req.name)} {','.join(bounds)})"
            )
    # CANN (or libmspti in any packaging) is never a dependency, only the run constraint, whose
    # floor is the oldest MSPTI generation torch-mspti supports (its oldest simulator).
    if any("cann" in d.split()[0].lower() or "mspti" in d.split()[0].lower() for d in depends):
        problems.append(f"CANN is a dependency (it may only be a run constraint): {depends}")
    constrains = list(index_json.get("constrains", []))
    generations = list(simulator_generations_in(site_dir / "torch_mspti" / "_paths.py"))
    floor = f"cann-toolkit >={generations[0].lower()}" if generations else "?"
    if constrains != [floor]:
        problems.append(f"run constraints {constrains}, expected [{floor!r}] (the oldest MSPTI generation supported)")
    # Files: site-packages as the checkout's wheel has them, the console script, the recipe's test
    # files (rattler-build keeps a test's files in the package), nothing else.
    paths = json.loads((tree / "info" / "paths.json").read_text())["paths"]
    files = [p["_path"] for p in paths]
    test_roots = {
        f"etc/conda/test-files/torch-mspti/{i}/{entry.rstrip('/')}"
        for i, test in enumerate(recipe["tests"])
        for entry in test.get("files", {}).get("source", [])
    }
    stray = [
        f
        for f in files
        if not f.startswith(m.site + "/")
        and f != "bin/torch-mspti"
        and not any(f == root or f.startswith(root + "/") for root in test_roots)
    ]
    if stray:
        problems.append(f"files outside site-packages, bin/torch-mspti and the recipe's test files: {stray[:10]}")
    site = m.site + "/"
    ext = f".cpython-{m.cp[2:]}-x86_64-linux-gnu.so"
    checks = {
        f"the extension for python {m.py}": lambda f: f.startswith(site + "torch_mspti/") and f.endswith(ext),
        "the console script bin/torch-mspti": lambda f: f == "bin/torch-mspti",
        "the autoload module": lambda f: f.startswith(site + "_torch_mspti_autoload/"),
    }
    for generation, name in simulator_generations_in(site_dir / "torch_mspti" / "_paths.py").items():
        checks[f"the simulated MSPTI {generation} ({name})"] = lambda f, n=name: f == site + f"torch_mspti/lib/{n}"
    if not generations:
        problems.append("torch_mspti/_paths.py names no simulated MSPTI generation")
    for what, check in checks.items():
        if not any(check(f) and (tree / f).is_file() for f in files):
            problems.append(f"{what} is not in the package")
    problems += license_problems(tree, index_json, pyproject)
    problems += entry_point_problems(dist_info)
    # The torch and python the extension was really built for, and the pins they call for.
    build_info = site_dir / "torch_mspti" / "_build_info.py"
    info = build_info.read_text() if build_info.is_file() else ""
    found = re.search(r'TORCH_VERSION = "(\d+)\.(\d+)', info)
    if not found:
        problems.append(f"_build_info.py names no torch version: {info!r}")
    else:
        major, minor = int(found[1]), int(found[2])
        pin = f"pytorch >={major}.{minor},<{major}.{minor + 1}.0a0"
        if pin not in depends:
            problems.append(f"built against torch {major}.{minor}, but depends {depends} lack {pin!r}")
        if f"Requires-Dist: torch<{major}.{minor + 1},>={major}.{minor}" not in metadata:
            problems.append(f"METADATA does not pin torch to {major}.{minor}")
    extensions = list(site_dir.glob("torch_mspti/_C.cpython-*-x86_64-linux-gnu.so"))
    tag = re.match(r"_C\.cpython-(\d)(\d+)-", extensions[0].name) if len(extensions) == 1 else None
    if not tag:
        problems.append(f"not one CPython extension torch_mspti/_C.cpython-*.so: {extensions}")
    else:
        py_major, py_minor = int(tag[1]), int(tag[2])
        for pin in (
            f"python >={py_major}.{py_minor},<{py_major}.{py_minor + 1}.0a0",
            f"python_abi {py_major}.{py_minor}.* *_cp{py_major}{py_minor}",
        ):
            if pin not in depends:
                problems.append(f"extension for python {py_major}.{py_minor}, but depends {depends} lack {pin!r}")
    problems += same_files_as_wheel(site_dir, wheel)
    problems += integrity_problems(tree, index_json, paths, m, recipe, pyproject)
    # The console script runs the installing prefix's python: its shebang is the build prefix,
    # which the package records for replacement at install time.
    entry = next((p for p in paths if p["_path"] == "bin/torch-mspti"), {})
    placeholder = entry.get("prefix_placeholder", "")
    script = tree / "bin" / "torch-mspti"
    first = script.read_text().splitlines()[0] if script.is_file() else ""
    if not placeholder or first != f"#!{placeholder}/bin/python":
        problems.append(
            f"bin/torch-mspti starts {first[:80]!r}, not the build prefix's python (placeholder {placeholder[:60]!r})"
        )
    return problems


# bin/torch-mspti after its shebang: pip's console-script stub for torch_mspti_cli:main.
CONSOLE_STUB = [
    "# -*- coding: utf-8 -*-",
    "import re",
    "import sys",
    "from torch_mspti_cli import main",
    "if __name__ == '__main__':",
    "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])",
    "    sys.exit(main())",
]


def integrity_problems(
    tree: Path, index_json: dict, paths: list[dict], m: Machine, recipe: dict, pyproject: dict
) -> list[str]:
    """What the conda metadata says beyond name and version, and that it describes the files: the
    exact depends; the platform and build; no features, run_exports or link scripts; paths.json
    listing exactly the files, as plain hard links with their sizes and hashes, a prefix placeholder
    only in the console script; the console script's body and mode; only hash-checked or
    timestamped .pyc files beside their sources."""
    problems = []
    run = [r for r in recipe["requirements"]["run"] if r.split()[0] != "python"]
    if sorted(index_json.get("depends", [])) != sorted(m.run_pins() + run):
        problems.append(f"depends {index_json.get('depends')}, expected exactly {m.run_pins() + run}")
    number = recipe["build"]["number"]
    expected = {
        "arch": "x86_64",
        "platform": "linux",
        "build_number": number,
        "build": f"py{m.cp[2:]}_torch{m.torch_minor.replace('.', '')}_ci_{number}",
    }
    for key, value in expected.items():
        if index_json.get(key) != value:
            problems.append(f"index.json {key} is {index_json.get(key)!r}, expected {value!r}")
    for key in ("noarch", "track_features", "features"):
        if key in index_json:
            problems.append(f"index.json has {key}: {index_json[key]!r} (a linux-64 package of this recipe has none)")
    for name in ("run_exports.json", "link.json"):
        if (tree / "info" / name).exists():
            problems.append(f"info/{name} exists: the recipe declares no run_exports and no noarch link")
    about = json.loads((tree / "info" / "about.json").read_text()) if (tree / "info" / "about.json").is_file() else {}
    if about.get("license") != pyproject["project"]["license"]:
        problems.append(
            f"about.json license {about.get('license')!r}, pyproject says {pyproject['project']['license']!r}"
        )
    listed = {p["_path"]: p for p in paths}
    on_disk = {
        str(f.relative_to(tree)) for f in tree.rglob("*") if not f.is_dir() and f.relative_to(tree).parts[0] != "info"
    }
    if set(listed) != on_disk:
        problems.append(
            f"paths.json and the files differ: listed only {sorted(set(listed) - on_disk)[:5]}, "
            f"present only {sorted(on_disk - set(listed))[:5]}"
        )
    for path, entry in sorted(listed.items()):
        f = tree / path
        if entry.get("path_type") != "hardlink" or f.is_symlink():
            problems.append(
                f"{path} is a {entry.get('path_type')}{' (a symlink)' if f.is_symlink() else ''}, not a file"
            )
        elif f.is_file() and (
            f.stat().st_size != entry.get("size_in_bytes")
            or hashlib.sha256(f.read_bytes()).hexdigest() != entry.get("sha256")
        ):
            problems.append(f"{path}: size or sha256 differs from paths.json")
        if "prefix_placeholder" in entry and path != "bin/torch-mspti":
            problems.append(f"{path} has a prefix placeholder (only bin/torch-mspti may)")
    script = tree / "bin" / "torch-mspti"
    if script.is_file():
        if script.read_text().splitlines()[1:] != CONSOLE_STUB:
            problems.append(
                f"bin/torch-mspti runs {script.read_text().splitlines()[1:]}, not pip's stub for torch_mspti_cli:main"
            )
        if not script.stat().st_mode & 0o111:
            problems.append("bin/torch-mspti is not executable")
    for pyc in (tree / m.site).rglob("*.pyc"):
        source = pyc.parent.parent / (pyc.name.split(".")[0] + ".py")
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        if pyc.parent.name != "__pycache__" or not source.is_file() or flags == 1:
            problems.append(f"{pyc.relative_to(tree)}: a .pyc without its source, or one Python runs unchecked")
    return problems


def license_problems(tree: Path, index_json: dict, pyproject: dict) -> list[str]:
    """The license expression is the wheel's (pyproject), and info/licenses holds the project's
    Apache-2.0 text and the notices of what is compiled into the extension (nanobind's the same
    bytes as the nanobind this machine built with)."""
    problems = []
    if index_json.get("license") != pyproject["project"]["license"]:
        problems.append(f"license {index_json.get('license')!r}, pyproject says {pyproject['project']['license']!r}")
    licenses = tree / "info" / "licenses"
    found = sorted(str(f.relative_to(licenses)) for f in licenses.rglob("*") if f.is_file())
    notices = "third_party/licenses"
    expected = sorted(["LICENSE"] + [f"{notices}/{f.name}" for f in (ROOT / notices).glob("*.txt")])
    if found != expected:
        problems.append(f"info/licenses holds {found}, expected {expected}")
    own = (licenses / "LICENSE").read_text() if (licenses / "LICENSE").is_file() else ""
    if not re.match(r"\s*Apache License\s+Version 2\.0, January 2004", own):
        problems.append("info/licenses/LICENSE is not the Apache License 2.0 text")
    try:
        nanobind = next(f for f in md.distribution("nanobind").files or [] if f.name == "LICENSE")
        ours = licenses / notices / "nanobind.txt"
        if ours.is_file() and ours.read_text() != nanobind.read_text():
            problems.append("info/licenses/nanobind.txt is not the LICENSE of the nanobind this machine built with")
    except (md.PackageNotFoundError, StopIteration):
        log("nanobind's own LICENSE not found on this machine: nanobind.txt checked by name only")
    robin_file = licenses / notices / "robin-map.txt"
    robin = robin_file.read_text() if robin_file.is_file() else ""
    if "MIT License" not in robin or "Thibaut Goetghebuer-Planchon" not in robin:
        problems.append("info/licenses/robin-map.txt is not robin_map's MIT notice")
    return problems


def entry_point_problems(dist_info: Path) -> list[str]:
    """The torch.backends entry point (autoload) and the console script, each in its section."""
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # entry point names are case-sensitive
    path = dist_info / "entry_points.txt"
    try:
        parser.read_string(path.read_text() if path.is_file() else "")
    except configparser.Error as exc:
        return [f"{path.name} does not parse: {exc}"]
    problems = []
    for section, name, target in (
        ("torch.backends", "torch_mspti", "_torch_mspti_autoload:autoload"),
        ("console_scripts", "torch-mspti", "torch_mspti_cli:main"),
    ):
        if parser.get(section, name, fallback=None) != target:
            problems.append(f"no {section} entry point {name} = {target} in {path.name}")
    return problems


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _replace_text(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"checks_can_fail: {old!r} is not in {path}: update the tampering to the package")
    path.write_text(text.replace(old, new, 1))


def tamperings(m: Machine) -> dict[str, tuple[str, object]]:
    """Wrong packages to make from a good one: what is changed, the fragment of the problem that
    must name it, and the change (a function of the unpacked tree)."""
    site = m.site
    info = lambda t: t / "info" / "index.json"  # noqa: E731
    dist = lambda t: next((t / site).glob("torch_mspti-*.dist-info"))  # noqa: E731
    lib = lambda t, name: t / site / "torch_mspti" / "lib" / name  # noqa: E731
    depends_without = lambda name: lambda d: d.update(depends=[x for x in d["depends"] if x.split()[0] != name])  # noqa: E731
    other_torch = f"{m.torch_minor.split('.')[0]}.{int(m.torch_minor.split('.')[1]) + 1}"

    def swap_generations(t: Path) -> None:  # two libraries with the same symbols, other SONAMEs
        a, b = lib(t, "libmspti_sim_8_1.so"), lib(t, "libmspti_sim_8_2.so")
        data = a.read_bytes()
        a.write_bytes(b.read_bytes())
        b.write_bytes(data)

    def unchecked_pyc(t: Path) -> None:  # flags 1: an unchecked hash-based .pyc
        pyc = next((t / site / "torch_mspti").glob("__pycache__/*.pyc"))
        data = pyc.read_bytes()
        pyc.write_bytes(data[:4] + (1).to_bytes(4, "little") + data[8:])

    def outside(t: Path) -> None:  # a file the package lists outside its allowed places
        (t / "lib").mkdir(exist_ok=True)
        shutil.copy2(lib(t, "libmspti_sim.so"), t / "lib" / "libmspti.so")
        _edit_json(t / "info" / "paths.json", lambda d: d["paths"].append({"_path": "lib/libmspti.so"}))

    return {
        "the pytorch pin dropped": ("lack 'pytorch", lambda t: _edit_json(info(t), depends_without("pytorch"))),
        "CANN as a dependency": (
            "CANN is a dependency",
            lambda t: _edit_json(info(t), lambda d: d["depends"].append("ascend-cann-toolkit >=8.0")),
        ),
        "libmspti as a dependency": (
            "CANN is a dependency",
            lambda t: _edit_json(info(t), lambda d: d["depends"].append("libmspti")),
        ),
        "no run constraint": ("run constraints", lambda t: _edit_json(info(t), lambda d: d.update(constrains=[]))),
        "a run constraint that admits CANN without MSPTI": (
            "run constraints",
            lambda t: _edit_json(info(t), lambda d: d.update(constrains=["cann-toolkit >=7.0"])),
        ),
        "a recipe run requirement dropped": (
            "run requirement 'rich",
            lambda t: _edit_json(info(t), depends_without("rich")),
        ),
        "a wheel requirement's bound lost": (
            "METADATA requires rich>=13",
            lambda t: _edit_json(
                info(t), lambda d: d.update(depends=[("rich" if x.startswith("rich ") else x) for x in d["depends"]])
            ),
        ),
        "another version": ("version is '0.0.1'", lambda t: _edit_json(info(t), lambda d: d.update(version="0.0.1"))),
        "another license field": ("license 'MIT'", lambda t: _edit_json(info(t), lambda d: d.update(license="MIT"))),
        "built for another torch": (
            f"built against torch {other_torch}",
            lambda t: _replace_text(
                t / site / "torch_mspti" / "_build_info.py",
                f'TORCH_VERSION = "{m.torch_minor}',
                f'TORCH_VERSION = "{other_torch}',
            ),
        ),
        "the extension for another python": (
            "extension for python 3.99",
            lambda t: next((t / site / "torch_mspti").glob("_C.cpython-*.so")).rename(
                t / site / "torch_mspti" / "_C.cpython-399-x86_64-linux-gnu.so"
            ),
        ),
        "no simulated MSPTI": ("(libmspti_sim.so) is not in the package", lambda t: lib(t, "libmspti_sim.so").unlink()),
        "a simulated MSPTI that is no library": (
            "libmspti_sim_8_2.so is not an ELF object",
            lambda t: lib(t, "libmspti_sim_8_2.so").write_bytes(b"garbage"),
        ),
        "a changed Python file": (
            "torch_mspti/config.py differs",
            lambda t: (t / site / "torch_mspti" / "config.py").write_text("# changed\n"),
        ),
        "no torch.backends entry point": (
            "no torch.backends entry point",
            lambda t: _replace_text(dist(t) / "entry_points.txt", "[torch.backends]", "[torch.backend]"),
        ),
        "the autoload entry in another section": (
            "no torch.backends entry point",
            lambda t: _replace_text(dist(t) / "entry_points.txt", "[torch.backends]", "[torch.backends]\n[other]"),
        ),
        "no console script entry": (
            "no console_scripts entry point",
            lambda t: _replace_text(dist(t) / "entry_points.txt", "torch-mspti = ", "torch-mspti2 = "),
        ),
        "METADATA without the torch pin": (
            "METADATA does not pin torch",
            lambda t: _replace_text(dist(t) / "METADATA", "Requires-Dist: torch<", "Requires-Dist: torch-x<"),
        ),
        "another license text": (
            "not the Apache License",
            lambda t: (t / "info" / "licenses" / "LICENSE").write_text("MIT\n"),
        ),
        "no nanobind notice": (
            "info/licenses holds",
            lambda t: (t / "info" / "licenses" / "third_party" / "licenses" / "nanobind.txt").unlink(),
        ),
        "a stray file in site-packages": (
            "only in the package",
            lambda t: (t / site / "torch_mspti" / "stray.txt").write_text("x\n"),
        ),
        "a library outside site-packages": ("files outside site-packages", outside),
        "two simulated MSPTI generations swapped": ("NEEDED and SONAME of the wheel's", swap_generations),
        "an extra dependency": (
            "expected exactly",
            lambda t: _edit_json(info(t), lambda d: d["depends"].append("cudatoolkit >=11.8")),
        ),
        "a file listed that is not there": (
            "paths.json and the files differ",
            lambda t: _edit_json(t / "info" / "paths.json", lambda d: d["paths"].append({"_path": "ghost.py"})),
        ),
        "run_exports added": (
            "info/run_exports.json exists",
            lambda t: (t / "info" / "run_exports.json").write_text("{}"),
        ),
        "another console-script body": (
            "not pip's stub",
            lambda t: _replace_text(t / "bin" / "torch-mspti", "sys.exit(main())", "sys.exit(0)"),
        ),
        "a .pyc Python runs unchecked": ("runs unchecked", unchecked_pyc),
        "a fixed shebang": (
            "bin/torch-mspti starts",
            lambda t: _replace_text(t / "bin" / "torch-mspti", "#!", "#!/usr/bin/env python\n#"),
        ),
    }


def checks_can_fail(tree: Path, tmp: Path, m: Machine, wheel: Path) -> list[str]:
    """Each check of inspect_tree named by a tampering finds it in a copy of the good package:
    a check that cannot fail would let a wrong package through."""
    problems = []
    for what, (fragment, change) in tamperings(m).items():
        copy_dir = tmp / "tampered"
        shutil.rmtree(copy_dir, ignore_errors=True)
        shutil.copytree(tree, copy_dir, symlinks=True)
        try:
            change(copy_dir)
        except (OSError, StopIteration) as exc:
            raise SystemExit(
                f"checks_can_fail: tampering {what!r} found no file to change ({exc!r}): update tamperings() "
                "in ci/conda_package.py to the package's files"
            ) from None
        found = inspect_tree(copy_dir, m, wheel)
        if not any(fragment in p for p in found):
            problems.append(f"the checks let a package with {what} through (expected {fragment!r} in {found})")
    shutil.rmtree(tmp / "tampered", ignore_errors=True)
    log(f"the checks found each of {len(tamperings(m))} tampered packages" if not problems else "tampering missed")
    return problems


def same_files_as_wheel(site: Path, wheel: Path) -> list[str]:
    """The package's site-packages hold what the wheel of this checkout holds: the CI variant
    changes how the build is run, not what it makes. The same file names; every file but the
    shared objects byte for byte; each shared object an ELF file that defines the same dynamic
    symbols as the wheel's (the two builds compile the same sources separately)."""
    ignored = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")  # written by the installer
    with zipfile.ZipFile(wheel) as z:
        in_wheel = {n: z.read(n) for n in z.namelist() if not n.endswith("/") and not n.endswith(ignored)}
    in_package = {str(f.relative_to(site)) for f in site.rglob("*") if f.is_file() and not f.name.endswith(ignored)}
    in_package = {f for f in in_package if "__pycache__" not in f}
    if set(in_wheel) != in_package:
        return [
            f"site-packages differ from {wheel.name}: only in the package {sorted(in_package - set(in_wheel))[:10]}, "
            f"only in the wheel {sorted(set(in_wheel) - in_package)[:10]}"
        ]
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in sorted(in_wheel.items()):
            mine = (site / name).read_bytes()
            if not name.endswith(".so"):
                if mine != data:
                    problems.append(f"{name} differs from the wheel's")
                continue
            theirs = Path(tmp) / "wheel.so"
            theirs.write_bytes(data)
            expected = dynamic_symbols(theirs)
            if not expected:
                problems.append(f"nm read no dynamic symbol from the wheel's {name} (binutils missing?)")
            elif (
                not mine.startswith(b"\x7fELF")
                or dynamic_symbols(site / name) != expected
                or linkage(site / name) != linkage(theirs)
            ):
                problems.append(
                    f"{name} is not an ELF object with the dynamic symbols, NEEDED and SONAME of the wheel's"
                )
    return problems


def linkage(so: Path) -> list[str]:
    """A shared object's NEEDED and SONAME entries (binutils' readelf); RPATH differs by design
    (rattler-build rewrites it)."""
    out = subprocess.run(["readelf", "-d", so], capture_output=True, text=True)
    return sorted(
        line.split(None, 1)[1] for line in out.stdout.splitlines() if "(NEEDED)" in line or "(SONAME)" in line
    )


def dynamic_symbols(so: Path) -> set[str]:
    """The names of the dynamic symbols a shared object defines (binutils' nm)."""
    out = subprocess.run(["nm", "-D", "--defined-only", "--format=just-symbols", so], capture_output=True, text=True)
    return set(out.stdout.split()) if out.returncode == 0 else set()


def checkout_wheel(work: Path) -> Path:
    """The wheel of this checkout, built by the machine's python (reusing the build tree of an
    earlier wheel build: after CI's wheel_report stage this takes seconds)."""
    out = work / "checkout-wheel"
    shutil.rmtree(out, ignore_errors=True)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", out, ROOT])
    (wheel,) = out.glob("torch_mspti-*.whl")
    return wheel


def extract(path: Path, into: Path) -> None:
    """Unpacks a .conda (a zip of zstd tarballs) with py-rattler."""
    rattler.package_streaming.extract(path, into)


# ------------------------------------------------------------------------------------------------
# 4. Install and run


def install(channel: Path, work: Path) -> Path:
    prefix = work / "prefix"
    shutil.rmtree(prefix, ignore_errors=True)
    records = asyncio.run(
        rattler.solve(
            [rattler.Channel(channel.as_uri())],
            ["torch-mspti"],
            platforms=[PLATFORM, "noarch"],
            virtual_packages=rattler.VirtualPackage.detect(),
        )
    )
    log("solved: " + ", ".join(f"{r.name.normalized} {r.version}" for r in records))
    cache = work / "pkgs"
    asyncio.run(rattler.install(records, prefix, cache_dir=cache, show_progress=False))
    shutil.rmtree(cache)  # the prefix keeps its files (hard links or copies)
    return prefix


def run_installed(prefix: Path, work: Path, m: Machine) -> list[str]:
    """Runs the demo and doctor from the prefix; returns what went wrong."""
    machine_paths = ("PYTHON", "VIRTUAL_ENV", "CONDA", "TORCH_MSPTI", "TORCH_DEVICE_BACKEND_AUTOLOAD", "LD_", "ASCEND_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(machine_paths)}
    env["PATH"] = f"{prefix / 'bin'}:/usr/bin:/bin"
    problems = []
    where = subprocess.run(
        # `import torch` alone must load the plugin (the torch.backends entry point).
        [prefix / "bin" / "python", "-c", "import sys, torch; m = sys.modules['torch_mspti']; print(m.__file__, torch.__file__)"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    log(f"imports from: {where.stdout.strip()} {where.stderr.strip()[-500:]}")
    for line in where.stdout.split():
        if not Path(line).resolve().is_relative_to(prefix.resolve()):
            problems.append(f"{line} is not inside the prefix {prefix}")
    if where.returncode != 0:
        problems.append(f"import failed: {where.stderr[-2000:]}")
        return problems
    # Every simulated MSPTI generation loads from the prefix and exports MSPTI's entry point.
    libs = subprocess.run(
        [prefix / "bin" / "python", "-c", (
            "import ctypes, torch_mspti\n"
            "for g in torch_mspti.simulator_generations():\n"
            "    ctypes.CDLL(torch_mspti.simulator_library(g)).msptiSubscribe\n"
            "    print(g, torch_mspti.simulator_library(g))"
        )],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    loaded = libs.stdout.split("\n")
    for line in filter(None, loaded):
        if not Path(line.split()[-1]).resolve().is_relative_to(prefix.resolve()):
            problems.append(f"simulated MSPTI {line} is not inside the prefix {prefix}")
    log(f"simulated MSPTI generations loaded: {', '.join(line.split()[0] for line in loaded if line)}")
    if libs.returncode != 0 or len([line for line in loaded if line]) != len(
        simulator_generations_in(prefix / m.site / "torch_mspti" / "_paths.py")
    ):
        problems.append(f"a simulated MSPTI does not load from the prefix: {libs.stdout} {libs.stderr[-1500:]}")
    trace = work / "demo-trace.json"
    demo = subprocess.run(
        [prefix / "bin" / "torch-mspti", "demo", "--device", "sim", "--out", trace],
        env=env, capture_output=True, text=True, cwd=work,
    )  # fmt: skip
    print(demo.stdout + demo.stderr[-3000:], flush=True)
    if demo.returncode != 0:
        problems.append(f"torch-mspti demo exited {demo.returncode}")
        return problems
    doctor = subprocess.run(
        [prefix / "bin" / "torch-mspti", "doctor", "--json", trace], env=env, capture_output=True, text=True
    )
    report = json.loads(doctor.stdout) if doctor.stdout.strip().startswith("{") else {}
    log(f"doctor TRACE exit {doctor.returncode}: {json.dumps(report)[:600]}")
    problems += linked_problems(report, prefix)
    plain = subprocess.run(
        [prefix / "bin" / "torch-mspti", "doctor", "--json"], env=env, capture_output=True, text=True
    )
    lib = json.loads(plain.stdout).get("library", {}) if plain.stdout.strip().startswith("{") else {}
    log(f"doctor exit {plain.returncode}: library {lib}")
    cann = machine_cann()
    if cann:
        log(f"doctor without CANN: not checked, {cann}")
    elif plain.returncode != 1 or lib.get("available") is not False or "libmspti" not in str(lib.get("reason")):
        problems.append(f"doctor without CANN: exit {plain.returncode} (expected 1 naming libmspti), library {lib}")
    return problems


def linked_problems(report: dict, prefix: Path) -> list[str]:
    """``doctor --json TRACE``'s report: a valid trace whose every kernel is linked (verified)."""
    if not report:
        return ["doctor --json TRACE printed no report"]
    stats = report.get("check", {}).get("stats", {})
    kernels = stats.get("kernels", 0)
    problems = []
    if not report.get("ok"):
        problems.append(f"doctor: {report.get('verdict')}")
    if kernels <= 0:
        problems.append(f"the demo's trace holds no kernel: {stats}")
    if stats.get("linked_kernels") != kernels or stats.get("link_states", {}).get("verified") != kernels:
        problems.append(f"not every kernel is linked to its op: {stats}")
    library = report.get("check", {}).get("health", {}).get("library", {}).get("path") or ""
    if not Path(library).resolve().is_relative_to(prefix.resolve()):
        problems.append(f"the demo's MSPTI library {library!r} is not the prefix's simulator")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "conda", help="work directory")
    parser.add_argument("--reuse-channel", action="store_true", help="keep the dependency channel of an earlier run")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    m = Machine()
    log(f"machine: python {m.py_full} ({m.python}), torch {m.torch}")
    channel = work / "channel"
    if not (args.reuse_channel and (channel / "noarch" / "repodata.json").is_file()):
        shutil.rmtree(channel, ignore_errors=True)
        channel = make_channel(m, work)
    for old in channel.glob(f"{PLATFORM}/torch-mspti-*.conda"):
        old.unlink()
    package = build(variant_recipe(m, work), channel, work)
    problems = inspect_package(package, m, checkout_wheel(work))
    shutil.copy2(package, channel / PLATFORM / package.name)
    index(channel)
    problems += run_recipe_tests(package, channel)
    prefix = install(channel, work)
    problems += run_installed(prefix, work, m)
    if problems:
        print("\nconda_package: FAILED\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    log(f"ok: {package.name} built, inspected, installed into {prefix} and run")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # py-rattler's runtime threads can abort the interpreter's finalisation ("PyGILState_Release:
    # thread state ... must be current"), which would turn a pass into exit 134.
    os._exit(code)
