"""Every citation of ``docs/mspti.md`` / ``docs/kineto.md`` in the repository resolves.

Comments all over the tree cite the project's MSPTI and kineto fact sheets by section, e.g.
``(mspti.md 2.3)``, ``mspti.md §8``, ``kineto.md 1.4``, ``mspti.md 2.3, 6 item 2`` or
``kineto.md 1.1-1.2``. Such a citation is checked against the headings (``## 2. ...``,
``### 2.3 ...``) of ``docs/<file>``; ``item N`` / ``step N`` after a section must name a numbered
list item of that section. A citation of a section that does not exist, a ``§`` with no number,
and a pointer to the fact sheets' old home outside the repository (``shared/docs/...``) fail,
naming file:line.

Pure Python: imports neither torch nor torch_mspti, and needs no build.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = ("mspti.md", "kineto.md", "torch_npu.md")

# Directories never scanned when walking the tree without git (build output, environments).
_SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".venv", "venv", "node_modules", ".eggs"}
_SKIP_SUFFIXES = {".so", ".a", ".o", ".png", ".jpg", ".gz", ".whl", ".pyc", ".bin", ".zip"}

_NUM = r"\d+(?:\.\d+)*"
# Between "mspti.md" and its section: blanks, optionally a line break continued by a comment
# leader ("//", "#", "*"), then an optional "§" or "section".
_GAP = r"[ \t]*(?:\n[ \t]*(?://+|#+|\*+)?[ \t]*)?"
_FIRST = rf"(?P<sect>§|section\b)?[ \t]*(?P<num>{_NUM})?"
_MORE = rf"(?:[ \t]*(?:,|;|\band\b|-|–)[ \t]*(?:§[ \t]*)?{_NUM}(?![\w]))"
_QUAL = r"(?:,?[ \t]+(?:item|step)[ \t]+\d+)"
_CITE = re.compile(
    rf"(?<![\w/-])(?P<prefix>[\w./-]*/)?(?P<doc>mspti|kineto|torch_npu)\.md"
    rf"(?P<tail>{_GAP}{_FIRST}(?:{_QUAL}|{_MORE})*)"
)
_TAIL_PART = re.compile(rf"(?P<num>{_NUM})(?:,?[ \t]+(?:item|step)[ \t]+(?P<item>\d+))?")
# A bare "§5.4" (or "§6 item 7"), used by files that declare which fact sheet their § cites.
_BARE = re.compile(rf"§[ \t]*(?P<num>{_NUM})(?:,?[ \t]+(?:item|step)[ \t]+(?P<item>\d+))?")
# Files whose bare "§N" cites a fact sheet (they say so at the top).
BARE_SECTION_FILES = {
    "src/sim/README.md": "mspti.md",
    "docs/mspti.md": "mspti.md",  # cross-references inside the fact sheets
    "docs/kineto.md": "kineto.md",
    "docs/torch_npu.md": "torch_npu.md",
}
_HEADING = re.compile(rf"^#{{2,4}}[ \t]+(?P<num>{_NUM})\.?[ \t]", re.M)
_LIST_ITEM = re.compile(r"^[ \t]*(?P<n>\d+)\.[ \t]", re.M)


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason} in {self.text!r}"


def sections_of(markdown: str) -> dict[str, str]:
    """Section number -> body (up to the next numbered heading) of a fact sheet."""
    heads = list(_HEADING.finditer(markdown))
    out: dict[str, str] = {}
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(markdown)
        out[h["num"]] = markdown[h.end() : end]
    return out


def scan(text: str, path: str, docs: dict[str, dict[str, str]]) -> list[Problem]:
    """Problems with the fact-sheet citations in `text` (the contents of `path`).

    `docs` maps "mspti.md" / "kineto.md" to `sections_of` of that file.
    """
    problems: list[Problem] = []
    for m in _CITE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        shown = m.group(0).replace("\n", " ")
        doc = f"{m['doc']}.md"
        prefix = m["prefix"] or ""
        if prefix and not prefix.rstrip("/").endswith("docs") or "shared/" in prefix:
            problems.append(Problem(path, line, shown, f"{prefix}{doc} is not the repository's docs/{doc}"))
            continue
        if m["sect"] and not m["num"]:
            problems.append(Problem(path, line, shown, "'§'/'section' without a section number"))
            continue
        sections = docs[doc]
        tail = m["tail"]
        start = m.start("num") - m.start("tail") if m["num"] else len(tail)
        for part in _TAIL_PART.finditer(tail, start):
            num = part["num"]
            if num not in sections:
                problems.append(Problem(path, line, shown, f"docs/{doc} has no section {num}"))
                continue
            item = part["item"]
            if item and item not in {i["n"] for i in _LIST_ITEM.finditer(sections[num])}:
                problems.append(Problem(path, line, shown, f"docs/{doc} section {num} has no item {item}"))
    return problems


def scan_bare(text: str, path: str, doc: str, sections: dict[str, str]) -> list[Problem]:
    """Problems with the bare "§N" citations of `text`, which all cite `doc`."""
    problems: list[Problem] = []
    for m in _BARE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        num, item = m["num"], m["item"]
        if num not in sections:
            problems.append(Problem(path, line, m.group(0), f"docs/{doc} has no section {num}"))
        elif item and item not in {i["n"] for i in _LIST_ITEM.finditer(sections[num])}:
            problems.append(Problem(path, line, m.group(0), f"docs/{doc} section {num} has no item {item}"))
    return problems


def tracked_files(root: Path) -> list[Path]:
    """Files of the checkout (git ls-files), or of the tree when it is not a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout
        names = [n for n in out.decode("utf-8", "surrogateescape").split("\0") if n]
        if names:
            return [root / n for n in names]
    except (OSError, subprocess.SubprocessError):
        pass
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("build")]
        files.extend(Path(dirpath) / f for f in filenames)
    return files


def read_text(path: Path) -> str | None:
    """The file as text, or None for binary, missing or unreadable files."""
    if path.suffix in _SKIP_SUFFIXES:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def load_docs(root: Path) -> dict[str, dict[str, str]]:
    return {d: sections_of((root / "docs" / d).read_text(encoding="utf-8")) for d in DOCS}


def scan_repo(root: Path) -> tuple[int, list[Problem]]:
    docs = load_docs(root)
    count = 0
    problems: list[Problem] = []
    for f in tracked_files(root):
        text = read_text(f)
        if text is None:
            continue
        rel = f.relative_to(root).as_posix()
        count += sum(1 for _ in _CITE.finditer(text))
        problems.extend(scan(text, rel, docs))
        if rel in BARE_SECTION_FILES:
            doc = BARE_SECTION_FILES[rel]
            problems.extend(scan_bare(text, rel, doc, docs[doc]))
    return count, problems


# ---- the repository ----

# The conda recipe's test stage copies tests/ without the sources: nothing to check there. In a
# source tree (src/ beside tests/) a missing fact sheet is a failure, not a skip.
_in_source_tree = pytest.mark.skipif(
    not (REPO / "src").is_dir(), reason="the source tree (src/, docs/) is not beside the tests"
)


@_in_source_tree
def test_fact_sheets_exist_with_numbered_sections():
    docs = load_docs(REPO)
    for name, sections in docs.items():
        assert sections, f"docs/{name} has no numbered '## N.' headings"


@_in_source_tree
def test_every_citation_names_an_existing_section():
    count, problems = scan_repo(REPO)
    assert count > 100, f"only {count} citations found: is the scanner still matching them?"
    assert not problems, "dangling fact-sheet citations:\n" + "\n".join(map(str, problems))


@_in_source_tree
def test_readme_and_core_readme_point_at_the_fact_sheets():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    core = (REPO / "src" / "core" / "README.md").read_text(encoding="utf-8")
    for name in DOCS:
        assert f"docs/{name}" in readme, f"README.md does not link docs/{name}"
        assert f"docs/{name}" in core, f"src/core/README.md does not say where {name} lives"


# ---- the scanner itself (synthetic texts; the doc names are split so this file cites nothing) ----

_M = "mspti" + ".md"
_K = "kineto" + ".md"
_FAKE = {
    _M: sections_of("## 2. Functions\n### 2.3 Activity API\nx\n## 6. Bugs\n1. one\n2. two\n"),
    _K: sections_of("## 1. Registration\n### 1.1 Macro\n### 1.2 Types\n"),
}


def _reasons(text: str) -> list[str]:
    return [p.reason for p in scan(text, "x.cpp", _FAKE)]


@pytest.mark.parametrize(
    "text",
    [
        f"// ({_M} 2.3)",
        f"// {_M} §2.3, §6.",
        f"# see {_M} 2, 6 item 2).",
        f"// ({_K} 1.1-1.2)",
        f"// the whole of {_M} describes it",
        f"see docs/{_M} 6",
        f"(MSPTI 26.x refuses them, {_M}\n// 2.3)",
        f"({_M} 2.3: at most 20 ms)",
        f"({_M} 6, fixes 990582b)",
    ],
)
def test_scanner_accepts_good_citations(text):
    assert _reasons(text) == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"// ({_M} 2.4)", f"docs/{_M} has no section 2.4"),
        (f"// {_M} §9).", f"docs/{_M} has no section 9"),
        (f"// {_M} §, see", "'§'/'section' without a section number"),
        (f"// {_M} 2.3, 7 item 1", f"docs/{_M} has no section 7"),
        (f"// {_M} 6 item 3", f"docs/{_M} section 6 has no item 3"),
        (f"// ({_K} 1.1-1.3)", f"docs/{_K} has no section 1.3"),
        (f"// as shared/docs/{_M} 2.3 says", f"shared/docs/{_M} is not the repository's docs/{_M}"),
        (f"({_M}\n 4.1)", f"docs/{_M} has no section 4.1"),
    ],
)
def test_scanner_rejects_bad_citations(text, reason):
    assert _reasons(text) == [reason]


def test_bare_sections_are_checked_where_a_file_declares_them():
    text = "| `msptiActivityFlushPeriod` | ... | §2.3, §6 item 2 |\n| x | §6.2 | §6 item 9 |\n"
    assert [(p.line, p.reason) for p in scan_bare(text, "README.md", _M, _FAKE[_M])] == [
        (2, f"docs/{_M} has no section 6.2"),
        (2, f"docs/{_M} section 6 has no item 9"),
    ]


def test_scanner_names_file_and_line():
    (problem,) = scan(f"line one\nline two ({_M} 3.1)\n", "src/a.h", _FAKE)
    assert (problem.path, problem.line) == ("src/a.h", 2)
    assert str(problem).startswith("src/a.h:2: ")


def test_tree_walk_without_git_finds_the_same_citations(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "mspti.md").write_text("## 2. Functions\n", encoding="utf-8")
    (docs / "kineto.md").write_text("## 1. Registration\n", encoding="utf-8")
    (docs / "torch_npu.md").write_text("## 1. Allocator\n", encoding="utf-8")
    (tmp_path / "a.h").write_text(f"// {_M} 2\n// {_M} 5\n", encoding="utf-8")
    (tmp_path / "lib.so").write_bytes(b"\0\0" + _M.encode() + b" 5")
    count, problems = scan_repo(tmp_path)
    assert count == 2
    assert [(p.path, p.line, p.reason) for p in problems] == [("a.h", 2, f"docs/{_M} has no section 5")]
