"""Reading a large exported Chrome trace without loading it whole, and the B5 completeness rule on it.

A 1M-kernel trace is ~1 GB of JSON; ``json.load`` of it would build ~5M dicts (many GB). Here the
top-level object is decoded key by key and its ``traceEvents`` array one event at a time
(``json.JSONDecoder.raw_decode`` over a sliding buffer), plain or gzip, and each event is reduced
at once to the few fields the rule needs (a tuple per kernel, launch, op and arrow end).

The rule (``kernel_links``), per kernel event (``"ph": "X", "cat": "kernel"``):

* ``args.link == "verified"`` (torch-mspti's link state for the row);
* it is the end of an ac2g arrow: an ``"f"`` event (``"cat": "ac2g"``, ``"bp": "e"``) whose id is
  the kernel's ``args.correlation``, on the kernel's lane (pid, tid), inside the kernel's slice;
* that arrow starts (``"s"``, same id) on its launch: the ``privateuse1_runtime`` slice with the same
  ``args.correlation``, on the launch's lane, inside the launch slice;
* the launch carries the kernel's ``External id`` and lies inside the op (``cpu_op``) with that
  ``External id``, on the op's thread.

``complete(summary, n)`` is True when the trace holds exactly N kernel events and every one passes.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 20  # characters read at a time
LOOKAHEAD = 1 << 16  # characters kept ahead of a decode (an event is a few hundred)
_WS = re.compile(r"\s*")
TOL_US = 0.01  # ts/dur are microseconds with 3 decimals; float rounding of ~5e12 us values


class TraceStreamError(ValueError):
    """The file is not a Chrome trace this reader understands (not JSON, truncated, wrong shape)."""


class _Stream:
    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dec = json.JSONDecoder()

    def fill(self, need: int) -> None:
        if len(self.buf) - self.pos >= need or self.eof:
            return
        parts = [self.buf[self.pos :]]
        have = len(parts[0])
        while have < need and not self.eof:
            more = self.fh.read(max(CHUNK, need - have))
            if not more:
                self.eof = True
            parts.append(more)
            have += len(more)
        self.buf = "".join(parts)
        self.pos = 0

    def skip_ws(self) -> str:
        """Skips whitespace; returns the next character ('' at the end of the file)."""
        while True:
            self.fill(1)
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def expect(self, chars: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            raise TraceStreamError(f"expected one of {chars!r}, found {c!r}")
        self.pos += 1
        return c

    def value(self) -> Any:
        self.skip_ws()  # raw_decode does not skip leading whitespace
        need = LOOKAHEAD
        while True:
            self.fill(need)
            try:
                obj, end = self.dec.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise TraceStreamError(f"not JSON: {exc}") from None
                need *= 2  # a value longer than the lookahead: read more and decode again
                continue
            if end >= len(self.buf) and not self.eof:  # a number may go on past the buffer
                need *= 2
                continue
            self.pos = end
            return obj

    def array(self) -> Iterator[Any]:
        self.expect("[")
        if self.skip_ws() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            if self.expect(",]") == "]":
                return


def _open(path: str | Path) -> IO[str]:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_events(path: str | Path, meta: dict[str, Any] | None = None) -> Iterator[dict]:
    """The events of a Chrome trace file (plain or gzip; an object with ``traceEvents`` or a bare
    list), one at a time. The object's other keys go into ``meta`` when given."""
    with _open(path) as fh:
        s = _Stream(fh)
        c = s.skip_ws()
        if c == "[":
            yield from s.array()
            return
        s.expect("{")
        if s.skip_ws() == "}":
            return
        while True:
            key = s.value()
            s.expect(":")
            if key == "traceEvents":
                yield from s.array()
            else:
                v = s.value()
                if meta is not None:
                    meta[key] = v
            if s.expect(",}") == "}":
                break
        if s.skip_ws():
            raise TraceStreamError("data after the trace object")


def _inside(ts: float, start: float, dur: float) -> bool:
    return start - TOL_US <= ts <= start + dur + TOL_US


# Older kineto (torch 2.7's) keeps 27 bits of a flow id: torch-mspti then gives a launch the arrow id
# 1 + correlation mod (2^27 - 1) (README, notes per torch minor); newer kineto, the correlation.
_FOLD = (1 << 27) - 1


def _flow_id(corr: Any, finishes: dict[Any, tuple]) -> Any:
    """The arrow id of the launch with ``corr``: the correlation itself, or its 27-bit fold when
    only that ends on a row (plugin correlations are >= 2^30, folds < 2^27: they never collide)."""
    if corr in finishes or not isinstance(corr, int):
        return corr
    folded = 1 + corr % _FOLD
    return folded if folded in finishes else corr


def kernel_links(events: Any) -> dict[str, Any]:
    """Applies the rule (module docstring) to an iterable of events; returns the counts:
    ``events``, ``kernels``, ``cpu_ops`` (by name), ``link_states`` (kernels by ``args.link``),
    ``linked_to_op`` (kernels passing every step), ``problems`` (failures by step) and up to 5
    ``examples`` of failing kernels."""
    kernels: dict[Any, tuple] = {}  # correlation -> (External id, pid, tid, ts, dur, link)
    launches: dict[Any, tuple] = {}  # correlation -> (External id, pid, tid, ts, dur)
    ops: dict[Any, tuple] = {}  # External id -> (pid, tid, ts, dur)
    starts: dict[Any, tuple] = {}  # flow id -> (pid, tid, ts)
    finishes: dict[Any, tuple] = {}  # flow id -> (pid, tid, ts, bp)
    problems: Counter[str] = Counter()
    op_names: Counter[str] = Counter()
    n_events = n_kernels = 0
    for e in events:
        n_events += 1
        if not isinstance(e, dict):
            problems["event_not_an_object"] += 1
            continue
        ph, cat = e.get("ph"), e.get("cat")
        if ph == "X":
            args = e.get("args") or {}
            if cat == "kernel":
                n_kernels += 1
                corr = args.get("correlation")
                if corr in kernels:
                    problems["kernel_duplicate_correlation"] += 1
                kernels[corr] = (
                    args.get("External id"),
                    e.get("pid"),
                    e.get("tid"),
                    e.get("ts"),
                    e.get("dur"),
                    args.get("link"),
                )
            elif cat == "privateuse1_runtime" and "correlation" in args:
                corr = args["correlation"]
                if corr in launches:
                    problems["launch_duplicate_correlation"] += 1
                launches[corr] = (args.get("External id"), e.get("pid"), e.get("tid"), e.get("ts"), e.get("dur"))
            elif cat == "cpu_op":
                op_names[e.get("name")] += 1
                ext = args.get("External id")
                if ext is not None:
                    if ext in ops:
                        problems["op_duplicate_external_id"] += 1
                    ops[ext] = (e.get("pid"), e.get("tid"), e.get("ts"), e.get("dur"))
        elif cat == "ac2g" and ph in ("s", "f"):
            fid = e.get("id")
            table = starts if ph == "s" else finishes
            if fid in table:
                problems[f"flow_duplicate_{ph}"] += 1
            table[fid] = (e.get("pid"), e.get("tid"), e.get("ts"), e.get("bp"))

    link_states: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    linked = 0
    for corr, (ext, pid, tid, ts, dur, link) in kernels.items():
        link_states[str(link)] += 1
        why = None
        fid = _flow_id(corr, finishes)
        f = finishes.get(fid)
        s = starts.get(fid)
        launch = launches.get(corr)
        if link != "verified":
            why = "kernel_link_not_verified"
        elif corr is None:
            why = "kernel_without_correlation"
        elif f is None:
            why = "kernel_not_the_end_of_a_flow"
        elif f[0] != pid or f[1] != tid or not _inside(f[2], ts, dur or 0.0) or f[3] != "e":
            why = "flow_end_not_on_the_kernel"
        elif s is None:
            why = "flow_without_start"
        elif launch is None:
            why = "flow_start_without_launch"
        elif s[0] != launch[1] or s[1] != launch[2] or not _inside(s[2], launch[3], launch[4] or 0.0):
            why = "flow_start_not_on_the_launch"
        elif ext is None or launch[0] != ext:
            why = "launch_and_kernel_external_ids_differ"
        else:
            op = ops.get(ext)
            if op is None:
                why = "launch_without_op"
            elif (
                op[0] != launch[1]
                or op[1] != launch[2]
                or not (
                    op[2] - TOL_US <= launch[3] and launch[3] + (launch[4] or 0.0) <= op[2] + (op[3] or 0.0) + TOL_US
                )
            ):
                why = "launch_not_inside_its_op"
        if why:
            problems[why] += 1
            if len(examples) < 5:
                examples.append({"correlation": corr, "External id": ext, "problem": why})
        else:
            linked += 1
    return {
        "events": n_events,
        "kernels": n_kernels,
        "distinct_kernel_correlations": len(kernels),
        "launches": len(launches),
        "flow_starts": len(starts),
        "flow_finishes": len(finishes),
        "cpu_ops": dict(op_names),
        "link_states": dict(link_states),
        "linked_to_op": linked,
        "problems": dict(problems),
        "examples": examples,
    }


def complete(summary: dict[str, Any], n: int) -> bool:
    """Exactly N kernel events, each verified and at the end of an arrow from a launch inside its op."""
    return (
        summary["kernels"] == n
        and summary["distinct_kernel_correlations"] == n
        and summary["linked_to_op"] == n
        and not summary["problems"]
    )


def summarize_file(path: str | Path) -> dict[str, Any]:
    """``kernel_links`` of a trace file, streamed."""
    return kernel_links(iter_events(path))
