"""HolisticTraceAnalysis (HTA) 0.5.0 on torch-mspti's NPU traces, without renaming anything.

HTA turns a directory of per-rank kineto traces (one ``distributedInfo.rank`` per file) into
kernel, temporal, overlap, queue-length, launch, straggler and critical-path analyses, but it
recognises CUDA's names only.
:func:`trace_analysis` returns an HTA ``TraceAnalysis`` (a subclass, :class:`NpuTraceAnalysis`)
that also recognises what torch-mspti writes (README "Trace consumers")::

    from torch_mspti.hta import trace_analysis
    analysis = trace_analysis("traces/")  # the directory tensorboard_trace_handler wrote
    analysis.get_comm_comp_overlap(visualize=False)  # ranks × comp_comm_overlap_pctg
    analysis.get_potential_stragglers(visualize=False)  # e.g. [3, 2]
    analysis.npu.launch_names, analysis.npu.communication_names  # what the adapter recognised

What HTA 0.5 hard-codes, and what the adapter does about it (the trace files are never edited,
and no row is renamed in HTA's data frames):

* **Communication rows.** ``hta.utils.utils.get_kernel_type`` calls a kernel COMMUNICATION when
  its name matches ``NCCL_KERNEL_RE`` (``^nccl.*Kernel``); MSPTI names collectives e.g.
  ``hcom_allReduce__428_0_1``, so HTA counts them as computation, and the overlap is NaN.
  The adapter calls a device row communication when it carries kineto's collective metadata key
  ``"Collective name"`` (torch-mspti writes it on every HCCL/LCCL row), which it asks HTA's
  parser for (HTA's ``ARGS_COMMUNICATION``). During every method call of the returned analysis
  (and inside :meth:`NpuTraceAnalysis.recognising`), ``NCCL_KERNEL_RE`` is replaced by a matcher
  that accepts HTA's own pattern plus exactly those names, and restored afterwards.
* **Launch events.** The queue-length series (``TraceSymbolTable.get_runtime_launch_events_query``)
  and the op→kernel delays (``get_kernel_launch_ids``) take launches from a fixed list of
  CUDA/ROCm/MTIA API names. The adapter calls a host row a launch when its category is
  ``privateuse1_runtime`` and HTA paired it with a device row by ``correlation``, whatever MSPTI
  named the API (``LaunchKernelV2``, ``HcclAllReduce``, ``aclrtMemcpyAsync``…); the analysis's
  symbol table is a subclass whose two methods add those names.
* **Kernel launch statistics.** ``CudaKernelAnalysis.cuda_kernel_launch_stats`` looks up
  ``cudaLaunchKernel`` & co. by string. The adapted ``get_cuda_kernel_launch_stats`` runs HTA's
  own function as usual and once more per NPU launch name, through a read-only view of the trace
  whose name lookup answers ``cudaLaunchKernel`` with that name's id, and concatenates the rows
  (one per correlation id). Memory launches are left out when ``include_memory_events=False``.
* **Memory rows** need nothing: HTA's ``^Memcpy``/``^Memset`` rule already matches kineto's
  names (``Memcpy HtoD (Host -> Device)``, ``Memset (Device)``) that torch-mspti uses.
* **Straggler analysis.** HTA's default metric (``find_stragglers_with_late_start_comm_kernels``)
  takes as communication kernels the symbol-table names that start with ``ncclKernel``, so it finds
  none in an NPU trace and fails (pandas' "argmax of an empty sequence"). The adapted
  ``get_potential_stragglers`` passes HTA's own function a read-only view of the symbol table that
  lists, after HTA's names (ids unchanged), one alias ``ncclKernel (NPU) <name>`` per communication
  name (the same names as above) mapped to that name's id; rows keep their names. A metric given
  as ``straggler_identification_impl`` gets HTA's table as usual. HTA's metric is unchanged: of
  the collectives that last 1 % of the mean iteration or more, it takes the one whose duration
  varies most across ranks and names the ranks that start it latest. On the simulated NPU a collective's device
  time is only its modelled transfer (8 µs + bytes / 50 GB/s by default), never the wait for the
  slowest rank that a real HCCL collective's time includes, so with short steps none may qualify:
  the adapter then raises ValueError naming that threshold (``benchmarks/multirank.py`` models a
  5 ms link latency with ``torch_mspti.sim.hccl.set_link_model``).
* **Critical-path analysis.** Its graph takes runtime events from the categories ``cuda_runtime`` and
  ``cuda_driver`` only (``TraceSymbolTable.get_operator_or_cuda_runtime_query``): no NPU launch is a
  node, and building the graph fails. The symbol table's query also accepts
  ``privateuse1_runtime``, so launches link ops to their device rows as CUDA launches do. A
  collective on the path is ``gpu_communication_bound`` through the communication matcher above;
  the returned graph's ``get_critical_path_breakdown`` (and so ``summary()``) installs the matcher
  itself, since it is called after the analysis returned.
* **Sub-microsecond rows.** HTA rounds fractional-microsecond times to whole ones, start up and
  end down, so a row inside one microsecond (a small copy or memset, a short kernel) gets the
  duration -1, and ``get_temporal_breakdown`` fails (``AssertionError: non_compute_time >= 0``).
  The adapter sets those durations to 0, what the rounding leaves of such a row, and counts them in
  ``npu.sub_microsecond_rows``.

Not adapted, and why:

* **Synchronisation in the critical path.** HTA adds GPU→CPU and GPU→GPU dependency edges from
  kineto's ``cuda_sync`` device rows (CUPTI's synchronisation records: Context Sync, Stream Sync,
  Event Sync, Stream Wait Event with ``wait_on_stream``) and the ``cudaEventRecord`` /
  ``cudaStreamWaitEvent`` runtime calls they point to. MSPTI has no synchronisation activity kind
  (docs/mspti.md 3.2), so an NPU trace has no such rows, and an adapter that never adds or renames
  rows cannot supply these edges. The NPU critical path therefore has no sync edges (HTA warns that
  the trace has no CUDA synchronisation events): a host wait for the device counts as CPU time, and
  a stream's wait for another stream is missing.
* **CUPTI counters** (``get_cupti_counter_data_with_operators``): MSPTI has no hardware-counter
  records, so there is nothing to read.

Requirements: ``pip install 'torch-mspti[hta]'`` (HolisticTraceAnalysis==0.5.0 and the pandas,
psutil and PyYAML it needs). HTA is imported on first use; without it, or with another version
(the hooks above are HTA 0.5.0 internals), :func:`trace_analysis` raises ImportError naming the
extra. Importing this module needs neither HTA nor torch.

Thread-safety: the communication matcher is process-global while installed, so calls of adapted
analyses are serialised by one re-entrant lock; meanwhile an unadapted HTA analysis in another
thread would also accept the extra names (they never start with ``nccl``, so CUDA traces are
classified as before).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import threading
from dataclasses import dataclass
from typing import Any

HTA_VERSION = "0.5.0"
EXTRA = "hta"
LAUNCH_CATEGORY = "privateuse1_runtime"  # kineto's category for PrivateUse1 runtime API events
MEMORY_CATEGORIES = ("gpu_memcpy", "gpu_memset")
COLLECTIVE_COLUMN = "collective_name"  # HTA's column for the "Collective name" arg
STRAGGLER_ALIAS_PREFIX = "ncclKernel (NPU) "  # what HTA's straggler metric looks for, then the NPU name

_lock = threading.RLock()


def _import_hta() -> None:
    def missing(exc: Exception) -> ImportError:
        return ImportError(
            f"torch_mspti.hta needs HolisticTraceAnalysis=={HTA_VERSION} ({exc}): pip install 'torch-mspti[{EXTRA}]'"
        )

    try:
        version = importlib.metadata.version("HolisticTraceAnalysis")
    except importlib.metadata.PackageNotFoundError as exc:
        raise missing(exc) from exc
    if version != HTA_VERSION:
        raise ImportError(
            f"torch_mspti.hta adapts HolisticTraceAnalysis {HTA_VERSION} (it hooks version-specific "
            f"internals), found {version}: pip install 'torch-mspti[{EXTRA}]'"
        )
    try:
        import hta.trace_analysis  # noqa: F401
    except ImportError as exc:  # e.g. a dependency HTA does not declare (psutil, PyYAML)
        raise missing(exc) from exc


@dataclass(frozen=True)
class NpuNames:
    """What the adapter recognised in the traces (names as MSPTI gives them, sorted).

    launch_names: host launch events (all ranks); memory_launch_names: those of them that launch
    memcpy/memset rows; communication_names: device rows with collective metadata.
    """

    launch_names: tuple[str, ...]
    memory_launch_names: tuple[str, ...]
    communication_names: tuple[str, ...]
    #: Rows (all ranks) that lie within one microsecond, whose duration HTA's rounding made
    #: negative and the adapter set to 0 (see the module docstring).
    sub_microsecond_rows: int = 0


class _CommunicationPattern:
    """Stands in for ``hta.utils.utils.NCCL_KERNEL_RE``: its ``match`` is truthy for what the
    replaced pattern matches and for the given names, and None otherwise (as ``re.match``)."""

    def __init__(self, replaced: Any, names: frozenset[str]) -> None:
        self._replaced, self._names = replaced, names

    def match(self, name: str) -> Any:
        found = self._replaced.match(name)
        if found is None and name in self._names:
            return True
        return found


@contextlib.contextmanager
def _communication_names(names: frozenset[str]):
    import hta.utils.utils as hta_utils

    with _lock:
        replaced = hta_utils.NCCL_KERNEL_RE
        hta_utils.NCCL_KERNEL_RE = _CommunicationPattern(replaced, names)
        try:
            yield
        finally:
            hta_utils.NCCL_KERNEL_RE = replaced


class _LaunchNameTable:
    """The one lookup ``cuda_kernel_launch_stats`` makes: ``cudaLaunchKernel`` -> an NPU name id."""

    def __init__(self, name_id: int) -> None:
        self._ids = {"cudaLaunchKernel": name_id}

    def get_sym_id_map(self) -> dict[str, int]:
        return self._ids


class _LaunchNameView:
    """Read-only view of an HTA Trace for ``cuda_kernel_launch_stats`` (it reads nothing else)."""

    def __init__(self, trace: Any, name_id: int) -> None:
        self._trace, self.symbol_table = trace, _LaunchNameTable(name_id)

    def get_trace(self, rank: int) -> Any:
        return self._trace.get_trace(rank)


class _CommunicationSymbols:
    """Read-only view of an HTA symbol table for HTA's default straggler metric, which takes as
    communication kernels the names that start with ``ncclKernel``: after HTA's own names (ids
    unchanged, so every row still decodes to its own name) it lists one alias per communication
    name, ``ncclKernel (NPU) <name>``, mapped to that name's id. Nothing else is answered here."""

    def __init__(self, table: Any, names: frozenset[str]) -> None:
        self._table = table
        ids = table.get_sym_id_map()
        aliases = {f"{STRAGGLER_ALIAS_PREFIX}{n}": ids[n] for n in sorted(names) if n in ids}
        self._sym_table = [*table.get_sym_table(), *aliases]
        self._ids = {**ids, **aliases}

    def get_sym_table(self) -> list[str]:
        return self._sym_table

    def get_sym_id_map(self) -> dict[str, int]:
        return self._ids


def _clamp_rounded_durations(trace: Any) -> int:
    """HTA rounds a trace with fractional microseconds to whole ones, start up and end down
    (``round_down_time_stamps``), so a row that starts and ends inside one microsecond (a small
    copy or memset, a short kernel) gets the duration -1; sums of them make
    ``get_temporal_breakdown`` fail (``AssertionError: non_compute_time >= 0``). Such rows are set
    to what the rounding leaves of them, 0 us, in HTA's data frames; returns how many there were."""
    clamped = 0
    for df in trace.traces.values():
        if "dur" not in df.columns:
            continue
        negative = df["dur"] < 0
        n = int(negative.sum())
        if n:
            df.loc[negative, "dur"] = 0
            if "end" in df.columns:
                df.loc[negative, "end"] = df.loc[negative, "ts"]
            clamped += n
    return clamped


def _discover(trace: Any) -> tuple[dict[str, int], set[str], set[str]]:
    """(launch name -> id, memory launch names, communication names) over all ranks of ``trace``."""
    sym_index, sym_table = trace.symbol_table.get_sym_id_map(), trace.symbol_table.get_sym_table()
    launch_cat = sym_index.get(LAUNCH_CATEGORY)
    memory_cats = [sym_index[c] for c in MEMORY_CATEGORIES if c in sym_index]
    launches, memory, comm = {}, set(), set()
    for df in trace.get_all_traces().values():
        if launch_cat is not None:
            rows = df[df["cat"].eq(launch_cat) & df["index_correlation"].gt(0)]
            device_cats = df["cat"].reindex(rows["index_correlation"].to_numpy()).to_numpy()
            for name_id, cat in zip(rows["name"].to_numpy(), device_cats, strict=True):
                name = sym_table[name_id]
                launches[name] = int(name_id)
                if cat in memory_cats:
                    memory.add(name)
        if COLLECTIVE_COLUMN in df.columns:
            rows = df[df["stream"].ne(-1) & df[COLLECTIVE_COLUMN].fillna("").astype(str).ne("")]
            comm.update(sym_table[i] for i in rows["name"].unique())
    return launches, memory, comm


def _adapted(method):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with self.recognising():
            return method(self, *args, **kwargs)

    return call


@functools.cache
def _classes() -> tuple[type, type]:
    """Builds (NpuTraceSymbolTable, NpuTraceAnalysis) on HTA's classes, once HTA is importable."""
    _import_hta()
    import pandas as pd
    from hta.analyzers.cuda_kernel_analysis import CudaKernelAnalysis
    from hta.analyzers.straggler import find_stragglers_with_late_start_comm_kernels
    from hta.analyzers.straggler_analysis import StragglerAnalysis
    from hta.common.trace import Trace
    from hta.common.trace_symbol_table import TraceSymbolTable
    from hta.configs.parser_config import ParserConfig
    from hta.trace_analysis import TraceAnalysis

    class NpuTraceSymbolTable(TraceSymbolTable):
        """HTA's symbol table, plus the NPU launch names in its two launch-name queries and the NPU
        runtime category in the critical path's runtime-event query."""

        npu_launch_ids: tuple[int, ...] = ()  # all launches
        npu_kernel_launch_ids: tuple[int, ...] = ()  # launches of kernels and collectives

        def get_runtime_launch_events_query(self) -> str:
            query = super().get_runtime_launch_events_query()
            if not self.npu_launch_ids:
                return query
            return f"({query}) or ((name in {list(self.npu_launch_ids)}) and (index_correlation > 0))"

        def get_kernel_launch_ids(self) -> list[int]:
            return super().get_kernel_launch_ids() + list(self.npu_kernel_launch_ids)

        def get_operator_or_cuda_runtime_query(self) -> str:
            query = super().get_operator_or_cuda_runtime_query()
            launch_cat = self.sym_index.get(LAUNCH_CATEGORY)
            return query if launch_cat is None else f"({query} or cat == {launch_cat})"

    class NpuTraceAnalysis(TraceAnalysis):
        """HTA 0.5's TraceAnalysis that also recognises NPU rows (see the module docstring).

        ``npu`` (:class:`NpuNames`) lists what was recognised; ``t`` is HTA's Trace, as usual.
        """

        def __init__(self, trace_files=None, trace_dir=None, include_last_profiler_step=False, parser_config=None):
            cfg = (parser_config or ParserConfig.get_default_cfg()).clone()
            cfg.add_args(ParserConfig.ARGS_COMMUNICATION)  # "Collective name" and the other NCCL keys
            self.t = Trace(trace_files, trace_dir, parser_config=cfg)
            self.t.symbol_table = NpuTraceSymbolTable()  # filled by load_traces
            self.t.load_traces(include_last_profiler_step)
            sub_microsecond = _clamp_rounded_durations(self.t)
            launches, memory, comm = _discover(self.t)
            table = self.t.symbol_table
            table.npu_launch_ids = tuple(sorted(launches.values()))
            table.npu_kernel_launch_ids = tuple(sorted(i for n, i in launches.items() if n not in memory))
            self.npu = NpuNames(tuple(sorted(launches)), tuple(sorted(memory)), tuple(sorted(comm)), sub_microsecond)
            self._communication = frozenset(comm)

        def recognising(self):
            """Context manager: HTA's classification recognises this analysis's communication
            rows inside it (for calling HTA analyzers on ``self.t`` directly). Re-entrant."""
            return _communication_names(self._communication)

        def get_potential_stragglers(
            self,
            profiler_steps=None,
            num_candidates=2,
            visualize=False,
            straggler_identification_impl=find_stragglers_with_late_start_comm_kernels,
        ):
            impl = straggler_identification_impl
            if impl is find_stragglers_with_late_start_comm_kernels:  # HTA's metric: "ncclKernel" names
                communication = self._communication

                def impl(df, symbol_table, n_stragglers, visualize):
                    symbols = _CommunicationSymbols(symbol_table, communication)
                    try:
                        return find_stragglers_with_late_start_comm_kernels(df, symbols, n_stragglers, visualize)
                    except ValueError as exc:  # HTA's idxmax over no candidate: say why
                        if "empty sequence" not in str(exc):
                            raise
                        raise ValueError(
                            "get_potential_stragglers: no communication row of the selected profiler steps "
                            f"lasts 1% of the mean iteration or more (HTA {HTA_VERSION}'s threshold for a "
                            f"significant collective; {len(communication)} communication names recognised)"
                        ) from exc

            return StragglerAnalysis.get_potential_stragglers(self.t, profiler_steps, num_candidates, visualize, impl)

        def critical_path_analysis(self, rank, annotation, instance_id):
            result = TraceAnalysis.critical_path_analysis(self, rank, annotation, instance_id)
            graph = result[0] if isinstance(result, tuple) else None
            if graph is not None:  # its summary classifies collectives later, outside this call
                breakdown = graph.get_critical_path_breakdown

                def recognised_breakdown():
                    with self.recognising():
                        return breakdown()

                graph.get_critical_path_breakdown = recognised_breakdown
            return result

        def get_cuda_kernel_launch_stats(
            self, ranks=None, runtime_cutoff=50, launch_delay_cutoff=100, include_memory_events=True, visualize=True
        ):
            ranks = ranks or [0]
            parts = [
                CudaKernelAnalysis.cuda_kernel_launch_stats(
                    self.t, ranks, runtime_cutoff, launch_delay_cutoff, include_memory_events, False
                )
            ]
            table = self.t.symbol_table
            ids = table.npu_launch_ids if include_memory_events else table.npu_kernel_launch_ids
            for name_id in ids:
                view = _LaunchNameView(self.t, name_id)
                parts.append(
                    CudaKernelAnalysis.cuda_kernel_launch_stats(
                        view, ranks, runtime_cutoff, launch_delay_cutoff, False, False
                    )
                )
            result = {}
            for rank in ranks:
                df = pd.concat([p[rank] for p in parts], ignore_index=True)
                result[rank] = df.sort_values("correlation", ignore_index=True)
                if visualize:  # pragma: no cover - plots only
                    CudaKernelAnalysis.visualize_cuda_launch_kernel_info(
                        rank, result[rank], runtime_cutoff, launch_delay_cutoff
                    )
            return result

    for name in dir(TraceAnalysis):
        if not name.startswith("_") and callable(getattr(TraceAnalysis, name)):
            setattr(NpuTraceAnalysis, name, _adapted(getattr(NpuTraceAnalysis, name)))
    return NpuTraceSymbolTable, NpuTraceAnalysis


def trace_analysis(
    trace_dir: str | os.PathLike[str] | None = None,
    *,
    trace_files: dict[int, str] | None = None,
    include_last_profiler_step: bool = False,
    parser_config: Any = None,
) -> Any:
    """An HTA 0.5 ``TraceAnalysis`` (an :class:`NpuTraceAnalysis`) of per-rank NPU traces.

    Args: ``trace_dir``, a directory of ``*.json``/``*.json.gz`` traces, one per rank (rank from
    each trace's ``distributedInfo.rank``); or ``trace_files``, ``{rank: path}``. The other two
    arguments are HTA's: by default HTA drops the last profiler step (it may be incomplete), and
    the parser is HTA's default plus the collective metadata keys.
    Raises ImportError (with the pip command) when HolisticTraceAnalysis 0.5.0 is not installed,
    FileNotFoundError / ValueError when ``trace_dir`` is not a directory or holds no trace.
    """
    if trace_files is None:
        if trace_dir is None:
            raise ValueError("trace_analysis: give trace_dir (a directory of per-rank traces) or trace_files")
        trace_dir = os.fspath(trace_dir)
        if not os.path.isdir(trace_dir):
            raise FileNotFoundError(f"trace_analysis: {trace_dir!r} is not a directory of traces")
        if not any(f.endswith((".json", ".gz")) for f in os.listdir(trace_dir)):
            raise ValueError(f"trace_analysis: no trace (*.json, *.json.gz) in {trace_dir!r}")
    npu_analysis = _classes()[1]
    return npu_analysis(trace_files, trace_dir or "", include_last_profiler_step, parser_config)


def __getattr__(name: str) -> Any:
    # NpuTraceAnalysis / NpuTraceSymbolTable subclass HTA's classes, so they exist once HTA imports.
    if name in ("NpuTraceSymbolTable", "NpuTraceAnalysis"):
        symbol_table, analysis = _classes()
        return analysis if name == "NpuTraceAnalysis" else symbol_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
