"""Collective (HCCL) rows for test_check's hand-made traces, as torch-mspti writes them with the
collective join: rank 1 of a world of 4, in the default group "0" (ranks [0, 1, 2, 3]) and in
group "1" ("tp", ranks [1, 3]), with the trace's distributedInfo and the health report's
"collectives" counts. Each ``break_*`` mutation below breaks one collective rule of ``check``.
"""

from __future__ import annotations

NPU = 0  # the device of test_check.make_trace
RANK = 1
COMM0, COMM1 = "16898834563344171674", "7311287340591208342"  # HCCL communicator names
STREAMS = {COMM0: 9, COMM1: 10}  # each communicator's HCCL stream

PG_CONFIG = [
    {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "npu:hccl", "pg_size": 4, "ranks": [0, 1, 2, 3]},
    {"pg_name": "1", "pg_desc": "tp", "backend_config": "npu:hccl", "pg_size": 2, "ranks": [1, 3]},
]
GROUP = {COMM0: PG_CONFIG[0], COMM1: PG_CONFIG[1]}

# (ts, comm, Collective name, In msg nelems, Out msg nelems or None, Seq or None, (Src, Dst) or None)
ROWS = [
    (400, COMM0, "allreduce", 1024, 1024, 1, None),
    (410, COMM1, "send", 64, 64, 1, (0, 1)),
    (420, COMM0, "allgather", 256, 1024, 2, None),
    (430, COMM1, "recv", 64, 64, 2, (1, 0)),
    (440, COMM0, "reduce_scatter", 1024, 256, 3, None),
    (450, COMM1, "all_to_all", 128, 128, 3, None),
    (460, COMM0, "all_to_allv", 512, None, 4, None),
    (480, COMM0, "broadcast", 32, 32, 5, None),
]
JOIN_ONLY = (
    "Process Group Description",
    "Process Group Ranks",
    "Group size",
    "Rank",
    "Out msg nelems",
    "Seq",
    "Src Rank",
    "Dst Rank",
)


def collective_row(ts, comm, name, n_in, n_out, seq, p2p) -> dict:
    """A joined collective row (kernel on its communicator's stream)."""
    pg = GROUP[comm]
    args = {
        "device": NPU,
        "stream": STREAMS[comm],
        "correlation": 0x50000000 + ts,
        "link": "no_record",
        "Collective name": name,
        "algorithm": "RING",
        "In msg nelems": n_in,
        "dtype": "Float",
        "bytes": 4 * n_in,
        "type": "COMMUNICATION",
        "comm name": comm,
        "Process Group Name": pg["pg_name"],
        "Process Group Description": pg["pg_desc"],
        "Process Group Ranks": str(pg["ranks"]),
        "Group size": pg["pg_size"],
        "Rank": pg["ranks"].index(RANK),
    }
    if n_out is not None:
        args["Out msg nelems"] = n_out
    if seq is not None:
        args["Seq"] = seq
    if p2p is not None:
        args["Src Rank"], args["Dst Rank"] = p2p
    return {
        "ph": "X",
        "cat": "kernel",
        "name": f"hcom_{name}__{ts}_0_1",
        "pid": NPU,
        "tid": STREAMS[comm],
        "ts": float(ts),
        "dur": 5.0,
        "args": args,
    }


def add_collectives(trace: dict) -> dict:
    """Adds the joined rows, their stream lanes, distributedInfo and the health report's counts to a
    test_check.make_trace() trace (whose health report is a dict); returns the trace."""
    for stream in STREAMS.values():
        trace["traceEvents"].append(
            {"ph": "M", "name": "thread_name", "pid": NPU, "tid": stream, "args": {"name": f"stream {stream}"}}
        )
    trace["traceEvents"] += [collective_row(*r) for r in ROWS]
    trace["distributedInfo"] = {
        "backend": "hccl",
        "rank": RANK,
        "world_size": 4,
        "pg_count": len(PG_CONFIG),
        "pg_config": [dict(c) for c in PG_CONFIG],
    }
    no_seq = sum(1 for r in ROWS if r[5] is None)
    trace["torch_mspti"]["collectives"] = {
        "rows": len(ROWS),
        "joined": len(ROWS),
        "unjoined": 0,
        "no_marker": 0,
        "no_group": 0,
        "bad_message": 0,
        "no_seq": no_seq,
    }
    return trace


def rows(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if isinstance(e, dict) and "Collective name" in e.get("args", {})]


def row(trace: dict, name: str) -> dict:
    """The collective row of that Collective name (each name occurs once in ROWS)."""
    (hit,) = [e for e in rows(trace) if e["args"]["Collective name"] == name]
    return hit


def unjoin(row: dict) -> None:
    """The row as a torch-mspti that joins leaves a row it could not join: MSPTI's fields only."""
    a = row["args"]
    for key in JOIN_ONLY:
        a.pop(key, None)
    a["Process Group Name"] = a["comm name"]


def old_format(row: dict) -> None:
    """The row as a torch-mspti from before the join wrote it."""
    unjoin(row)
    del row["args"]["type"], row["args"]["comm name"]


def set_counts(trace: dict, **counts: int) -> None:
    trace["torch_mspti"]["collectives"].update(counts)


# ------------------------------------------------------------------ one broken rule per mutation


def break_args(t):
    del row(add_collectives(t), "allreduce")["args"]["Rank"]


def break_group(t):
    row(add_collectives(t), "allreduce")["args"]["Process Group Description"] = "dp"


def break_nelems(t):
    row(add_collectives(t), "allgather")["args"]["Out msg nelems"] = 256


def break_seq(t):
    row(add_collectives(t), "reduce_scatter")["args"]["Seq"] = 2  # as the allgather before it


def break_distributed_info(t):
    del add_collectives(t)["distributedInfo"]


def break_counts(t):
    set_counts(add_collectives(t), rows=9)


def warn_group_made_after_start(t):
    """Group "1" was made inside the profiled window: torch wrote pg_config at start, without it."""
    add_collectives(t)
    t["distributedInfo"]["pg_config"] = [c for c in t["distributedInfo"]["pg_config"] if c["pg_name"] != "1"]


def warn_not_joined(t):
    add_collectives(t)
    for r in rows(t):
        unjoin(r)
    set_counts(t, joined=0, unjoined=len(ROWS), no_group=len(ROWS), no_seq=0)
