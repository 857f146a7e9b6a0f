"""Structural rules over an exported Chrome trace (the engine behind ``torch_mspti_cli.check``).

Pure Python, no torch. Every rule runs in O(n log n): one pass indexes the events by lane, then
each rule sorts and sweeps. Times are Chrome-trace microseconds (kineto writes 3 decimals), so
comparisons allow a small tolerance (see ``tolerance_for``).
"""

from __future__ import annotations

import heapq
import json
import math
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

# Kineto rounds ts and dur to 1 ns (3 decimals in µs); an end computed as ts + dur can be off by
# both roundings plus the float error of the sum.
TOLERANCE_US = 0.0015

DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
OP_CAT = "cpu_op"
USER_RANGE_CAT = "user_annotation"  # record_function ranges: launches inside one link to it
LAUNCH_CAT = "privateuse1_runtime"
FLOW_CAT = "ac2g"
# Slices of torch's own that do not nest by construction; the nesting rule leaves them out (they are
# torch's, not the producer's, and nothing the user can change):
# * the Python tracer's frames (with_stack=True): a record_function range opens inside the frame of
#   _record_function_enter_new and closes inside that of __exit__;
# * c10d's asynchronous Work ranges (user_annotation "gloo:send", "nccl:all_reduce", ...): opened on
#   the calling thread inside the collective's op, closed when the work completes, after the op.
PYTHON_FRAME_CAT = "python_function"
C10D_WORK_PREFIXES = ("gloo:", "nccl:", "hccl:", "ucc:", "mpi:", "xccl:")
# kineto's output_base.h: device lanes get sort index device + kExceedMaxPid.
EXCEED_MAX_PID = 5_000_000

RULES: dict[str, str] = {
    "event-malformed": "every entry of traceEvents is an object with scalar pid, tid and id",
    "timestamp-not-numeric": "slices and flow events carry numeric, finite ts (and dur for slices)",
    "duration-not-positive": "kernels, copies and launches last > 0 µs (device rows of 0 µs only as many as the "
    "health report counts as zero_duration or repaired overlaps); no slice has a negative dur",
    "kernel-args": "kernels carry device, stream and correlation matching their pid/tid",
    "launch-args": "launch events carry correlation and no stream",
    "flow-duplicate-start": "each ac2g flow id starts once",
    "flow-unpaired": "every ac2g start has a finish and every finish a start",
    "flow-backwards": "an ac2g finish is not earlier than its start",
    "flow-start-not-on-host-slice": "an ac2g start sits inside a slice on a host (cpu_op) lane",
    "flow-end-not-on-device-slice": "an ac2g finish sits inside a kernel/copy slice on a device lane",
    "flow-end-binding": 'an ac2g finish has "bp": "e" (bind to the enclosing slice)',
    "flow-link-mismatch": "both ends of an arrow agree on correlation and External id",
    "kernel-overlap-in-stream": "kernels on one stream (pid + tid) do not overlap",
    "lane-not-nested": "the slices of one lane (pid + tid) nest or are disjoint: none starts inside another and "
    "ends after it, which viewers (Perfetto) drop or mis-nest; times compared in whole ns; two device rows that "
    "overlap are kernel-overlap-in-stream's; torch's python_function frames and c10d Work ranges (gloo:*, nccl:*, ...) "
    "are left out",
    "launch-not-nested-in-op": "each launch linked to an op (it has an External id) lies inside a cpu_op or "
    "user_annotation slice on its pid/tid",
    "npu-lane-unnamed": "device processes have process_name and process_labels, streams a thread_name",
    "npu-lane-sorted-above-cpu": "device processes sort below (after) every CPU process",
    "link-ratio-below-min": "the share of kernels with an External id reaches --min-link-ratio",
    "health-report-malformed": 'the trace-level "torch_mspti" entry is a JSON object',
    "collective-args": "a collective row joined with its process group (it has Process Group Description) carries "
    "every field of the join with its JSON type; a row not joined carries none of them and keeps its comm name",
    "collective-group-mismatch": "a joined collective row names a group of distributedInfo.pg_config and agrees with "
    "it (description, ranks, size), with distributedInfo.rank (Rank) and with its size (Src Rank, Dst Rank)",
    "collective-nelems-mismatch": "a joined collective row's In and Out msg nelems agree for its collective and "
    "Group size",
    "collective-seq-order": "Seq numbers each collective of a group once, increasing with the rows' start time on "
    "a stream",
    "collective-no-distributed-info": "a trace with joined collective rows carries distributedInfo with its rank "
    "and pg_config",
    "collective-count-mismatch": "the health report's collectives.rows and collectives.joined equal the trace's "
    "collective rows and joined ones",
}

#: Warning id -> what it expects; reported, but the check still passes.
WARNINGS: dict[str, str] = {
    "collectives-not-joined": "every collective row is joined with its process group (pg_config's pg_name, Rank, Seq)",
    "collective-group-not-in-pg-config": "every joined collective row's group is in distributedInfo.pg_config, "
    "which torch writes when the profiler starts",
}


@dataclass(frozen=True)
class Problem:
    """One rule violation: the rule id, a readable message and an excerpt of the offending event."""

    rule: str
    message: str
    event: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "event": self.event}


_EXCERPT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id")


def excerpt(events: list, index: int) -> dict[str, Any]:
    e = events[index]
    out: dict[str, Any] = {"index": index}
    if not isinstance(e, dict):
        out["value"] = repr(e)[:80]
        return out
    for k in _EXCERPT_KEYS:
        if k in e:
            v = e[k]
            out[k] = v[:77] + "..." if isinstance(v, str) and len(v) > 80 else v
    return out


class Sink:
    """Counts every problem; keeps the first ``limit`` with their excerpts."""

    def __init__(self, events: list, limit: int) -> None:
        self.events = events
        self.limit = max(0, limit)
        self.kept: list[Problem] = []
        self.counts: Counter[str] = Counter()

    def add(self, rule: str, message: str, index: int | None = None) -> None:
        self.counts[rule] += 1
        if len(self.kept) < self.limit:
            ev = excerpt(self.events, index) if index is not None else None
            self.kept.append(Problem(rule, message, ev))


def is_number(v: Any) -> bool:
    """A finite int or float, not a bool (called per event, so exact types are tested first)."""
    t = type(v)
    if t is float:
        return v - v == 0.0  # False for inf and nan
    if t is int:
        return True
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fmt_ts(v: Any) -> str:
    return f"{v:.3f}" if is_number(v) else repr(v)


def tolerance_for(max_abs_ts: float) -> float:
    # Absolute-epoch traces have ts near 5e12 µs where one float ulp is ~0.001 µs.
    return TOLERANCE_US + 4 * math.ulp(max_abs_ts)


class Lane:
    """Slices of one (pid, tid), sorted by start (outer first on ties), with a running max of ends."""

    __slots__ = ("starts", "ends", "idx", "pmax")

    def __init__(self, items: list[tuple[float, float, int]]) -> None:
        items.sort(key=lambda t: (t[0], -t[1]))
        self.starts = [t[0] for t in items]
        self.ends = [t[1] for t in items]
        self.idx = [t[2] for t in items]
        self.pmax: list[float] = []
        m = -math.inf
        for end in self.ends:
            m = end if end > m else m
            self.pmax.append(m)

    def innermost(self, ts: float, tol: float) -> int | None:
        """Event index of the slice that encloses ``ts``, or None: among the enclosing slices that
        start within ``tol`` of ``ts``, the one starting nearest to it (an arrow's finish sits at
        its row's start, and a row the lane repair shortened to 1 ns is followed by one starting
        1 ns later, inside the tolerance); else the latest-starting one."""
        j = bisect_right(self.starts, ts + tol) - 1
        best = None
        # Walk back only while some earlier slice still reaches ts (pmax is monotone).
        while j >= 0 and self.pmax[j] >= ts - tol:
            if self.ends[j] >= ts - tol:
                if self.starts[j] < ts - tol:
                    return self.idx[j if best is None else best]
                if best is None or abs(self.starts[j] - ts) < abs(self.starts[best] - ts):
                    best = j
            j -= 1
        return None if best is None else self.idx[best]

    def covers(self, start: float, end: float, tol: float) -> bool:
        """True when one slice spans [start, end]."""
        j = bisect_right(self.starts, start + tol) - 1
        return j >= 0 and self.pmax[j] >= end - tol


def lane_name(pid: Any, tid: Any, device: bool) -> str:
    return f"device {pid} stream {tid}" if device else f"pid {pid} tid {tid}"


@dataclass
class Index:
    """Everything the rules need, gathered in one pass over the events."""

    events: list
    slices: dict[tuple, list] = field(default_factory=lambda: defaultdict(list))
    device_slices: dict[tuple, list] = field(default_factory=lambda: defaultdict(list))
    op_slices: dict[tuple, list] = field(default_factory=lambda: defaultdict(list))
    launches: list[int] = field(default_factory=list)
    starts: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    ends: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    host_pids: set = field(default_factory=set)
    launch_pids: set = field(default_factory=set)  # processes with launch events (host processes too)
    device_pids: set = field(default_factory=set)
    process_names: dict = field(default_factory=dict)
    process_labels: dict = field(default_factory=dict)
    process_sort: dict = field(default_factory=dict)
    thread_names: dict = field(default_factory=dict)
    kernels: int = 0
    linked_kernels: int = 0
    # device-side work that is not a row: mstx markers on a stream lane, NPU memory events
    other_device_work: int = 0
    link_states: Counter = field(default_factory=Counter)  # args.link of the device rows
    max_abs_ts: float = 0.0
    # device rows of dur 0, judged against the health report by check_zero_length_rows
    zero_length_rows: list[int] = field(default_factory=list)
    collectives: list[int] = field(default_factory=list)  # kernel rows with a "Collective name"


def _args(e: dict) -> dict:
    a = e.get("args")
    return a if isinstance(a, dict) else {}


_INDEXED_PHASES = frozenset({"X", "s", "f", "M"})
_SCALARS = (int, str, float, bool, type(None))


def _is_scalar(v: Any) -> bool:
    return type(v) in _SCALARS or isinstance(v, (int, str, float))  # hashable lane and flow keys


def build_index(events: list, sink: Sink) -> Index:
    ix = Index(events)
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            sink.add("event-malformed", f"traceEvents[{i}] is {type(e).__name__}, not an object", i)
            continue
        ph = e.get("ph")
        if ph in _INDEXED_PHASES:
            bad = [k for k in ("pid", "tid", "id") if not _is_scalar(e.get(k))]
            if bad:
                sink.add("event-malformed", f"traceEvents[{i}] has a non-scalar {', '.join(bad)}", i)
                continue
        if ph == "X":
            _index_slice(ix, sink, i, e)
        elif ph in ("s", "f") and e.get("cat") == FLOW_CAT:
            ts = e.get("ts")
            if not is_number(ts):
                sink.add("timestamp-not-numeric", f"ac2g flow {ph!r} id {e.get('id')!r} has ts {ts!r}", i)
                continue
            ix.max_abs_ts = max(ix.max_abs_ts, abs(ts))
            (ix.starts if ph == "s" else ix.ends)[(e.get("id"), e.get("name"))].append(i)
        elif ph == "M":
            _index_metadata(ix, e)
    return ix


def _index_slice(ix: Index, sink: Sink, i: int, e: dict) -> None:
    ts, dur, cat = e.get("ts"), e.get("dur"), e.get("cat")
    if cat == "kernel" and COLLECTIVE_KEY in _args(e):
        ix.collectives.append(i)  # counted whatever its times (the health report counts it too)
    if not (is_number(ts) and is_number(dur)):
        sink.add(
            "timestamp-not-numeric",
            f"slice {e.get('name')!r} ({cat}) has ts {ts!r} and dur {dur!r}; both must be numbers",
            i,
        )
        return
    ix.max_abs_ts = max(ix.max_abs_ts, abs(ts))
    pid, tid = e.get("pid"), e.get("tid")
    if dur == 0 and cat in DEVICE_CATS:
        ix.zero_length_rows.append(i)  # a task shorter than MSPTI's 1 ns, if the plugin says so
    elif dur < 0 or (dur == 0 and cat == LAUNCH_CAT):
        sink.add("duration-not-positive", f"{cat} {e.get('name')!r} on pid {pid} tid {tid} has dur {dur!r}", i)
        if dur < 0:
            return
    item = (ts, ts + dur, i)
    lane = (pid, tid)
    ix.slices[lane].append(item)
    args = _args(e)
    if (cat == "gpu_user_annotation" and "marker id" in args) or (
        cat == "privateuse1_driver" and e.get("name") in ("Memory Allocation", "Memory Release") and "bytes" in args
    ):
        ix.other_device_work += 1
    if cat in DEVICE_CATS:
        ix.device_pids.add(pid)
        ix.device_slices[lane].append(item)
        if isinstance(args.get("link"), str):
            ix.link_states[args["link"]] += 1
        if cat == "kernel":
            ix.kernels += 1
            if args.get("External id"):
                ix.linked_kernels += 1
            _check_kernel_args(sink, i, e, args)
    elif cat in (OP_CAT, USER_RANGE_CAT):
        ix.host_pids.add(pid)
        ix.op_slices[lane].append(item)
    elif cat == LAUNCH_CAT:
        ix.launches.append(i)
        ix.launch_pids.add(pid)
        if "stream" in args:
            sink.add(
                "launch-args",
                f"launch {e.get('name')!r} on pid {pid} tid {tid} has a stream arg "
                "(analysis tools then take it for device work)",
                i,
            )
        elif "correlation" not in args:
            sink.add(
                "launch-args",
                f"launch {e.get('name')!r} on pid {pid} tid {tid} lacks a correlation "
                "arg (analysis tools pair launches and kernels by it)",
                i,
            )


def _check_kernel_args(sink: Sink, i: int, e: dict, args: dict) -> None:
    missing = [k for k in ("device", "stream", "correlation") if k not in args]
    where = f"kernel {e.get('name')!r} on pid {e.get('pid')} tid {e.get('tid')}"
    if missing:
        sink.add("kernel-args", f"{where} lacks args {', '.join(missing)}", i)
    elif args["device"] != e.get("pid") or args["stream"] != e.get("tid"):
        sink.add("kernel-args", f"{where} says device {args['device']!r} stream {args['stream']!r}", i)


def _index_metadata(ix: Index, e: dict) -> None:
    name, args, pid = e.get("name"), _args(e), e.get("pid")
    if name == "process_name":
        ix.process_names[pid] = args.get("name")
    elif name == "process_labels":
        ix.process_labels[pid] = args.get("labels")
    elif name == "process_sort_index":
        ix.process_sort[pid] = args.get("sort_index")
    elif name == "thread_name":
        ix.thread_names[(pid, e.get("tid"))] = args.get("name")


# --------------------------------------------------------------------------------------- rules


def check_flows(ix: Index, sink: Sink, tol: float) -> int:
    """Pairing, direction and placement of ac2g arrows. Returns the number of distinct starts."""
    ev = ix.events
    # A process with launches but no op (threads torch did not record) is a host process as well.
    host_pids = ix.host_pids | (ix.launch_pids - ix.device_pids)
    host = {lane: Lane(items) for lane, items in ix.slices.items() if lane[0] in host_pids}
    dev = {lane: Lane(items) for lane, items in ix.device_slices.items()}

    def bind(i: int, lanes: dict, pids: set) -> int | None:
        e = ev[i]
        lane = (e.get("pid"), e.get("tid"))
        if lane[0] not in pids or lane not in lanes:
            return None
        return lanes[lane].innermost(e["ts"], tol)

    for key, starts in ix.starts.items():
        fid = key[0]
        if len(starts) > 1:
            sink.add(
                "flow-duplicate-start",
                f"ac2g flow id {fid!r} starts {len(starts)} times; viewers rebind the arrow to one of them",
                starts[1],
            )
        s_slice = None
        for si in starts:
            s = ev[si]
            b = bind(si, host, host_pids)
            if b is None:
                why = (
                    "no host slice is open there"
                    if s.get("pid") in host_pids
                    else f"pid {s.get('pid')!r} is not a host process"
                )
                sink.add(
                    "flow-start-not-on-host-slice",
                    f"ac2g flow id {fid!r} starts at ts {fmt_ts(s['ts'])} on "
                    f"{lane_name(s.get('pid'), s.get('tid'), s.get('pid') in ix.device_pids)}, but {why}",
                    si,
                )
            elif s_slice is None:
                s_slice = b
        finishes = ix.ends.get(key)
        if not finishes:
            sink.add(
                "flow-unpaired",
                f"ac2g flow id {fid!r} starts at ts {fmt_ts(ev[starts[0]]['ts'])} but never finishes (no 'f' event)",
                starts[0],
            )
            continue
        s_ts = ev[starts[0]]["ts"]
        for fi in finishes:
            f = ev[fi]
            if f["ts"] < s_ts - tol:
                sink.add(
                    "flow-backwards",
                    f"ac2g flow id {fid!r} points backwards: finish ts "
                    f"{fmt_ts(f['ts'])} is before start ts {fmt_ts(s_ts)}",
                    fi,
                )
            f_slice = _check_finish(ix, sink, fi, fid, bind(fi, dev, ix.device_pids))
            if s_slice is not None and f_slice is not None:
                _check_link(ev, sink, fid, s_slice, f_slice, fi)

    for key, finishes in ix.ends.items():
        if key not in ix.starts:
            for fi in finishes:
                _check_finish(ix, sink, fi, key[0], bind(fi, dev, ix.device_pids))
                sink.add(
                    "flow-unpaired",
                    f"ac2g flow id {key[0]!r} finishes at ts {fmt_ts(ev[fi]['ts'])} but never starts (no 's' event)",
                    fi,
                )
    return len(ix.starts)


def _check_finish(ix: Index, sink: Sink, fi: int, fid: Any, bound: int | None) -> int | None:
    f = ix.events[fi]
    if f.get("bp") != "e":
        sink.add(
            "flow-end-binding",
            f'ac2g flow id {fid!r} finish lacks "bp": "e", so viewers bind it '
            "to the next slice instead of the enclosing kernel",
            fi,
        )
    if bound is None:
        pid = f.get("pid")
        why = (
            "no kernel slice covers that time"
            if pid in ix.device_pids
            else f"pid {pid!r} carries no kernel/copy events"
        )
        sink.add(
            "flow-end-not-on-device-slice",
            f"ac2g flow id {fid!r} finishes at ts {fmt_ts(f['ts'])} "
            f"on {lane_name(pid, f.get('tid'), pid in ix.device_pids)}, but {why}",
            fi,
        )
    return bound


def _check_link(ev: list, sink: Sink, fid: Any, si: int, ki: int, fi: int) -> None:
    sa, ka = _args(ev[si]), _args(ev[ki])
    for key in ("correlation", "External id"):
        if key in sa and key in ka and sa[key] != ka[key]:
            sink.add(
                "flow-link-mismatch",
                f"ac2g flow id {fid!r} joins {ev[si].get('name')!r} ({key} "
                f"{sa[key]!r}) to {ev[ki].get('name')!r} ({key} {ka[key]!r})",
                fi,
            )


def check_stream_overlap(ix: Index, sink: Sink, tol: float) -> None:
    ev = ix.events
    for (pid, tid), items in ix.device_slices.items():
        items.sort()
        last_end, last_i = -math.inf, -1
        for ts, end, i in items:
            if ts < last_end - tol:
                sink.add(
                    "kernel-overlap-in-stream",
                    f"on {lane_name(pid, tid, True)}, {ev[i].get('name')!r} starts at {fmt_ts(ts)} before "
                    f"{ev[last_i].get('name')!r} (from {fmt_ts(ev[last_i]['ts'])}) ends at {fmt_ts(last_end)}",
                    i,
                )
            if end > last_end:
                last_end, last_i = end, i


def ns_tolerance(max_abs_ts: float) -> int:
    """Whole ns by which a time read back from a µs float may differ from the ns kineto wrote: 0 while
    the float's spacing at the trace's largest time is below 1/4 ns (then rounding ts * 1000 gives
    the written ns back), else that spacing rounded up (1 ns at the ~5e12 µs of a monotonic clock)."""
    spacing_ns = math.ulp(max_abs_ts) * 1000
    return 0 if spacing_ns < 0.25 else math.ceil(spacing_ns)


def check_lane_nesting(ix: Index, sink: Sink) -> None:
    """Partial overlaps per lane: a slice B that starts inside an open slice A (A started first,
    or at the same ns and is longer) and ends after A ends. Viewers nest the slices of a lane by
    time, so such a pair is dropped or drawn mis-nested (Perfetto). Slices that touch (A's end is
    B's start) or share an end nest. Times are compared in whole ns (ts and dur rounded
    separately, as kineto writes them), within ``ns_tolerance``. One problem per lane: how many
    slices cross the end of an enclosing one, and the first of them.

    Two device rows (kernels, copies, memsets) that overlap are left to kernel-overlap-in-stream;
    a device row against a range on its stream (an mstx range, kineto's projected annotation) is
    checked here. torch's slices that never nest (Python frames, c10d Work ranges; see
    ``C10D_WORK_PREFIXES``) are left out. Sorted by start, then swept with a min-heap of the open slices' ends per kind
    (device row or not): O(n log n)."""
    ev = ix.events
    tol = ns_tolerance(ix.max_abs_ts)
    for (pid, tid), items in ix.slices.items():
        lane = []
        for ts, _end, i in items:
            e = ev[i]
            cat = e.get("cat")
            if cat == PYTHON_FRAME_CAT or (cat == USER_RANGE_CAT and str(e.get("name")).startswith(C10D_WORK_PREFIXES)):
                continue
            start = round(ts * 1000)
            lane.append((start, start + round(e["dur"] * 1000), cat in DEVICE_CATS, i))
        if len(lane) < 2:
            continue
        lane.sort(key=lambda t: (t[0], -t[1]))
        open_ends: tuple[list, list] = ([], [])  # (end, start, index) of open slices: others, device rows
        crossings, first = 0, None
        for start, end, device, i in lane:
            crossed = None
            for kind, heap in enumerate(open_ends):
                while heap and heap[0][0] <= start + tol:
                    heapq.heappop(heap)  # ended by this start (or touching it)
                if heap and (kind == 0 or not device):
                    a_end, a_start, a = heap[0]  # the open slice that ends first
                    if end > a_end + tol and start > a_start + tol and (crossed is None or a_end < crossed[0]):
                        crossed = (a_end, a_start, a)
            if crossed is not None:
                crossings += 1
                if first is None:
                    first = (crossed[2], i, crossed[0], end)
            heapq.heappush(open_ends[device], (end, start, i))
        if first is not None:
            a, b, a_end, b_end = first
            ea, eb = ev[a], ev[b]
            sink.add(
                "lane-not-nested",
                f"on {lane_name(pid, tid, pid in ix.device_pids)}, {crossings} slice(s) start inside another slice and "
                f"end after it, so viewers such as Perfetto drop them or nest them wrongly; the first: "
                f"{eb.get('name')!r} ({eb.get('cat')}, {fmt_ts(eb['ts'])} to {b_end / 1000:.3f}) starts inside "
                f"{ea.get('name')!r} ({ea.get('cat')}, {fmt_ts(ea['ts'])} to {a_end / 1000:.3f}) and ends "
                f"{(b_end - a_end) / 1000:.3f} µs after it. The slices of a lane must nest or be disjoint: a "
                "torch-mspti row or mstx range that crosses another slice is a torch-mspti bug (report it with the "
                "trace); an edited trace must keep each lane nested",
                b,
            )


def check_zero_length_rows(ix: Index, sink: Sink, health: dict | None) -> None:
    """Device rows of dur 0 are MSPTI records with start = end != 0 (a task shorter than its 1 ns
    resolution), which the plugin keeps and counts in ``repaired.zero_duration``, or rows its lane
    repair moved to the end of the row they lay inside (``repaired.overlaps``): accepted up to
    those counts, reported beyond them."""
    repaired = health.get("repaired") if isinstance(health, dict) else None
    counts = [repaired.get(k) for k in ("zero_duration", "overlaps")] if isinstance(repaired, dict) else []
    allowed = sum(int(c) for c in counts if is_number(c) and c > 0)
    if len(ix.zero_length_rows) <= allowed:
        return
    for i in ix.zero_length_rows:
        e = ix.events[i]
        sink.add(
            "duration-not-positive",
            f"{e.get('cat')} {e.get('name')!r} on pid {e.get('pid')} tid {e.get('tid')} has dur {e.get('dur')!r} "
            f"({len(ix.zero_length_rows)} zero-length device rows; the health report accounts for {allowed})",
            i,
        )


def check_launch_nesting(ix: Index, sink: Sink, tol: float) -> None:
    ops = {lane: Lane(items) for lane, items in ix.op_slices.items()}
    for i in ix.launches:
        e = ix.events[i]
        lane = (e.get("pid"), e.get("tid"))
        if e["dur"] < 0 or not _args(e).get("External id"):
            continue  # a launch no op owns (task queue, housekeeping thread) sits on its thread's lane
        if lane not in ops or not ops[lane].covers(e["ts"], e["ts"] + e["dur"], tol):
            sink.add(
                "launch-not-nested-in-op",
                f"launch {e.get('name')!r} at ts {fmt_ts(e['ts'])} on "
                f"{lane_name(*lane, False)} lies inside no cpu_op or user_annotation slice",
                i,
            )


def check_lanes(ix: Index, sink: Sink) -> None:
    host_sorts = [ix.process_sort.get(p, p) for p in ix.host_pids]
    host_max = max((s for s in host_sorts if is_number(s)), default=None)
    for pid in sorted(ix.device_pids, key=repr):
        missing = [
            k for k, d in (("process_name", ix.process_names), ("process_labels", ix.process_labels)) if not d.get(pid)
        ]
        if missing:
            sink.add("npu-lane-unnamed", f"device process {pid!r} has no {' or '.join(missing)} metadata")
        sort = ix.process_sort.get(pid, pid)
        if host_max is not None and (not is_number(sort) or sort <= host_max):
            has = f"sort index {sort!r}" if pid in ix.process_sort else f"no process_sort_index (so pid {pid!r})"
            sink.add(
                "npu-lane-sorted-above-cpu",
                f"device process {pid!r} has {has}, not above the CPU "
                f"lanes' {host_max!r}; use device + {EXCEED_MAX_PID}",
            )
    for pid, tid in sorted(ix.device_slices, key=repr):
        if not ix.thread_names.get((pid, tid)):
            sink.add("npu-lane-unnamed", f"{lane_name(pid, tid, True)} has no thread_name metadata")


# ------------------------------------------------------------------------ collectives (HCCL rows)
# A collective row is a kernel row with a "Collective name". torch-mspti joins it with the process
# group of its communicator: a joined row carries "Process Group Description" and c10d's names
# (pg_name, ranks, this process's Rank, Seq) under kineto's NCCL keys, checked here against the
# trace's distributedInfo (torch's pg_config). A row not joined keeps only what MSPTI gave; a row of
# a torch-mspti from before the join lacks "comm name" and "type" as well, and is only counted.

COLLECTIVE_KEY = "Collective name"
JOIN_KEY = "Process Group Description"
COLLECTIVE_FIX = (
    "the trace was edited, or written by a torch-mspti whose communicator map disagrees with torch.distributed; "
    "re-profile"
)
# MSPTI's fields, on every row of a torch-mspti that joins (with "type": "COMMUNICATION").
_MSPTI_FIELDS = (
    ("Collective name", str),
    ("algorithm", str),
    ("In msg nelems", int),
    ("dtype", str),
    ("bytes", int),
    ("comm name", str),
)
_JOINED_FIELDS = (
    ("Process Group Name", str),
    ("Process Group Description", str),
    ("Process Group Ranks", str),
    ("Group size", int),
    ("Rank", int),
)
# Keys only the join writes (a row not joined has none of them).
_JOIN_ONLY = ("Process Group Ranks", "Group size", "Rank", "Out msg nelems", "Seq", "Src Rank", "Dst Rank")
_P2P = frozenset({"send", "recv"})
_NO_OUT = frozenset({"all_to_allv"})  # its per-peer counts differ: no single Out msg nelems
_OUT_IS_IN = frozenset({"allreduce", "broadcast", "reduce", "send", "recv", "barrier", "all_to_all"})
# Every Collective name torch-mspti writes (KindHandlers.cpp, collectiveName).
_COLLECTIVES = _OUT_IS_IN | _NO_OUT | frozenset({"allgather", "reduce_scatter", "scatter", "gather"})
_JSON_TYPES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
}


def _is_int(v: Any) -> bool:
    return type(v) is int  # JSON integers; not bool


def _has_type(v: Any, typ: type) -> bool:
    return _is_int(v) if typ is int else isinstance(v, typ)


def _json_type(v: Any) -> str:
    return "null" if v is None else _JSON_TYPES.get(type(v), type(v).__name__)


def _row(e: dict) -> str:
    return f"collective {e.get('name')!r} at ts {fmt_ts(e.get('ts'))}"


def distributed_info(trace: Any) -> Any:
    """The trace's top-level ``distributedInfo`` (torch writes it as JSON; a JSON string is parsed)."""
    value = trace.get("distributedInfo") if isinstance(trace, dict) else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return value


def _groups_of(dist: Any) -> tuple[dict[str, dict] | None, int | None, str]:
    """(pg_config entries by pg_name, distributedInfo.rank, "") or (None, None, what is missing)."""
    if dist is None:
        return None, None, "no distributedInfo"
    if not isinstance(dist, dict):
        return None, None, f"a distributedInfo that is {_json_type(dist)}, not an object"
    config = dist.get("pg_config")
    if not isinstance(config, list):
        return None, None, "a distributedInfo without a pg_config list"
    if not _is_int(dist.get("rank")):
        return None, None, f"a distributedInfo whose rank is {dist.get('rank')!r}, not an integer"
    groups = {c["pg_name"]: c for c in config if isinstance(c, dict) and isinstance(c.get("pg_name"), str)}
    return groups, dist["rank"], ""


def check_collectives(ix: Index, sink: Sink, warning, dist: Any, health: dict | None) -> dict[str, int]:
    """The collective rules over the rows, against ``dist`` (the trace's distributedInfo) and the
    health report's ``collectives`` block. Returns the counts for the check's stats (rows, joined,
    with_seq), {} for a trace without collective rows."""
    ev = ix.events
    joined = [i for i in ix.collectives if JOIN_KEY in _args(ev[i])]
    groups, rank, lacking = _groups_of(dist)
    if joined and groups is None:
        sink.add(
            "collective-no-distributed-info",
            f"{len(joined)} collective row(s) are joined with their process group (they carry {JOIN_KEY}), but the "
            f"trace has {lacking}, so their group, ranks and Rank cannot be checked: torch's profiler writes "
            "distributedInfo (rank, pg_config) when torch.distributed is initialised; keep it when editing a "
            "trace, or re-profile",
        )
    unknown_groups: dict[str, int] = {}
    for i in ix.collectives:
        a = _args(ev[i])
        if JOIN_KEY in a:
            _check_joined(sink, i, ev[i], a, groups, rank, unknown_groups)
        elif "comm name" in a:  # a torch-mspti that joins left this row as MSPTI gave it
            _check_not_joined(sink, i, ev[i], a)
    if unknown_groups:
        named = ", ".join(f"{name!r} ({n} rows)" for name, n in sorted(unknown_groups.items()))
        known = ", ".join(repr(n) for n in (groups or {})) or "none"
        warning(
            "collective-group-not-in-pg-config",
            f"joined collective rows name process groups that distributedInfo.pg_config lacks: {named} (pg_config "
            f"has {known}). torch writes pg_config when the profiler starts, so a group made after that (a "
            "DeviceMesh, FSDP or new_group inside the profiled window) is not in it: those rows' group, ranks and "
            "Rank are not checked against it; create the groups before profiling to have them checked",
        )
    with_seq = _check_seq(ev, sink, joined)
    carrying_seq = sum(1 for i in joined if "Seq" in _args(ev[i]))  # a bad Seq is reported on its own
    _check_collective_counts(sink, health, len(ix.collectives), len(joined), carrying_seq)
    unjoined = len(ix.collectives) - len(joined)
    if unjoined:
        warning("collectives-not-joined", _not_joined_message(unjoined, len(ix.collectives), health))
    if not ix.collectives:
        return {}
    return {"rows": len(ix.collectives), "joined": len(joined), "with_seq": with_seq}


def _check_joined(
    sink: Sink, i: int, e: dict, a: dict, groups: dict | None, rank: int | None, unknown_groups: dict[str, int]
) -> None:
    coll = a.get(COLLECTIVE_KEY) if isinstance(a.get(COLLECTIVE_KEY), str) else None  # else reported below
    fields = [*_MSPTI_FIELDS, *_JOINED_FIELDS]
    if coll not in _NO_OUT:
        fields.append(("Out msg nelems", int))
    if coll in _P2P:
        fields += [("Src Rank", int), ("Dst Rank", int)]
    missing = [k for k, _ in fields if k not in a]
    wrong = [
        f"{k} {a[k]!r} is {_json_type(a[k])}, not {_JSON_TYPES[typ]}"
        for k, typ in fields
        if k in a and not _has_type(a[k], typ)
    ]
    wrong += [f"{k} {a[k]} is negative" for k in ("In msg nelems", "Out msg nelems") if _is_int(a.get(k)) and a[k] < 0]
    if "Seq" in a and not (_is_int(a["Seq"]) and a["Seq"] >= 1):
        wrong.append(f"Seq {a['Seq']!r} is not an integer >= 1 (a group's calls are numbered from 1)")
    if coll is not None and coll not in _COLLECTIVES:
        wrong.append(f"Collective name {coll!r} is none that torch-mspti writes ({', '.join(sorted(_COLLECTIVES))})")
    if coll not in _P2P:
        wrong += [f"it carries {k}, which only send and recv rows carry" for k in ("Src Rank", "Dst Rank") if k in a]
    if a.get("type") != "COMMUNICATION":
        wrong.append(f'type {a.get("type")!r} is not "COMMUNICATION"')
    if missing or wrong:
        parts = ([f"lacks {', '.join(missing)}"] if missing else []) + wrong
        sink.add(
            "collective-args",
            f"{_row(e)} is joined with its process group ({JOIN_KEY} {a.get(JOIN_KEY)!r}) but {'; '.join(parts)} "
            f"({COLLECTIVE_FIX})",
            i,
        )
        return
    _check_group(sink, i, e, a, groups, rank, unknown_groups)
    _check_nelems(sink, i, e, a)


def _check_group(
    sink: Sink, i: int, e: dict, a: dict, groups: dict | None, rank: int | None, unknown_groups: dict[str, int]
) -> None:
    bad: list[str] = []
    size, own = a["Group size"], a["Rank"]
    if groups is not None:
        name = a["Process Group Name"]
        cfg = groups.get(name)
        if cfg is None:  # made after the profiler started: warned once (check_collectives)
            unknown_groups[name] = unknown_groups.get(name, 0) + 1
            # its own Process Group Ranks must still hold this rank at its Rank, Group size of them
            text = a["Process Group Ranks"]
            try:
                own_ranks = [int(x) for x in text.strip("[]").split(",") if x.strip()]
            except ValueError:
                own_ranks = None
            if own_ranks is None or not text.startswith("["):
                bad.append(f"Process Group Ranks {text!r} is not a list of ranks")
            else:
                if len(own_ranks) != size:
                    bad.append(f"Group size {size} is not the {len(own_ranks)} ranks of Process Group Ranks {text!r}")
                if rank is not None and rank not in own_ranks:
                    bad.append(f"distributedInfo.rank {rank} is not among Process Group Ranks {text!r}")
                elif rank is not None and own != own_ranks.index(rank):
                    bad.append(f"Rank {own} is not this process's rank in Process Group Ranks {text!r}")
        else:
            ranks = cfg.get("ranks")
            if a[JOIN_KEY] != cfg.get("pg_desc"):
                bad.append(f"{JOIN_KEY} {a[JOIN_KEY]!r} is not pg_config's pg_desc {cfg.get('pg_desc')!r}")
            if isinstance(ranks, list) and a["Process Group Ranks"] != str(ranks):
                bad.append(f"Process Group Ranks {a['Process Group Ranks']!r} is not pg_config's ranks {str(ranks)!r}")
            sizes = {cfg["pg_size"]} if _is_int(cfg.get("pg_size")) else set()
            sizes |= {len(ranks)} if isinstance(ranks, list) else set()
            if sizes and sizes != {size}:
                bad.append(
                    f"Group size {size} is not pg_config's pg_size {cfg.get('pg_size')!r} "
                    f"({len(ranks) if isinstance(ranks, list) else '?'} ranks)"
                )
            if isinstance(ranks, list) and rank not in ranks:
                bad.append(f"distributedInfo.rank {rank} is not among the group's ranks {ranks}, yet the row has Rank")
            elif isinstance(ranks, list) and own != ranks.index(rank):
                bad.append(
                    f"Rank {own} is not this process's rank in the group ({ranks.index(rank)}: distributedInfo.rank "
                    f"{rank} in ranks {ranks})"
                )
    if not 0 <= own < size:
        bad.append(f"Rank {own} is outside [0, Group size {size})")
    coll = a[COLLECTIVE_KEY]
    if coll in _P2P:
        for key in ("Src Rank", "Dst Rank"):
            if not 0 <= a[key] < size:
                bad.append(f"{key} {a[key]} is outside [0, Group size {size})")
        key = "Src Rank" if coll == "send" else "Dst Rank"
        if a[key] != own:
            bad.append(f"{key} {a[key]} of a {coll} is not its Rank {own}")
        if a["Src Rank"] == a["Dst Rank"]:
            bad.append(f"its Src Rank and Dst Rank are both {a['Src Rank']}: a {coll} goes to another rank")
    if bad:
        sink.add("collective-group-mismatch", f"{_row(e)}: {'; '.join(bad)} ({COLLECTIVE_FIX})", i)


def _check_nelems(sink: Sink, i: int, e: dict, a: dict) -> None:
    coll, n = a[COLLECTIVE_KEY], a["Group size"]
    if coll in _NO_OUT:
        return
    n_in, n_out = a["In msg nelems"], a["Out msg nelems"]
    if coll in _OUT_IS_IN and n_out != n_in:
        what = f"Out msg nelems {n_out} is not In msg nelems {n_in}"
    elif coll == "allgather" and n_out != n_in * n:
        what = f"Out msg nelems {n_out} is not In msg nelems {n_in} x Group size {n} = {n_in * n}"
    elif coll == "reduce_scatter" and n_in != n_out * n:
        what = f"In msg nelems {n_in} is not Out msg nelems {n_out} x Group size {n} = {n_out * n}"
    else:
        return
    sink.add(
        "collective-nelems-mismatch",
        f"{_row(e)}: {what}, which Collective name {coll!r} requires (the trace was edited, or written by a "
        "torch-mspti that took the counts from another call; re-profile)",
        i,
    )


def _check_not_joined(sink: Sink, i: int, e: dict, a: dict) -> None:
    bad = []
    extra = [k for k in _JOIN_ONLY if k in a]
    if extra:
        bad.append(f"carries {', '.join(extra)} of the join but no {JOIN_KEY}, so it is joined only in part")
    name = a.get("Process Group Name", a["comm name"])
    if name != a["comm name"]:
        bad.append(
            f"its Process Group Name {name!r} is not its comm name {a['comm name']!r}, which a row not joined "
            "keeps as MSPTI gave it"
        )
    if bad:
        sink.add("collective-args", f"{_row(e)} {'; '.join(bad)} ({COLLECTIVE_FIX})", i)


def _check_seq(ev: list, sink: Sink, joined: list[int]) -> int:
    """Seq once per group, increasing with start time on each stream; a group's rows all have one or
    none does (the session numbers a group's rows only when it can number all of them). Returns the
    rows with a Seq."""
    # By group, and within it by HCCL communicator: a group made again under the same pg_name is another
    # communicator, numbered from 1 again.
    comms: dict[str, set] = defaultdict(set)
    for i in joined:
        a = _args(ev[i])
        if isinstance(a.get("comm name"), str) and a["comm name"]:
            comms[str(a.get("Process Group Name"))].add(a["comm name"])
    by_group: dict[tuple[str, str], list[int]] = defaultdict(list)
    without: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in joined:
        a = _args(ev[i])
        seq = a.get("Seq")
        name = str(a.get("Process Group Name"))
        key = (name, str(a.get("comm name", "")) if len(comms[name]) > 1 else "")
        if _is_int(seq) and seq >= 1:
            by_group[key].append(i)
        elif "Seq" not in a:
            without[key].append(i)
    for key, rows in without.items():
        if key in by_group:
            group = key[0]
            sink.add(
                "collective-seq-order",
                f"group {group!r} has {len(by_group[key])} row(s) with Seq and {len(rows)} without, e.g. "
                f"{_row(ev[rows[0]])}: torch-mspti numbers all of a group's rows in a window or none (the trace "
                "was edited; re-profile)",
                rows[0],
            )
    fix = (
        "Seq numbers a group's collectives in launch order, and one stream runs them in that order; the trace "
        "was edited or merged from several sessions, or torch-mspti numbered the group's collectives wrongly; "
        "re-profile"
    )
    for (group, _), rows in by_group.items():
        numbers = sorted(_args(ev[i])["Seq"] for i in rows)
        gaps = [(a, b) for a, b in pairwise(numbers) if b > a + 1]
        if gaps:
            a, b = gaps[0]
            sink.add(
                "collective-seq-order",
                f"group {group!r} has Seq {a} and then {b}: torch-mspti numbers a group's calls in the window one "
                f"after another, so the rows between them are missing ({len(gaps)} gap(s); {fix})",
            )
        first: dict[int, int] = {}
        lanes: dict[tuple, list] = defaultdict(list)
        for i in rows:
            e = ev[i]
            seq = e["args"]["Seq"]
            if seq in first:
                sink.add(
                    "collective-seq-order",
                    f"{_row(e)} in group {group!r} has Seq {seq}, as has {_row(ev[first[seq]])} ({fix})",
                    i,
                )
            else:
                first[seq] = i
            if is_number(e.get("ts")):
                lanes[(e.get("pid"), e.get("tid"))].append((e["ts"], seq, i))
        for items in lanes.values():
            items.sort()
            for (_, s0, i0), (_, s1, i1) in pairwise(items):
                if s1 < s0:
                    sink.add(
                        "collective-seq-order",
                        f"{_row(ev[i1])} in group {group!r} has Seq {s1}, below Seq {s0} of {_row(ev[i0])}, which "
                        f"started before it on the same stream ({fix})",
                        i1,
                    )
    return sum(len(rows) for rows in by_group.values())


def _check_collective_counts(sink: Sink, health: dict | None, rows: int, joined: int, with_seq: int) -> None:
    if not isinstance(health, dict) or "collectives" not in health:
        return  # a health report from before the join counts no collectives
    block = health["collectives"]
    if not isinstance(block, dict):
        sink.add(
            "collective-count-mismatch",
            f'the health report\'s "collectives" is {_json_type(block)}, not an object of counts (the trace was '
            "edited; re-profile)",
        )
        return
    counts = {k: block.get(k) for k in ("rows", "joined", "unjoined", "no_marker", "bad_message", "no_group", "no_seq")}
    odd = [  # rows and joined are checked below
        f"{k} {v!r}"
        for k, v in counts.items()
        if k not in ("rows", "joined") and v is not None and not (_is_int(v) and v >= 0)
    ]
    if odd:
        sink.add(
            "collective-count-mismatch",
            f"the health report's collectives block has counts that are no integers >= 0: {', '.join(odd)} (the "
            "trace was edited; re-profile)",
        )
    elif all(_is_int(v) for v in counts.values()):
        c = counts
        broken = []
        if c["unjoined"] != c["rows"] - c["joined"]:
            broken.append(f"unjoined {c['unjoined']} is not rows {c['rows']} - joined {c['joined']}")
        if c["no_marker"] + c["bad_message"] + c["no_group"] != c["unjoined"]:
            broken.append(
                f"no_marker {c['no_marker']} + bad_message {c['bad_message']} + no_group {c['no_group']} is not "
                f"unjoined {c['unjoined']}"
            )
        if c["joined"] == joined and c["joined"] - c["no_seq"] != with_seq:
            broken.append(
                f"joined {c['joined']} - no_seq {c['no_seq']} = {c['joined'] - c['no_seq']} rows should carry Seq, "
                f"but {with_seq} do"
            )
        if broken:
            sink.add(
                "collective-count-mismatch",
                f"the health report's collectives block disagrees with itself or with the rows: {'; '.join(broken)} "
                "(the trace was edited; re-profile)",
            )
    for key, n, what in (("rows", rows, "collective rows"), ("joined", joined, "joined collective rows")):
        v = block.get(key)
        if not _is_int(v):
            sink.add(
                "collective-count-mismatch",
                f"the health report's collectives.{key} is {v!r}, not an integer (the trace was edited; re-profile)",
            )
        elif v != n:
            sink.add(
                "collective-count-mismatch",
                f"the health report counts {v} {what} (collectives.{key}) but the trace holds {n}: rows were lost "
                "or added after the session wrote them (a truncated, filtered or edited trace); export the trace "
                "again from the profiler, or re-profile",
            )


# Why a row is not joined: the health report's "collectives" counters (SessionCounters.h).
NOT_JOINED_MEANING: dict[str, str] = {
    "no_marker": 'inside no "communication" mstx range: markers off, or a backend that writes none',
    "bad_message": "the range's message is not torch_npu's JSON, names another communicator or lacks the peer",
    "no_group": "a communicator of no torch.distributed process group of this process",
}


def _not_joined_message(unjoined: int, rows: int, health: dict | None) -> str:
    head = (
        f"{unjoined} of {rows} collective rows are not joined with their process group: they carry only MSPTI's "
        "fields (Collective name, algorithm, In msg nelems, dtype, bytes, and HCCL's communicator name as "
        "Process Group Name), no pg_config pg_name, Rank or Seq, so cluster tools cannot match them across ranks"
    )
    block = health.get("collectives") if isinstance(health, dict) else None
    if isinstance(block, dict):
        why = [
            f"{k} {block[k]}" + (f" ({NOT_JOINED_MEANING[k]})" if k in NOT_JOINED_MEANING else "")
            for k in ("unjoined", *NOT_JOINED_MEANING)
            if _is_int(block.get(k)) and block[k] > 0
        ]
        return head + ("; the health report's collectives block counts why: " + ", ".join(why) if why else "")
    if not isinstance(health, dict):
        return head + "; the trace has no health report to say why"
    return (
        head + "; the health report counts no collectives, so the torch-mspti that wrote the trace predates the "
        "join: profile with a current one to join them"
    )
