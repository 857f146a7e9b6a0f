"""Human output of the ``torch-mspti`` commands: the terminal's full width, words never broken.

Lines are wrapped here, at spaces only (``textwrap`` with ``break_long_words=False``): a path or
a kernel name longer than the line stays whole on a line of its own, so it can be copied. rich
only adds bold and colour (and drops them when the output is not a terminal); it never wraps.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from collections.abc import Iterable
from typing import Any

PROG = "torch-mspti"
MIN_WIDTH = 40


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``: how an expected failure is reported."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def terminal_width() -> int:
    """Columns of the terminal (``COLUMNS`` wins; 80 when the output is not a terminal)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def wrap(text: str, width: int, indent: int = 0, first_indent: int | None = None) -> list[str]:
    """``text`` wrapped at spaces into lines of at most ``width`` columns, except for single words
    longer than a line, which are kept whole. The first line is indented by ``first_indent``
    (default ``indent``), the others by ``indent``."""
    first = indent if first_indent is None else first_indent
    lines = textwrap.wrap(
        str(text),
        width=max(width, first + 1, indent + 1),
        initial_indent=" " * first,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [" " * first]


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 problem``, ``2 problems``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def fmt(value: Any) -> str:
    """A value as the reports show it: None -> "-", bools as yes/no, floats with 3 digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(fmt, value)) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt(v)}" for k, v in value.items()) if value else "-"
    return str(value)


def ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def dump_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


class Out:
    """Writes wrapped, optionally styled lines to one stream."""

    def __init__(self, stream=None, width: int | None = None) -> None:
        from rich.console import Console

        self.width = width or terminal_width()
        stream = stream or sys.stdout
        # markup/emoji/highlight off: trace names and paths contain "[...]" and ":" freely.
        self._con = Console(file=stream, markup=False, emoji=False, highlight=False, soft_wrap=True)

    def line(self, text: str = "", style: str | None = None) -> None:
        from rich.text import Text

        self._con.print(Text(text, style=style or ""))

    def para(self, text: str, indent: int = 0, style: str | None = None, first_indent: int | None = None) -> None:
        for ln in wrap(text, self.width, indent, first_indent):
            self.line(ln, style)

    def section(self, title: str) -> None:
        self.line()
        self.line(title, "bold underline")

    def rows(self, rows: Iterable[tuple[str, Any]], indent: int = 2) -> None:
        """``key  value`` lines; values wrap under themselves (hanging indent)."""
        rows = [(k, v) for k, v in rows]
        if not rows:
            return
        key_width = max(len(k) for k, _ in rows)
        from rich.text import Text

        for key, value in rows:
            lines = wrap(fmt(value), self.width, indent + key_width + 2)
            head = Text(" " * indent + key.ljust(key_width), style="bold")
            head.append(lines[0][indent + key_width :])
            self._con.print(head)
            for ln in lines[1:]:
                self.line(ln)
