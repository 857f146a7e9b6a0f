"""The Python packages of ``src/`` form no import circle, and the library never imports the CLI.

``src/`` holds three packages: ``torch_mspti`` (the library, which imports torch),
``torch_mspti_cli`` (the ``torch-mspti`` command line, torch-free until a command needs the
library) and ``_torch_mspti_autoload`` (the ``torch.backends`` hook). The CLI depends on the
library; the library imports nothing from the CLI. The graph is read from the source (``ast``):
every ``import`` and ``from ... import`` of every module, at module level or inside a function,
``if TYPE_CHECKING`` blocks aside, and ``importlib.import_module`` calls with a literal name.
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``;
importing ``a.b`` is an edge to ``a.b`` only (Python also runs ``a/__init__`` first, but a
package's ``__init__`` importing its own submodules is how packages work, not a circle).

The command line must start without torch, so it keeps torch-free copies of two library facts
for ``--help`` and ``check``; the last tests check that those copies equal the library's.

The graph tests are pure Python (no build, no torch); the copy tests need the built extension.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
LIBRARY, CLI = "torch_mspti", "torch_mspti_cli"


# Modules the build makes: the nanobind extension (bindings/CMakeLists.txt installs _C into
# torch_mspti) and files generated from a template (``x.py.in`` -> ``x.py``). They import nothing
# of ours, so they are leaves; without them ``from . import _C`` would read as an import of the
# package itself.
EXTENSIONS = (f"{LIBRARY}._C",)


def module_names(src: Path) -> dict[str, Path | None]:
    """Every Python module under ``src`` by dotted name (a package by its own name); the built
    ones (:data:`EXTENSIONS`, templates) map to None."""
    modules: dict[str, Path | None] = dict.fromkeys(EXTENSIONS)
    for path in sorted([*src.rglob("*.py"), *src.rglob("*.py.in")]):
        rel = path.relative_to(src)
        parts = [*rel.parts[:-1], rel.name.removesuffix(".in").removesuffix(".py")]
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            modules[".".join(parts)] = path if path.suffix == ".py" else None
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name>`` written in ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(module: str, path: Path, known: Iterable[str], missing: list[str] | None = None) -> set[str]:
    """The modules of ``known`` that ``module`` (the file ``path``) imports. A module path under
    one of the top-level packages of ``known`` that is not in ``known`` (``import torch_mspti.gone``, ``from .gone import x``) is
    appended to ``missing``."""
    known = set(known)
    tops = {name.partition(".")[0] for name in known}
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str, edge: bool = True) -> None:
        if name.partition(".")[0] in tops and name not in known and missing is not None:
            missing.append(f"{module} imports {name}, which is not a module")
        # the named module when it is one of ours, else the closest enclosing one of ours
        while name and name not in known:
            name = name.rpartition(".")[0]
        if edge and name and name != module:
            found.add(name)

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _is_type_checking(node.test):  # never runs: annotations only
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                add(alias.name)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            # `from X import y`: X must be a module; y is a submodule of X (an edge to it) or a
            # name defined in X (an edge to X)
            base = _resolve(module, is_package, node.level, node.module)
            subs = [f"{base}.{alias.name}" for alias in node.names]
            if all(sub in known for sub in subs):
                add(base, edge=False)
            for sub in subs:
                add(sub if sub in known else base)

        def visit_Call(self, node: ast.Call) -> None:
            func = node.func
            named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
                isinstance(func, ast.Name) and func.id == "import_module"
            )
            if named and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                target = node.args[0].value
                if target.startswith("."):
                    level = len(target) - len(target.lstrip("."))
                    add(_resolve(module, is_package, level, target.lstrip(".") or None))
                else:
                    add(target)
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def import_graph(src: Path, missing: list[str] | None = None) -> dict[str, set[str]]:
    modules = module_names(src)
    return {name: imports_of(name, path, modules, missing) if path else set() for name, path in modules.items()}


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import circles of ``graph``: one member list per strongly connected component of more
    than one module (or a module importing itself), each sorted (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def library_to_cli(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """``a -> b`` for every import of a CLI module by a library module."""

    def inside(name: str, package: str) -> bool:
        return name == package or name.startswith(package + ".")

    return sorted(
        f"{a} -> {b}" for a, targets in graph.items() if inside(a, LIBRARY) for b in targets if inside(b, CLI)
    )


# ----------------------------------------------------------------------------------- the checks


def test_the_extension_modules_are_the_ones_the_build_installs():
    cmake = (SRC.parent / "bindings" / "CMakeLists.txt").read_text(encoding="utf-8")
    for name in EXTENSIONS:
        package, _, module = name.rpartition(".")
        assert (
            f"nanobind_add_module({module} " in cmake
            and f"install(TARGETS {module} LIBRARY DESTINATION {package})" in cmake
        )


def test_every_import_of_our_packages_names_a_module():
    missing: list[str] = []
    import_graph(SRC, missing)
    assert missing == []


def test_src_has_no_import_circle():
    graph = import_graph(SRC)
    assert len(graph) > 30 and graph[f"{CLI}.cmd_doctor"], "the graph was not read"
    assert cycles(graph) == [], "import circles in src/ (each line: the modules of one circle)"


def test_the_library_never_imports_the_command_line():
    graph = import_graph(SRC)
    assert f"{LIBRARY}.sim.demo" in graph[f"{CLI}.cmd_demo"], "the CLI's library imports were not read"
    assert library_to_cli(graph) == []


# --------------------------------------------------- the checks can fail: the same code on bad input


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def test_a_circle_is_found_at_module_level_in_a_function_and_through_import_module(tmp_path):
    src = _write(
        tmp_path,
        {
            "lib/__init__.py": "",
            "lib/a.py": "from . import b\n",
            "lib/b.py": "def f():\n    from .c import g\n",
            "lib/c.py": "import importlib\ndef g():\n    return importlib.import_module('lib.a')\n",
            "lib/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
            "lib/e.py": "import lib.e\n",
            "lib/f.py": "from .gone import x\nfrom . import a, gone\n",
        },
    )
    graph = import_graph(src)
    missing: list[str] = []
    imports_of("lib.f", src / "lib" / "f.py", module_names(src), missing)
    # `from . import gone` may name an attribute of the package: only module paths must exist
    assert missing == ["lib.f imports lib.gone, which is not a module"]
    assert graph["lib.b"] == {"lib.c"} and graph["lib.c"] == {"lib.a"} and graph["lib.d"] == set()
    assert cycles(graph) == [["lib.a", "lib.b", "lib.c"]]
    assert cycles({"x": {"x"}}) == [["x"]] and cycles({"x": {"y"}, "y": set()}) == []


def test_a_library_import_of_the_cli_is_found_in_a_copy_of_src(tmp_path):
    # The real tree with one line added: the library's demo takes a name from the CLI again, inside
    # a function, as it once did.
    copy = tmp_path / "src"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    assert cycles(import_graph(copy)) == cycles(import_graph(SRC))
    demo = copy / LIBRARY / "sim" / "demo.py"
    demo.write_text(
        demo.read_text(encoding="utf-8") + "\n\ndef _again():\n    from torch_mspti_cli.cmd_demo import DEVICES\n",
        encoding="utf-8",
    )
    graph = import_graph(copy)
    assert f"{LIBRARY}.sim.demo -> {CLI}.cmd_demo" in library_to_cli(graph)
    assert [f"{LIBRARY}.sim.demo", f"{CLI}.cmd_demo"] in cycles(graph)


def test_relative_imports_resolve_against_the_package():
    assert _resolve("p.q.m", False, 1, "x") == "p.q.x"
    assert _resolve("p.q", True, 1, "x") == "p.q.x"
    assert _resolve("p.q.m", False, 2, None) == "p"
    assert _resolve("p.q.m", False, 0, "os") == "os"


# --------------------------------------------- the CLI's torch-free copies equal the library's facts


def test_the_demo_defaults_in_cli_help_are_the_librarys():
    workloads = pytest.importorskip("torch_mspti.sim.workloads", reason="needs the built package")
    from torch_mspti_cli.cmd_demo import WORKLOAD_DEFAULTS

    assert WORKLOAD_DEFAULTS == workloads.DEFAULTS
    assert set(WORKLOAD_DEFAULTS) == set(workloads.WORKLOADS)


def test_the_link_states_the_checker_explains_are_the_librarys():
    torch_mspti = pytest.importorskip("torch_mspti", reason="needs the built package")
    from torch_mspti_cli import _content_rules

    states = torch_mspti.link_states()
    assert [s["name"] for s in states if not s["linked"]] == list(_content_rules.UNLINKED_STATES)
