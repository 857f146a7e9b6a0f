"""Op-instance correctness of the links in an exported trace (plain data; no torch).

A workload names every kernel after the call that launched it: ``K<n>`` (a ``_<suffix>`` may
follow) is launched by the one op instance whose last Concrete Input is ``n`` (a custom op called
with ``n``, visible with ``record_shapes=True``), or by the user range named ``R<n>``. The
:func:`audit` of a trace then checks, for every kernel row:

* linked (it has an External id): the External id is that of its owner instance, else the link is
  *wrong*; its launch event (the ``privateuse1_runtime`` slice with the row's ``correlation``)
  carries the same External id and lies on the owner's thread within the owner's slice; an ac2g
  arrow starts at the launch and ends at the row;
* unlinked: no launch event links it to any op;
* every row has a link state (``args.link``), and the states are counted as diagnostics count them.

Times are the trace's µs; ``TS_TOL_US`` absorbs kineto's 3-decimal rounding.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from simrun import TS_TOL_US, cpu_ops, end, events, flow_events, flow_id, launches

from torch_mspti_cli.check import check_trace

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATS = ("cpu_op", "user_annotation")
LINKED_STATES = ("verified", "recovered", "unverified")
UNLINKED_STATES = ("no_op_on_thread", "clock_untrusted", "ambiguous", "no_record")
_KERNEL = re.compile(r"K(\d+)(?:_\w+)?$")
_RANGE = re.compile(r"R(\d+)$")


@dataclass
class Audit:
    """What :func:`audit` found; ``problems`` lists every broken property, one line each."""

    kernels: int = 0  # rows named K<n>
    linked: int = 0
    wrong: list[str] = field(default_factory=list)  # linked to another op instance than the owner
    problems: list[str] = field(default_factory=list)
    states: Counter = field(default_factory=Counter)  # args.link of the K<n> rows

    @property
    def linked_ratio(self) -> float:
        return self.linked / self.kernels if self.kernels else 0.0

    def summary(self) -> str:
        return (
            f"{self.kernels} kernels, {self.linked} linked ({self.linked_ratio:.1%}), {len(self.wrong)} wrong, "
            f"states {dict(self.states)}"
        )


def owner_key(host_event: dict) -> int | None:
    """The call number ``n`` a host slice stands for: R<n> ranges, or ops whose last Concrete Input
    is an integer."""
    if host_event.get("cat") == "user_annotation":
        m = _RANGE.match(host_event.get("name", ""))
        return int(m.group(1)) if m else None
    inputs = (host_event.get("args") or {}).get("Concrete Inputs") or []
    return int(inputs[-1]) if inputs and str(inputs[-1]).isdigit() else None


def owners(trace, op_names: set[str] | None = None) -> dict[int, dict]:
    """n -> the host slice of call n (ops named in ``op_names``, or any op, and R<n> ranges);
    raises AssertionError when two slices claim one n."""
    out: dict[int, dict] = {}
    for e in events(trace):
        if e.get("ph") != "X" or e.get("cat") not in HOST_CATS:
            continue
        if e["cat"] == "cpu_op" and op_names is not None and e["name"] not in op_names:
            continue
        n = owner_key(e)
        if n is None:
            continue
        assert n not in out, f"two host slices for call {n}: {out[n]['name']} and {e['name']}"
        out[n] = e
    return out


def _inside(inner: dict, outer: dict) -> bool:
    return outer["ts"] - TS_TOL_US <= inner["ts"] and end(inner) <= end(outer) + TS_TOL_US


def audit(trace, op_names: set[str] | None = None) -> Audit:
    """Check every ``K<n>`` kernel row of ``trace`` against its owner (see the module docstring)."""
    result = Audit()
    host = {
        e["args"]["External id"]: e
        for e in events(trace)
        if e.get("ph") == "X" and e.get("cat") in HOST_CATS and "External id" in (e.get("args") or {})
    }
    by_n = owners(trace, op_names)
    launch_of = {ev["args"].get("correlation"): ev for ev in launches(trace)}
    flow_starts = {(f["id"], f["pid"], f["tid"], f["ts"]) for f in flow_events(trace, "s")}
    flow_ends = {(f["id"], f["pid"], f["tid"], f["ts"]) for f in flow_events(trace, "f")}
    for k in (e for e in events(trace) if e.get("ph") == "X" and e.get("cat") == "kernel"):
        m = _KERNEL.match(k["name"])
        if not m:
            continue
        n, args = int(m.group(1)), k.get("args") or {}
        result.kernels += 1
        result.states[args.get("link")] += 1
        owner = by_n.get(n)
        launch = launch_of.get(args.get("correlation"))
        ext = args.get("External id")
        if owner is None:
            result.problems.append(f"{k['name']}: no op instance or range for call {n} in the trace")
            continue
        if ext is None:
            if args.get("link") in LINKED_STATES:
                result.problems.append(f"{k['name']}: state {args.get('link')} but no External id")
            if launch is not None and "External id" in launch["args"]:
                result.problems.append(f"{k['name']}: unlinked row, but its launch is linked to {launch['args']}")
            continue
        result.linked += 1
        if ext != owner["args"]["External id"]:
            got = host.get(ext)
            result.wrong.append(f"{k['name']} linked to {got and (got['name'], owner_key(got))}, owner {owner['name']}")
            continue
        if args.get("link") not in LINKED_STATES:
            result.problems.append(f"{k['name']}: linked, but its state is {args.get('link')!r}")
        if launch is None:
            result.problems.append(
                f"{k['name']}: linked, but no launch event has correlation {args.get('correlation')}"
            )
            continue
        if launch["args"].get("External id") != ext:
            result.problems.append(f"{k['name']}: launch External id {launch['args'].get('External id')} != {ext}")
        if (launch["pid"], launch["tid"]) != (owner["pid"], owner["tid"]) or not _inside(launch, owner):
            result.problems.append(f"{k['name']}: launch {launch} not nested in its op {owner}")
        cid = flow_id(args.get("correlation"))  # the arrow's id: the correlation, folded on older kineto
        if (cid, launch["pid"], launch["tid"], launch["ts"]) not in flow_starts:
            result.problems.append(f"{k['name']}: no ac2g arrow starts at its launch")
        if (cid, k["pid"], k["tid"], k["ts"]) not in flow_ends:
            result.problems.append(f"{k['name']}: no ac2g arrow ends at the row")
    return result


def trace_link_states(trace) -> Counter:
    """args.link over every device row of the trace (kernels, copies, memsets)."""
    return Counter(
        (e.get("args") or {}).get("link") for e in events(trace) if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS
    )


def state_problems(trace, session: dict) -> list[str]:
    """Every device row has a state, and diagnostics count each state as the trace shows it:
    the states sum to the rows, the linked states to ``linked_rows``."""
    problems = []
    in_trace = trace_link_states(trace)
    links = {k: v for k, v in session["links"].items() if k != "target_missing"}
    rows = session["rows"]["device_rows"]
    if set(in_trace) - set(links):
        problems.append(f"rows without a known state: {in_trace}")
    if sum(links.values()) != rows:
        problems.append(f"states {links} sum to {sum(links.values())}, not to the {rows} device rows")
    if sum(in_trace.values()) != rows:
        problems.append(f"the trace has {sum(in_trace.values())} device rows, diagnostics {rows}")
    if any(in_trace.get(s, 0) != n for s, n in links.items()):
        problems.append(f"trace states {dict(in_trace)} != diagnostics {links}")
    if session["linked_rows"] != sum(links[s] for s in LINKED_STATES):
        problems.append(f"linked_rows {session['linked_rows']} != linked states of {links}")
    return problems


def plugin_warnings(run, needle: str) -> list[str]:
    """The plugin's warnings (stderr TORCH_WARN lines and Python warnings) that contain ``needle``."""
    lines = [ln for ln in run.stderr.splitlines() if "torch-mspti:" in ln and needle in ln]
    return lines + [w for w in run.warnings if "torch-mspti:" in w and needle in w]


def assert_links_right(run, op_names: set[str] | None, expected_kernels: int, valid_trace: bool = True):
    """What every link scenario asserts of a simrun result: a processed session, a trace that
    passes ``torch-mspti check`` (``valid_trace``), ``expected_kernels`` K<n> rows, no wrong link,
    no broken launch or arrow, and every state counted. Returns (:class:`Audit`, session)."""
    assert run.returncode == 0, run.stderr[-3000:]
    session = run.diagnostics["last_session"]
    assert session is not None and session["state"] == "processed", session
    if valid_trace:
        report = check_trace(run.trace)
        assert report.ok, report.to_dict()
    result = audit(run.trace, op_names)
    assert result.kernels == expected_kernels, result.summary()
    assert not result.wrong, (result.summary(), result.wrong)
    assert not result.problems, result.problems
    assert not state_problems(run.trace, session), state_problems(run.trace, session)
    return result, session


def threads_overlap(trace, op_names: set[str]) -> bool:
    """Some two op slices (named in ``op_names``) of different threads overlap in time."""
    ops = sorted((e for e in cpu_ops(trace) if e["name"] in op_names), key=lambda e: e["ts"])
    return any(b["tid"] != a["tid"] and b["ts"] < end(a) for i, a in enumerate(ops) for b in ops[i + 1 : i + 8])
