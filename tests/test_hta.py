"""torch_mspti.hta: HolisticTraceAnalysis 0.5 on NPU traces.

Synthetic per-rank traces (hta_synthetic, in the format torch-mspti emits) give values computed
here from their layout; plain HTA on the same traces shows what the adapter fixes. Two tests run
HTA on the simulator's traces (``torch-mspti demo``, one rank and ``--workload ddp --ranks 2``);
the straggler and critical-path tests at the end use synthetic traces again (8 simulated ranks:
tests/test_hta_multirank.py).

Without HolisticTraceAnalysis the HTA tests skip, naming the extra; CI's hta stage sets
TORCH_MSPTI_REQUIRE_HTA=1, which makes that a failure (ci/hta_tests.sh).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import hta_synthetic as syn
import pytest
from hta_synthetic import require_hta

# HTA 0.5's own pandas idioms warn under pandas 2.3 (they do not change its results).
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning:hta")

OVERLAPS = (0.5, 0.25)  # per rank: share of the all-reduce that overlaps computation
STEPS = 3  # HTA drops the last profiler step by default: 2 are analysed
ANALYSED = STEPS - 1


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hta_synthetic")
    syn.write_traces(d, OVERLAPS, STEPS)
    return d


@pytest.fixture(scope="module")
def adapted(synthetic_dir):
    require_hta()
    from torch_mspti.hta import trace_analysis

    return trace_analysis(synthetic_dir)


# ------------------------------------------------------------------ expectations from the layout


def _union(intervals) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(intervals) -> int:
    return sum(e - s for s, e in _union(intervals))


def _intersection(a, b) -> int:
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in _union(a) for s2, e2 in _union(b))


def _rows(rank: int) -> list[tuple[int, syn.DeviceRow]]:
    """(step start offset, row) of every analysed device row of ``rank``."""
    return [(k * syn.STEP_US, r) for k in range(ANALYSED) for r in syn.step_rows(OVERLAPS[rank], k)]


def _intervals(rank: int, kind: str) -> list[tuple[int, int]]:
    def kind_of(row):
        if row.cat != "kernel":
            return "memory"
        return "communication" if syn.is_comm(row) else "computation"

    return [(o + r.start, o + r.end) for o, r in _rows(rank) if kind_of(r) == kind]


def _max_queue(rank: int, stream: int) -> int:
    events = []
    for o, r in _rows(rank):
        if r.stream == stream:
            events += [(o + r.launch_at[0], 1), (o + r.start, -1)]
    depth = peak = 0
    for _, delta in sorted(events):
        depth += delta
        peak = max(peak, depth)
    return peak


# ------------------------------------------------------------------------------------ the module


def test_import_needs_neither_hta_nor_a_renamed_backend():
    code = textwrap.dedent("""
        import sys, torch
        import torch_mspti.hta as th
        assert "hta" not in sys.modules, "torch_mspti.hta imported HTA eagerly"
        assert torch._C._get_privateuse1_backend_name() == "privateuseone"
        print(th.HTA_VERSION, th.EXTRA)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.5.0", "hta"]


@pytest.mark.parametrize(
    "setup, expected",
    [
        ("sys.modules['hta'] = None", r"needs HolisticTraceAnalysis==0\.5\.0 .*: pip install 'torch-mspti\[hta\]'"),
        (
            "import importlib.metadata as m; m.version = lambda name: '0.6.0'",
            r"adapts HolisticTraceAnalysis 0\.5\.0 .* found 0\.6\.0: pip install 'torch-mspti\[hta\]'",
        ),
    ],
    ids=["missing", "other-version"],
)
def test_without_hta_050_the_error_names_the_extra(synthetic_dir, setup, expected):
    code = textwrap.dedent(f"""
        import sys
        {setup}
        from torch_mspti.hta import trace_analysis
        try:
            trace_analysis({str(synthetic_dir)!r})
        except ImportError as exc:
            print(exc)
        else:
            print("no error")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(expected, r.stdout), r.stdout


def test_bad_trace_dir_is_named(tmp_path):
    from torch_mspti.hta import trace_analysis

    with pytest.raises(FileNotFoundError, match="is not a directory of traces"):
        trace_analysis(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"no trace \(\*\.json, \*\.json\.gz\) in"):
        trace_analysis(tmp_path)


# ------------------------------------------------------------------------------ synthetic traces


@pytest.mark.filterwarnings("ignore:invalid value encountered in scalar divide:RuntimeWarning")
def test_plain_hta_misses_npu_launches_and_collectives(synthetic_dir):
    """What HTA 0.5 reports without the adapter: no communication at all, NaN overlap, no queue,
    no launch statistics. Memory rows are already recognised (kineto's Memcpy/Memset names)."""
    require_hta()
    from hta.trace_analysis import TraceAnalysis

    plain = TraceAnalysis(trace_dir=str(synthetic_dir))
    by_type, per_kernel = plain.get_gpu_kernel_breakdown(visualize=False)
    assert not by_type["kernel_type"].str.contains("COMMUNICATION").any(), by_type
    assert set(per_kernel.loc[per_kernel["name"].str.startswith(syn.COMM_PREFIX), "kernel_type"]) == {"COMPUTATION"}
    memory = sum(_length(_intervals(r, "memory")) for r in range(len(OVERLAPS)))
    assert by_type.set_index("kernel_type").loc["MEMORY", "sum"] == memory
    assert plain.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].isna().all()
    assert plain.get_queue_length_summary(ranks=[0, 1]) is None
    assert all(df.empty for df in plain.get_cuda_kernel_launch_stats(ranks=[0, 1], visualize=False).values())


def test_adapter_recognises_names_as_mspti_gives_them(adapted):
    assert adapted.npu.launch_names == ("HcclAllReduce", "LaunchKernelV2", "aclrtMemcpyAsync", "aclrtMemsetAsync")
    assert adapted.npu.memory_launch_names == ("aclrtMemcpyAsync", "aclrtMemsetAsync")
    assert adapted.npu.communication_names == tuple(f"{syn.COMM_PREFIX}{k}_1" for k in range(ANALYSED))
    names = set(adapted.t.symbol_table.get_sym_table())
    assert not {n for n in names if n.startswith(("nccl", "cuda"))}, "the adapter must not add CUDA names"


def test_kernel_breakdown_has_the_communication_share(adapted):
    by_type, per_kernel = adapted.get_gpu_kernel_breakdown(visualize=False)
    expected: dict[str, int] = {}
    for rank in range(len(OVERLAPS)):
        comp, comm = _intervals(rank, "computation"), _intervals(rank, "communication")
        both = _intersection(comp, comm)
        for kind, value in {
            "COMPUTATION": _length(comp) - both,
            "COMMUNICATION": _length(comm) - both,
            "COMPUTATION overlapping COMMUNICATION": both,
            "MEMORY": _length(_intervals(rank, "memory")),
        }.items():
            expected[kind] = expected.get(kind, 0) + value
    got = by_type.set_index("kernel_type")
    assert got["sum"].to_dict() == expected
    share = 100 * expected["COMMUNICATION"] / sum(expected.values())
    assert got.loc["COMMUNICATION", "percentage"] == pytest.approx(round(share, 1)) and share > 0
    comm_rows = per_kernel[per_kernel["name"].str.startswith(syn.COMM_PREFIX)]
    assert set(comm_rows["kernel_type"]) == {"COMMUNICATION"}
    assert comm_rows["sum (us)"].tolist() == [syn.COMM_US] * ANALYSED * len(OVERLAPS)  # one per name and rank


def test_temporal_breakdown(adapted):
    got = adapted.get_temporal_breakdown(visualize=False).set_index("rank")
    for rank in range(len(OVERLAPS)):
        every = [(o + r.start, o + r.end) for o, r in _rows(rank)]
        span = max(e for _, e in every) - min(s for s, _ in every)
        idle, compute = span - _length(every), _length(_intervals(rank, "computation"))
        row = got.loc[rank]
        assert (row["kernel_time(us)"], row["idle_time(us)"], row["compute_time(us)"]) == (span, idle, compute)
        assert row["non_compute_time(us)"] == span - idle - compute


def test_comm_comp_overlap_is_the_built_in_fraction(adapted):
    got = adapted.get_comm_comp_overlap(visualize=False).set_index("rank")["comp_comm_overlap_pctg"]
    for rank, overlap in enumerate(OVERLAPS):
        comm = _intervals(rank, "communication")
        assert 100 * _intersection(_intervals(rank, "computation"), comm) / _length(comm) == 100 * overlap
        assert got.loc[rank] == pytest.approx(100 * overlap)


def test_queue_length_summary(adapted):
    got = adapted.get_queue_length_summary(ranks=[0, 1])
    assert got is not None
    stats = got["queue_length"]
    for rank in range(len(OVERLAPS)):
        for stream in (syn.COMPUTE_STREAM, syn.COMM_STREAM):
            rows = sum(1 for _, r in _rows(rank) if r.stream == stream)
            assert stats.loc[(rank, stream), "count"] == 2 * rows  # one +1 at the launch, one -1 at the start
            assert stats.loc[(rank, stream), "max"] == _max_queue(rank, stream)
            assert stats.loc[(rank, stream), "min"] == 0


@pytest.mark.parametrize("memory", [True, False])
def test_kernel_launch_stats(adapted, memory):
    got = adapted.get_cuda_kernel_launch_stats(ranks=[0, 1], include_memory_events=memory, visualize=False)
    for rank in range(len(OVERLAPS)):
        expected = sorted(
            (r.launch_at[1] - r.launch_at[0], r.end - r.start, max(0, r.start - r.launch_at[1]))
            for _, r in _rows(rank)
            if memory or r.cat == "kernel"
        )
        df = got[rank]
        assert df["correlation"].is_unique
        assert sorted(zip(df["cpu_duration"], df["gpu_duration"], df["launch_delay"], strict=True)) == expected


def test_a_row_inside_one_microsecond_breaks_no_breakdown(tmp_path):
    # With fractional microseconds HTA rounds starts up and ends down: a 0.5 us copy inside one
    # microsecond came out at -1 us, and the temporal breakdown failed its own assertion.
    require_hta()
    import json

    from hta.trace_analysis import TraceAnalysis

    from torch_mspti.hta import trace_analysis

    paths = syn.write_traces(tmp_path, OVERLAPS, STEPS)
    shortened = 0
    for path in paths:
        trace = json.loads(path.read_text())
        for e in trace["traceEvents"]:
            if e.get("cat") in ("gpu_memcpy", "gpu_memset"):  # each becomes 0.5 us inside one microsecond
                e["ts"], e["dur"] = e["ts"] + 0.2, 0.5
                shortened += 1
        path.write_text(json.dumps(trace))
    with pytest.raises(AssertionError):
        TraceAnalysis(trace_dir=str(tmp_path)).get_temporal_breakdown(visualize=False)
    adapted = trace_analysis(tmp_path)
    assert adapted.npu.sub_microsecond_rows == shortened * ANALYSED // STEPS > 0  # HTA drops the last step
    got = adapted.get_temporal_breakdown(visualize=False).set_index("rank")
    assert len(got) == len(OVERLAPS)
    assert (got["idle_time(us)"] >= 0).all() and (got["non_compute_time(us)"] >= 0).all(), got


def test_the_communication_hook_is_scoped(adapted):
    import hta.utils.utils as hta_utils

    before = hta_utils.NCCL_KERNEL_RE
    comm = syn.comm_row(0.5, 0).name
    assert hta_utils.get_kernel_type(comm) == "COMPUTATION"
    with adapted.recognising(), adapted.recognising():
        assert hta_utils.get_kernel_type(comm) == "COMMUNICATION"
        assert hta_utils.get_kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "COMMUNICATION"
        assert hta_utils.get_kernel_type("MatMulV2") == "COMPUTATION"
    assert hta_utils.NCCL_KERNEL_RE is before
    adapted.get_comm_comp_overlap(visualize=False)
    assert hta_utils.NCCL_KERNEL_RE is before


# ------------------------------------------------------------------------ the simulator's traces


def _load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def test_hta_on_a_simulated_single_rank_trace(tmp_path):
    """The plugin's launch rows as they are today (one rank, no collectives): HTA's launch statistics
    pair every kernel launched before the last profiler step with its launch; plain HTA pairs none."""
    require_hta()
    out = tmp_path / "trace.json"
    cmd = [sys.executable, "-m", "torch_mspti_cli", "demo", "--workload", "mlp", "--steps", "4", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, f"{' '.join(cmd)} failed (rc={r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    events = _load(out)["traceEvents"]
    steps = [e["ts"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) >= 2, "the demo should record at least two profiler steps"
    launched = {
        e["args"]["correlation"] for e in events if e.get("cat") == "privateuse1_runtime" and e["ts"] < max(steps)
    }
    kernels = [e for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in launched]
    assert kernels

    from hta.trace_analysis import TraceAnalysis

    from torch_mspti.hta import trace_analysis

    analysis = trace_analysis(trace_files={0: str(out)})
    assert analysis.npu.launch_names == ("LaunchKernelV2",)
    stats = analysis.get_cuda_kernel_launch_stats(visualize=False)[0]
    # HTA keeps the complete iterations (it trims the last step after its first launches): every kernel
    # launched before the last step is there, and nothing that is not a kernel of this trace.
    all_kernels = {e["args"]["correlation"] for e in events if e.get("cat") == "kernel"}
    assert {e["args"]["correlation"] for e in kernels} <= set(stats["correlation"]) <= all_kernels
    assert len(stats["correlation"]) == len(set(stats["correlation"]))
    queue = analysis.get_queue_length_summary()
    streams = {e["args"]["stream"] for e in kernels}
    assert queue is not None and set(queue.index.get_level_values("stream")) == streams
    plain = TraceAnalysis(trace_files={0: str(out)})
    assert plain.get_cuda_kernel_launch_stats(visualize=False)[0].empty
    assert plain.get_queue_length_summary() is None


def test_hta_on_simulated_ddp_traces(tmp_path):
    require_hta()
    cmd = [sys.executable, "-m", "torch_mspti_cli", "demo", "--workload", "ddp", "--ranks", "2"]
    cmd += ["--out", str(tmp_path / "traces")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, f"{' '.join(cmd)} failed (rc={r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    # One directory with one trace per rank (the demo may also keep other traces, e.g. per cycle).
    found = sorted(p for p in tmp_path.rglob("*") if p.name.endswith((".json", ".json.gz")))
    traces = {p: t for p in found if "distributedInfo" in (t := _load(p))}
    by_dir: dict[Path, dict[int, list[Path]]] = {}
    for p, t in traces.items():
        by_dir.setdefault(p.parent, {}).setdefault(t["distributedInfo"].get("rank"), []).append(p)
    complete = [d for d, rk in by_dir.items() if sorted(rk) == [0, 1] and all(len(v) == 1 for v in rk.values())]
    assert complete, f"no directory under {tmp_path} with one trace per rank 0, 1: {found}\n{r.stdout[-2000:]}"
    ranks = {rank: paths[0] for rank, paths in by_dir[complete[0]].items()}
    traces = {p: traces[p] for p in ranks.values()}
    for trace in traces.values():
        assert trace["distributedInfo"].get("world_size") == 2
        # HTA 0.5 treats every row with a "stream" arg as a device row: annotations must not carry one.
        annotations = [e for e in trace["traceEvents"] if e.get("cat") == "gpu_user_annotation"]
        assert not [e for e in annotations if "stream" in e.get("args", {})], "gpu_user_annotation with a stream arg"

    from hta.trace_analysis import TraceAnalysis

    from torch_mspti.hta import trace_analysis

    files = {rank: str(p) for rank, p in ranks.items()}
    analysis = trace_analysis(trace_files=files)
    assert analysis.npu.communication_names, "no device row with collective metadata in the DDP traces"
    assert "LaunchKernelV2" in analysis.npu.launch_names
    assert any(n.startswith("Hccl") for n in analysis.npu.launch_names), analysis.npu.launch_names
    by_type, _ = analysis.get_gpu_kernel_breakdown(visualize=False)
    comm_share = by_type.loc[by_type["kernel_type"].str.contains("COMMUNICATION"), "percentage"].sum()
    assert comm_share > 0, by_type
    plain_types = TraceAnalysis(trace_files=dict(files)).get_gpu_kernel_breakdown(visualize=False)[0]
    assert not plain_types["kernel_type"].str.contains("COMMUNICATION").any(), "plain HTA should see none"

    temporal = analysis.get_temporal_breakdown(visualize=False)
    assert (temporal["kernel_time(us)"] > 0).all() and (temporal["compute_time(us)"] > 0).all()
    overlap = analysis.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"]
    assert len(overlap) == 2 and all(not math.isnan(v) and 0 <= v <= 100 for v in overlap), overlap
    queue = analysis.get_queue_length_summary(ranks=[0, 1])
    assert queue is not None and set(queue.index.get_level_values("rank")) == {0, 1}
    launches = analysis.get_cuda_kernel_launch_stats(ranks=[0, 1], visualize=False)
    for rank, path in ranks.items():
        events = traces[path]["traceEvents"]
        device_cats = ("kernel", "gpu_memcpy", "gpu_memset")
        device = {e.get("args", {}).get("correlation") for e in events if e.get("cat") in device_cats}
        launch_corr = {e.get("args", {}).get("correlation") for e in events if e.get("cat") == "privateuse1_runtime"}
        df = launches[rank]
        assert not df.empty and (df["launch_delay"] >= 0).all()
        assert set(df["correlation"]) <= launch_corr & device


# ------------------------------------------------------------------------------ straggler analysis

LATE_RANK = 2
STRAGGLER_OVERLAPS = (0.5, 0.5, 0.0, 0.5)  # rank 2's all-reduce starts 100 µs later than the others'


@pytest.fixture(scope="module")
def straggler_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hta_straggler")
    syn.write_traces(d, STRAGGLER_OVERLAPS, STEPS)
    return d


def _comm_start(rank: int, step: int) -> int:
    """Start of ``rank``'s all-reduce in ``step`` (µs from rank 0's first step; ranks start 7 µs apart)."""
    return rank * 7 + step * syn.STEP_US + syn.comm_row(STRAGGLER_OVERLAPS[rank], step).start


def test_straggler_analysis_names_the_ranks_whose_collective_starts_last(straggler_dir):
    """HTA's late-start metric, on communication rows named as MSPTI names them: with one candidate
    it names the rank whose all-reduce starts last, with two the two latest. Plain HTA looks for
    ``ncclKernel`` rows only, finds none and fails."""
    require_hta()
    from hta.trace_analysis import TraceAnalysis

    from torch_mspti.hta import trace_analysis

    ranks = range(len(STRAGGLER_OVERLAPS))
    for step in range(ANALYSED):  # the premise: the same order in every analysed step
        latest = sorted(ranks, key=lambda r: _comm_start(r, step), reverse=True)
        assert latest[:2] == [LATE_RANK, 3], latest
    adapted = trace_analysis(straggler_dir)
    assert adapted.get_profiler_steps() == list(range(1, ANALYSED + 1))
    assert adapted.get_potential_stragglers(num_candidates=1, visualize=False) == [LATE_RANK]
    assert set(adapted.get_potential_stragglers(num_candidates=2, visualize=False)) == {LATE_RANK, 3}
    assert not [n for n in adapted.t.symbol_table.get_sym_table() if n.startswith("nccl")], "aliases leaked"
    with pytest.raises(ValueError, match="argmax of an empty sequence"):
        TraceAnalysis(trace_dir=str(straggler_dir)).get_potential_stragglers(visualize=False)


def test_straggler_analysis_without_a_significant_collective_says_why(straggler_dir, tmp_path):
    """HTA counts a collective only when it lasts 1% of the mean iteration or more: with every
    all-reduce shortened to 1 µs (of 1000 µs steps) none is left, and the adapter names that threshold
    instead of HTA's bare argmax error."""
    require_hta()
    from torch_mspti.hta import trace_analysis

    for path in straggler_dir.glob("*.json"):
        trace = json.loads(path.read_text())
        for e in trace["traceEvents"]:
            if "Collective name" in e.get("args", {}):
                e["dur"] = 1
        (tmp_path / path.name).write_text(json.dumps(trace))
    adapted = trace_analysis(tmp_path)
    assert adapted.npu.communication_names  # recognised, but too short
    with pytest.raises(ValueError, match=r"no communication row .* lasts 1% of the mean iteration"):
        adapted.get_potential_stragglers(visualize=False)


# ------------------------------------------------------------------------------ critical path


def test_critical_path_runs_through_the_npu_launches(adapted, synthetic_dir):
    """HTA's critical-path graph takes runtime events from CUDA's categories only; with the NPU's
    (``privateuse1_runtime``) the first step's path runs from its first op (``aten::copy_`` at 2 µs)
    through the copy's launch to the device rows and ends with the last kernel (800 µs): 798 µs, with
    one launch-delay edge. Plain HTA cannot build the graph."""
    import logging

    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)  # the missing CUDA sync events, as warnings
    first_op = min(start for _, start, _ in syn.HOST_OPS)
    last_end = max(r.end for r in syn.step_rows(OVERLAPS[0], 0))
    for rank in range(len(OVERLAPS)):
        graph, ok = adapted.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
        assert ok
        edges = graph.get_critical_path_breakdown()
        assert edges["duration"].sum() == last_end - first_op, edges
        assert (edges["type"] == "critical_path_kernel_launch_delay").sum() == 1, edges
    plain = TraceAnalysis(trace_dir=str(synthetic_dir))
    # HTA 0.5 fails in its own ways there (no queue-length series, a kernel without its runtime node)
    with pytest.raises(Exception):  # noqa: B017
        plain.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=0)
