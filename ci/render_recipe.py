#!/usr/bin/env python3
"""Offline lint of the conda recipe: render recipe/recipe.yaml with py-rattler-build.

Renders (no dependency solve, no network) for linux-64 and linux-aarch64, which must give at
least one variant each, and for osx-arm64, which must give none (``skip: not linux``). Prints
the variant count per platform and exits 1 on any render error or unexpected count.
Installs nothing: .ci/run (ci/install.sh) installs py-rattler-build from PyPI.

Rendering goes through ``rattler_build.build_recipes(render_only=True)``, the code path of
``rattler-build build --render-only``: unlike ``Stage0Recipe.render`` it applies ``build.skip``.
It prints its JSON on the process's stdout from native code, so each platform is rendered in
a child interpreter whose stdout is captured.
"""

from __future__ import annotations

import argparse
import ast
import json
import platform as host_platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipe" / "recipe.yaml"
BUILT_PLATFORMS = ("linux-64", "linux-aarch64")
SKIPPED_PLATFORMS = ("osx-arm64",)
NATIVE_PLATFORM = {"x86_64": "linux-64", "aarch64": "linux-aarch64"}.get(host_platform.machine(), "linux-64")
PYTHONS = {"3.10", "3.11", "3.12"}
# One variant per torch minor of the README's support table (recipe/variants.yaml zips pytorch
# with libtorch).
TORCH_MINORS = {"2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14"}

_CHILD = """
import sys, warnings
from pathlib import Path
warnings.simplefilter("ignore", DeprecationWarning)
import rattler_build as rb
recipe, platform, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    rb.build_recipes([recipe], render_only=True, target_platform=platform, output_dir=out)
except Exception as exc:
    # The CLI path's error is terse; the Stage0 API names the template and the reason.
    detail = ""
    try:
        variants = recipe.parent / "variants.yaml"
        config = rb.VariantConfig.from_file(variants) if variants.is_file() else None
        rb.Stage0Recipe.from_file(recipe).render(
            config, rb.RenderConfig(platform=rb.PlatformConfig(target_platform=platform)))
    except Exception as api_exc:
        detail = f"\\n{api_exc}"
    sys.exit(f"{type(exc).__name__}: {exc}{detail}")
"""


def render(recipe: Path, platform: str) -> list[dict]:
    """The rendered variants of ``recipe`` for ``platform``; raises RuntimeError on failure."""
    with tempfile.TemporaryDirectory(prefix="torch-mspti-render-") as out:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(recipe), platform, out],
            capture_output=True,
            text=True,
            cwd=out,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"render for {platform} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    try:
        rendered = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"render for {platform} printed no JSON list ({exc}):\n{proc.stdout[:2000]}") from None
    if not isinstance(rendered, list):
        raise RuntimeError(f"render for {platform} printed {type(rendered).__name__}, not a list")
    return rendered


# fmt is in host for torch 2.7, whose headers need it and do not ship it (cmake/FindTorchForPlugin.cmake).
HOST_BESIDES_PYPROJECT = ("python", "pip", "libtorch", "fmt")
COMPILER_PACKAGES = {"C": "gcc_", "CXX": "gxx_"}  # CMake language -> conda-forge compiler package


def required_from_sources() -> tuple[list[str], list[str], str]:
    """What the build needs, read from the sources rather than the recipe: (host specs from
    pyproject's build-system requires, torch as pytorch and variant-pinned so bare; compiler
    package prefixes for CMakeLists.txt's languages; the cmake spec of its minimum version)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    host = list(HOST_BESIDES_PYPROJECT)
    for text in pyproject["build-system"]["requires"]:
        req = Requirement(text)
        host.append("pytorch" if req.name == "torch" else f"{req.name} {req.specifier}".strip())
    cmake = (ROOT / "CMakeLists.txt").read_text()
    languages = re.search(r"project\([^)]*LANGUAGES([^)]*)\)", cmake, re.I)
    # CMake's default languages are C and CXX; a language without a conda compiler here is named
    compilers = [
        COMPILER_PACKAGES.get(lang.upper(), f"<a compiler package for {lang}>")
        for lang in (languages[1].split() if languages else ["C", "CXX"])
    ]
    minimum = re.search(r"cmake_minimum_required\(VERSION (\d+\.\d+(?:\.\d+)?)", cmake, re.I)
    return host, compilers, f"cmake >={minimum[1] if minimum else '?'}"


def same_spec(a: str, b: str) -> bool:
    """Two conda specs of the same package with the same set of bounds (in any order)."""
    name_a, _, bounds_a = a.partition(" ")
    name_b, _, bounds_b = b.partition(" ")
    return name_a == name_b and set(filter(None, bounds_a.replace(" ", "").split(","))) == set(
        filter(None, bounds_b.replace(" ", "").split(","))
    )


def simulator_generations_in(paths_py: Path) -> dict[str, str]:
    """``SIMULATOR_GENERATIONS`` of a ``torch_mspti/_paths.py`` (read, not imported): MSPTI
    generation -> simulator library, oldest first; empty when the file or the name is missing.
    Also read by ci/conda_package.py from the built package."""
    if not paths_py.is_file():
        return {}
    for node in ast.walk(ast.parse(paths_py.read_text())):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "SIMULATOR_GENERATIONS":
            return ast.literal_eval(node.value)
    return {}


def oldest_mspti_generation() -> str:
    """The oldest MSPTI generation torch-mspti supports: the first of SIMULATOR_GENERATIONS."""
    generations = simulator_generations_in(ROOT / "src" / "torch_mspti" / "_paths.py")
    if not generations:
        raise RuntimeError("src/torch_mspti/_paths.py has no SIMULATOR_GENERATIONS")
    return next(iter(generations))


def problems_in(platform: str, rendered: list[dict]) -> list[str]:
    """Checks on one built platform's variants; returns what is wrong."""
    problems = []
    host_needed, compilers, cmake_spec = required_from_sources()
    floor = f"cann-toolkit >={oldest_mspti_generation().lower()}"
    if not rendered:
        problems.append(f"{platform}: zero variants rendered")
    pythons = set()
    torches: set[str] = set()
    for entry in rendered:
        variant = entry["build_configuration"]["variant"]
        pythons.add(variant.get("python"))
        torch_minor = str(variant.get("pytorch", ""))
        torches.add(torch_minor)
        if str(variant.get("libtorch", "")) != torch_minor:
            problems.append(f"{platform}: pytorch and libtorch minors differ: {variant}")
        host = entry["recipe"]["requirements"].get("host", [])
        for bare in ("pytorch", "libtorch"):
            if bare not in host:
                problems.append(f"{platform}: host must list bare {bare!r} (variant-pinned), got {host}")
        build = [str(dep) for dep in entry["recipe"]["requirements"].get("build", [])]
        for compiler in compilers:
            if not any(dep.startswith(compiler) for dep in build):
                problems.append(f"{platform}: no {compiler}* compiler for CMakeLists.txt's languages in build: {build}")
        for spec in (cmake_spec, "ninja"):
            if spec not in build:
                problems.append(f"{platform}: build lacks {spec!r}: {build}")
        if platform != NATIVE_PLATFORM:  # conda-forge cross-compiles: python and torch run on the builder
            for spec in ("python", f"cross-python_{platform}", "pytorch"):
                if spec not in build:
                    problems.append(f"{platform}: a cross build needs {spec!r} in build: {build}")
        for spec in host_needed:
            if not any(same_spec(spec, str(dep)) for dep in host):
                problems.append(
                    f"{platform}: host lacks {spec!r} (pyproject's build-system or the build command): {host}"
                )
        # CANN: never a dependency (not on conda-forge; libmspti is dlopen'ed), only a constraint
        # whose floor is the oldest MSPTI generation torch-mspti supports.
        reqs = entry["recipe"]["requirements"]
        as_dependency = [
            d for key in ("build", "host", "run") for d in reqs.get(key, []) if re.search("cann|mspti", str(d), re.I)
        ]
        if as_dependency:
            problems.append(f"{platform}: CANN must not be a dependency: {as_dependency}")
        if [str(c) for c in reqs.get("run_constraints", [])] != [floor]:
            problems.append(f"{platform}: run constraints {reqs.get('run_constraints')}, expected [{floor!r}]")
    if rendered and torches != TORCH_MINORS:
        problems.append(f"{platform}: pytorch variants {sorted(torches)}, expected {sorted(TORCH_MINORS)}")
    if rendered and pythons != PYTHONS:
        problems.append(f"{platform}: python variants {sorted(map(str, pythons))}, expected {sorted(PYTHONS)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, default=RECIPE, help="recipe.yaml to render (default: %(default)s)")
    args = parser.parse_args(argv)

    problems: list[str] = []
    for platform in BUILT_PLATFORMS + SKIPPED_PLATFORMS:
        try:
            rendered = render(args.recipe.resolve(), platform)
        except RuntimeError as exc:
            problems.append(str(exc))
            print(f"{platform}: render error")
            continue
        print(f"{platform}: {len(rendered)} variant(s)", end="")
        if rendered:
            tags = ", ".join(
                e["build_configuration"]["hash"].get("prefix", "")
                + "h"
                + e["build_configuration"]["hash"].get("hash", "?")
                for e in rendered
            )
            print(f" ({tags})", end="")
        print()
        if platform in SKIPPED_PLATFORMS:
            if rendered:
                problems.append(f"{platform}: expected 0 variants (skip: not linux), got {len(rendered)}")
        else:
            problems.extend(problems_in(platform, rendered))

    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("recipe renders: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
