"""Kernels launched inside record_function ranges are linked to the innermost range or op.

A launch made directly inside a user range, with no op in between, belongs to that range (as on
kineto's CUDA path): the kernel carries the range's External id and its launch event nests in the
range's slice; a launch inside an op inside a range belongs to the op. Every range also gets a
device-side span (gpu_user_annotation) per stream, covering the rows launched inside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from op_links import assert_links_right
from simrun import TS_TOL_US, end, events, kernels

# K0..K39 directly inside R0..R39 (streams 1 and 2); K100..K109 inside links::inner ops inside the
# range "phase"; K200 inside R200 inside "phase".
WORKLOAD = """
def _k(n, stream=1):
    sim.msptiSimLaunchKernel(f"K{n}".encode(), b"KERNEL_AIVEC", 0, stream, 2000)

@torch.library.custom_op("links::inner", mutates_args=())
def inner(t: torch.Tensor, n: int) -> torch.Tensor:
    _k(n)
    return t.clone()

for n in range(40):
    with record_function(f"R{n}"):
        _k(n, 1 + n % 2)
with record_function("phase"):
    for n in range(100, 110):
        torch.ops.links.inner(x, n)
    with record_function("R200"):
        _k(200)
sync()
"""
CALLS = 40 + 10 + 1


@pytest.fixture(scope="module", params=["api_records", "no_api_records"])
def run(request, tmp_path_factory) -> tuple[str, simrun.SimResult]:
    config = {"enable_api_records": request.param == "api_records"}
    return request.param, simrun.run(
        WORKLOAD, tmp_path_factory.mktemp(request.param), record_shapes=True, config=config
    )


def test_kernels_link_to_the_innermost_range_or_op(run):
    mode, result = run
    audit, session = assert_links_right(result, {"links::inner"}, CALLS)
    assert audit.linked == CALLS, audit.summary()
    # One thread: the hint is right, and verified by the launch call when there is one.
    assert dict(audit.states) == {"verified" if mode == "api_records" else "unverified": CALLS}, audit.summary()
    # without API records nothing checked the hints: one warning says so
    assert session["warnings"] == ([] if mode == "api_records" else ["unverified"]), session["warnings"]
    # and the trace's own health report says the same (kineto embeds it before processTrace)
    health = result.trace["torch_mspti"]
    assert (
        (health["state"], health["warnings"])
        == (session["state"], session["warnings"])
        == (
            "processed",
            session["warnings"],
        )
    ), health


def _spans(trace) -> dict:
    return {(e["name"], e["tid"]): e for e in events(trace) if e.get("cat") == "gpu_user_annotation"}


def _covers(span: dict, rows: list[dict]) -> bool:
    """span runs from the first row's start to the last row's end (kineto draws it 1 ns wider on
    each side, so that the rows nest in it)."""
    first, last = min(k["ts"] for k in rows), max(end(k) for k in rows)
    slack = 0.001 + TS_TOL_US
    return first - slack <= span["ts"] <= first + TS_TOL_US and last - TS_TOL_US <= end(span) <= last + slack


def test_each_range_has_a_device_span_covering_its_kernels(run):
    _, result = run
    spans = _spans(result.trace)
    rows = {k["name"]: k for k in kernels(result.trace)}
    for n in range(40):
        span, k = spans[(f"R{n}", 1 + n % 2)], rows[f"K{n}"]
        assert _covers(span, [k]), (span, k)
    assert _covers(spans[("phase", 1)], [rows[f"K{n}"] for n in [*range(100, 110), 200]]), spans[("phase", 1)]
    assert _covers(spans[("R200", 1)], [rows["K200"]]), spans[("R200", 1)]
    assert set(spans) == {(f"R{n}", 1 + n % 2) for n in range(40)} | {("phase", 1), ("R200", 1)}, sorted(spans)
