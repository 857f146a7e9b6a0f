"""The support table: per torch minor, what torch-mspti gives in a standard torch.profiler trace.

One row per torch minor (each torch_npu release pairs with exactly one). The README's "Torch
versions" table is rendered from :data:`SUPPORT` (``tests/test_torch_compat.py`` fails when they
differ), ``diagnostics().torch["support"]`` and ``torch-mspti doctor`` show the running minor's row,
and CI's torch_versions stage re-measures every cell marked ``CI`` on its torch
(``ci/torch_versions.sh``; the tests check each such cell against a profile of that run).

Cell values: ``"yes (CI)"`` (measured by CI on this machine's kind: a build and the simulated NPU),
``"not run here"`` (nothing measured it; torch-mspti builds from the same source), or ``"no: ..."``
(what torch does instead). Pure data; nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ._torch_version import major_minor

YES = "yes (CI)"
NOT_RUN = "not run here"
COLUMNS = ("builds", "kernels", "arrows", "device_time", "collectives", "copies")
HEADERS = {
    "builds": "builds",
    "kernels": "kernels in the trace",
    "arrows": "arrows",
    "device_time": "device time in `key_averages()`",
    "collectives": "collectives",
    "copies": "copies",
}


@dataclass(frozen=True)
class SupportRow:
    """One torch minor. ``torch`` is the tested version, ``torch_npu`` the release it pairs with."""

    minor: str
    torch: str
    torch_npu: str
    builds: str
    kernels: str
    arrows: str
    device_time: str
    collectives: str
    copies: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _measured(minor: str, torch: str, torch_npu: str, note: str = "") -> SupportRow:
    return SupportRow(minor, torch, torch_npu, YES, YES, YES, YES, YES, YES, note)


def _unmeasured(minor: str, torch_npu: str) -> SupportRow:
    return SupportRow(minor, f"{minor}.x", torch_npu, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN)


SUPPORT: tuple[SupportRow, ...] = (
    _measured(
        "2.7",
        "2.7.1",
        "2.7.1.post*",
        "no PrivateUse1ProfilerRegistry: registered with kineto only; the health report reaches the "
        "trace through kineto's addMetadata; flow ids are 27 bits; torch needs fmt headers "
        "(libfmt-dev); CUDA builds omit the PrivateUse1 activity, which torch-mspti lists; prof.events() "
        "has no linked_correlation_id or metadata_json (torch 2.7); on the simulator, torch 2.7's gloo "
        "has no list forms of reduce_scatter and all_to_all",
    ),
    _unmeasured("2.8", "2.8.0"),
    _unmeasured("2.9", "2.9.x"),
    _unmeasured("2.10", "2.10.0"),
    _unmeasured("2.11", "2.11.0"),
    _unmeasured("2.12", "2.12.0.post3"),
    _measured("2.13", "2.13.0", "2.13.0", "the full test tier runs on this torch"),
    _measured(
        "2.14",
        "2.14.1",
        "2.14.0",
        "checked on PyPI's CUDA build 2.14.1; torch_npu 2.14.0's own libtorch_npu.so was checked only through "
        "the stand-in (it aborts on that torch build: README, Next to torch_npu)",
    ),
    _unmeasured("2.15", "none yet"),
)


def row_for(version: str) -> SupportRow | None:
    """The row of torch ``version`` (``"2.7.1+cu126"`` -> the 2.7 row), or None when not listed."""
    try:
        minor = "{}.{}".format(*major_minor(version))
    except ValueError:
        return None
    return next((r for r in SUPPORT if r.minor == minor), None)


def markdown_table() -> str:
    """The README's table, exactly."""
    head = ["torch", "torch_npu", *(HEADERS[c] for c in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in SUPPORT:
        cells = [r.torch, r.torch_npu, *(getattr(r, c) for c in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
