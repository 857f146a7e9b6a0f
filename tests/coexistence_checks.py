"""Checks shared by the coexistence tests (torch-mspti next to another MSPTI-collecting profiler):
one workload, how to run it next to a peer, and what "torch-mspti serves the NPU lane" means in the
exported trace and in diagnostics."""

from __future__ import annotations

import json
import re

import npu_peer
import simrun

OUR_SORT_BASE = 5_000_000  # kineto's kExceedMaxPid; our device n sorts at OUR_SORT_BASE + n
# Two ops, two streams, unique kernel names: kernel name -> index of the op instance that launched it.
WORKLOAD = """
launch("coexist_a0", {"name": "coexist_b0", "stream": 2})
launch("coexist_a1", {"name": "coexist_b1", "stream": 2})
sync()
"""
KERNEL_OP = {"coexist_a0": 0, "coexist_b0": 0, "coexist_a1": 1, "coexist_b1": 1}


def is_peer_kernel(k: dict) -> bool:
    """A kernel row in the shape torch_npu's backend writes: ``streamId`` and no ``stream`` (ours
    carry both, and ``link``)."""
    args = k.get("args", {})
    return "streamId" in args and "stream" not in args and "link" not in args


def run(peer, order, mode, tmp_path, profiles=1) -> simrun.SimResult:
    """WORKLOAD next to ``peer`` loaded in ``order`` (simrun.PEER_ORDERS), TORCH_MSPTI_PROFILER=``mode``.
    Fails if a RecordFunction callback threw: torch only warns, and a peer whose callback throws after
    its push (e.g. a CANN stub missing) leaves MSPTI's CUSTOM0 stack unbalanced and the run meaningless."""
    r = simrun.run(
        WORKLOAD, tmp_path, peer=(peer, order), env={"TORCH_MSPTI_PROFILER": mode}, profiles=profiles, timeout=300
    )
    thrown = [ln for ln in r.stderr.splitlines() if "Exception in RecordFunction callback" in ln]
    assert not thrown, f"a RecordFunction callback threw: {thrown[:3]}"
    return r


def explain(r: simrun.SimResult) -> str:
    """What a failure message needs: the MSPTI calls (caller first) and torch-mspti's view."""
    calls = "\n".join(r.mspti_calls[-60:])
    health = json.dumps(r.trace.get("torch_mspti") if r.traces else None)[:1500]
    return f"\nMSPTI calls (last 60):\n{calls}\ntorch_mspti health: {health}\nplugin: {json.dumps(r.diagnostics.get('plugin'))}"


def assert_ours_serves(r: simrun.SimResult, profile: int = 0) -> None:
    """Trace ``profile`` of ``r`` is torch-mspti's: its health report says it collected every kernel
    launched, each kernel is in the trace once, on our lanes, linked to the op that launched it, with
    one arrow from our launch event; no kernel, lane, thread name or flow of the peer's shape; and
    diagnostics say our session served the last trace."""
    trace = r.traces[profile]
    why = explain(r)
    health = trace.get("torch_mspti")
    assert health is not None, "no torch-mspti health report in the trace" + why
    assert health["state"] == "processed" and not health["errors"], (
        f"torch-mspti did not collect: state {health['state']!r}, errors {health['errors']}" + why
    )
    launched = [k for k in r.launched if k["profile_index"] == profile]
    assert health["records_by_kind"].get("KERNEL") == len(launched), why

    kernels = simrun.kernels(trace)
    names = sorted(k["name"] for k in kernels)
    assert names == sorted(k["name"] for k in launched), f"kernels in the trace {names}, launched {launched}" + why
    ops = sorted((e for e in simrun.cpu_ops(trace) if e["name"] == "simrun::launch"), key=lambda e: e["ts"])
    assert len(ops) == 2, ops
    for k in kernels:
        args = k.get("args", {})
        assert not is_peer_kernel(k), f"{k['name']} has the peer's shape (streamId, no stream or link): {k}" + why
        assert k["pid"] == 0 and k["tid"] == args.get("stream"), k
        assert args.get("External id") == ops[KERNEL_OP[k["name"]]]["args"]["External id"], (
            f"{k['name']} is linked to External id {args.get('External id')}, not to its op" + why
        )

    # Lanes: ours, and nobody else's thread names on our device process.
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in simrun.metadata(trace, "thread_name") if e["pid"] == 0}
    for k in kernels:
        assert threads.get((0, k["tid"])) == f"stream {k['tid']}", threads
    assert not [n for n in threads.values() if n.startswith("NPU stream")], f"peer lanes in the trace: {threads}"
    assert_one_description_of_device_0(trace, why)

    # Flows: exactly one arrow per kernel, from our launch event on the launching thread.
    launch_ids = {simrun.flow_id(e["args"].get("correlation")) for e in simrun.launches(trace)}
    ends = simrun.flow_events(trace, "f")
    starts = simrun.flow_events(trace, "s")
    assert sorted(f["id"] for f in ends) == sorted(simrun.flow_id(k["args"]["correlation"]) for k in kernels), ends
    assert {s["id"] for s in starts} <= launch_ids and len(starts) == len(kernels), f"foreign flow starts: {starts}"
    assert not [e for e in simrun.launches(trace) if e.get("dur", 0) == 0 and e["name"] in KERNEL_OP], (
        "the peer's zero-length flow tails are in the trace" + why
    )

    assert r.diagnostics["plugin"].get("last_trace_used_ours") is True, r.diagnostics["plugin"]


def assert_one_description_of_device_0(trace: dict, why: str = "") -> None:
    """The device process pid 0 is described once, consistently: the peer's DeviceInfo row for pid 0
    ({NPU, Ascend NPU, 0x1000000}) cannot be removed (FINDINGS.md e.5), so torch-mspti names its
    device lanes the same way when the peer is loaded; every process row of pid 0 must agree, in
    whatever order kineto writes them."""
    rows: dict[str, set[str]] = {}
    for e in simrun.events(trace):
        if e.get("ph") == "M" and e.get("pid") == 0 and e["name"].startswith("process_"):
            rows.setdefault(e["name"], set()).add(json.dumps(e["args"], sort_keys=True))
    for name in ("process_name", "process_labels", "process_sort_index"):
        assert len(rows.get(name, ())) == 1, f"pid 0 has {len(rows.get(name, ()))} different {name} rows: {rows}" + why
    sort = json.loads(next(iter(rows["process_sort_index"])))["sort_index"]
    assert sort >= OUR_SORT_BASE, f"device 0 sorts above the CPU lanes: {sort}" + why


def assert_names_torch_npu(r: simrun.SimResult, peer: npu_peer.Peer) -> None:
    """Diagnostics name torch_npu's backend and its version; so does any warning about the peer.
    Proposed shape (FINDINGS.md d): other_profiler is a dict, e.g. {"name": "torch_npu built-in MSPTI
    backend", "version": "2.13.0", "library": ...}; a string naming both is accepted too."""
    other = r.diagnostics["plugin"].get("other_profiler")
    text = json.dumps(other)
    assert isinstance(other, dict | str) and "torch_npu" in text and peer.version in text, (
        f"diagnostics do not name torch_npu's backend and its version {peer.version}: other_profiler={other!r}"
    )
    for w in r.doctor_warnings():
        assert "torch_npu" in w and "another profiling tool" not in w, f"warning does not name the peer: {w}"


def call_shape(r: simrun.SimResult, peer: npu_peer.Peer) -> list[str]:
    """The MSPTI calls of a run, made comparable across runs: callers named "peer" / "torch-mspti",
    handles, ids and buffer traffic (timing-dependent) left out, repeated lines (FlushAll polls) collapsed.
    torch-mspti's calls from a thread other than its first call's (the Unsubscribe and FlushAll of
    SubscriptionRelease, made after stop() returned) race with the other calls; they come last, as
    "torch-mspti release ..."."""
    shape: list[str] = []
    released: list[str] = []
    main_thread = None
    for line in r.mspti_calls:
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] == "libmspti" or line.endswith(" ..."):
            continue
        caller = "peer" if parts[2] == peer.library.name else "torch-mspti" if parts[2].startswith("_C.") else parts[2]
        call = re.sub(r"handle=\S+|\(0x[0-9a-f]+\)|\(nil\)| id=\d+", "", parts[3])
        call = re.sub(r"CorrelationId\((\d+), \d+\)", r"CorrelationId(\1)", call)
        call = re.sub(r"(request|complete)=\S+?(?=[,)])", r"\1", call).strip()
        if caller == "torch-mspti":
            main_thread = main_thread or parts[1]
            if parts[1] != main_thread:
                released.append(f"torch-mspti release {call}")
                continue
        entry = f"{caller} {call}"
        if not shape or shape[-1] != entry:
            shape.append(entry)
    return shape + released
