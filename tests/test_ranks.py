"""``torch-mspti ranks``: one trace per rank, compared collective by collective (pure Python, no torch).

Synthetic traces: each rank's joined collective rows (README "Collectives and multi-rank runs"). The
2-rank simulator run is compared the same way in tests/test_sim_hccl.py.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from torch_mspti_cli import main
from torch_mspti_cli.ranks import compare_ranks, read_rank

WORLD = "[0, 1, 2, 3]"


def _row(seq: int, collective: str, group: str = "0", ranks: str = WORLD, src=None, dst=None, dtype="Float") -> dict:
    args = {
        "Collective name": collective,
        "dtype": dtype,
        "Process Group Name": group,
        "Process Group Description": "default_pg" if group == "0" else "pair",
        "Process Group Ranks": ranks,
        "Seq": seq,
    }
    if src is not None:
        args |= {"Src Rank": src, "Dst Rank": dst}
    return {"ph": "X", "cat": "kernel", "name": f"hcom_{collective}__1_{seq}_1", "ts": seq, "dur": 1, "args": args}


def _write(
    path: Path, rank: int | None, rows: list[dict], gz: bool = False, world_size: int = 4, pid: int | None = None
) -> str:
    """One rank's trace; ``pid``: the profiled process's id, on a host op as kineto writes it."""
    trace = {"traceEvents": rows}
    if pid is not None:
        trace["traceEvents"] = [
            {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": pid, "tid": pid, "ts": 0, "dur": 1},
            *rows,
        ]
        trace["host_name"] = "node0"
    if rank is not None:
        trace["distributedInfo"] = {"rank": rank, "world_size": world_size, "pg_config": []}
    data = json.dumps(trace).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``torch-mspti ranks ARGV``."""
    rc = main(["ranks", *argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_ranks_that_number_the_same_calls_alike_agree(tmp_path, capsys):
    # rank 1 started its window one call later: only the numbers both hold are compared
    a = _write(tmp_path / "rank0.json", 0, [_row(1, "allreduce"), _row(2, "allgather"), _row(3, "broadcast")])
    b = _write(tmp_path / "rank1.json.gz", 1, [_row(2, "allgather"), _row(3, "broadcast")], gz=True)
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 0 and "OK: the ranks agree" in out, out
    report = compare_ranks([read_rank(a), read_rank(b)])
    assert (report.ok, report.compared) == (True, 2)


def test_point_to_point_calls_match_each_other_whatever_their_direction_but_never_a_collective(tmp_path):
    send = _write(tmp_path / "r0.json", 0, [_row(1, "send", src=0, dst=1)])
    recv = _write(tmp_path / "r1.json", 1, [_row(1, "recv", src=0, dst=1)])
    assert compare_ranks([read_rank(send), read_rank(recv)]).ok
    # two ranks that send to each other first both number a send
    send_back = _write(tmp_path / "r1b.json", 1, [_row(1, "send", src=1, dst=0)])
    assert compare_ranks([read_rank(send), read_rank(send_back)]).ok
    collective = _write(tmp_path / "r1c.json", 1, [_row(1, "allreduce")])
    report = compare_ranks([read_rank(send), read_rank(collective)])
    assert not report.ok and "a send or receive in group ranks" in report.disagreements[0].message()


def test_point_to_point_calls_of_some_ranks_shift_the_others_numbers_and_are_reported(tmp_path, capsys):
    """torch_npu's group sequence number counts sends and receives too (docs/torch_npu.md 6): after rank
    0 sent to rank 1, the all-reduce is Seq 2 on ranks 0 and 1 and Seq 1 on ranks 2 and 3."""
    _write(tmp_path / "rank0.json", 0, [_row(1, "send", src=0, dst=1), _row(2, "allreduce")])
    _write(tmp_path / "rank1.json", 1, [_row(1, "recv", src=0, dst=1), _row(2, "allreduce")])
    _write(tmp_path / "rank2.json", 2, [_row(1, "allreduce")])
    _write(tmp_path / "rank3.json", 3, [_row(1, "allreduce")])
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 1 and "collective-ranks-disagree" in out and "sends and receives too" in out, out
    assert "group '0', Seq 1: rank 0 has a send or receive" in " ".join(out.split()), out
    rc, out, _ = _run(capsys, "--json", str(tmp_path))
    doc = json.loads(out)
    assert rc == 1 and not doc["ok"] and len(doc["disagreements"]) == 4 and doc["compared"] == 7, doc


def test_several_traces_of_one_rank_are_its_calls_together(tmp_path, capsys):
    # one trace per profiling cycle: rank 0's two windows against rank 1's one
    _write(tmp_path / "rank0_a.json", 0, [_row(1, "allreduce")])
    _write(tmp_path / "rank0_b.json", 0, [_row(5, "allgather")])
    _write(tmp_path / "rank1.json", 1, [_row(1, "allreduce"), _row(5, "broadcast")])
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 1 and "Seq 5: rank 0 has allgather" in " ".join(out.split()), out


def test_groups_are_compared_among_their_members_only(tmp_path):
    pair = "[0, 1]"
    a = _write(tmp_path / "r0.json", 0, [_row(1, "allreduce", "1", pair)])
    b = _write(tmp_path / "r1.json", 1, [_row(1, "allreduce", "1", pair)])
    c = _write(tmp_path / "r2.json", 2, [_row(1, "broadcast", "2", "[2, 3]")])
    report = compare_ranks([read_rank(p) for p in (a, b, c)])
    assert report.ok and report.compared == 1


def test_what_cannot_be_compared_is_said(tmp_path, capsys):
    one = _write(tmp_path / "only.json", 0, [_row(1, "allreduce")])
    rc, _, err = _run(capsys, one)
    assert rc == 2 and "at least two traces" in err
    norank = _write(tmp_path / "norank.json", None, [_row(1, "allreduce")])
    rc, out, _ = _run(capsys, one, norank)
    assert rc == 1 and "no distributedInfo.rank" in " ".join(out.split()), out
    rc, _, err = _run(capsys, one, str(tmp_path / "missing.json"))
    assert rc == 2 and "no such file" in err
    unjoined = _write(tmp_path / "unjoined.json", 1, [{"ph": "X", "cat": "kernel", "name": "hcom_x", "args": {}}])
    rc, out, _ = _run(capsys, one, unjoined)
    assert rc == 0 and "nothing to compare" in out, out


@pytest.mark.parametrize("gz", [False, True])
def test_read_rank_takes_the_joined_numbered_rows_only(tmp_path, gz):
    rows = [_row(1, "allreduce"), {"ph": "X", "cat": "kernel", "name": "k", "args": {"Seq": 3}}]
    unnumbered = _row(2, "allgather")
    del unnumbered["args"]["Seq"]
    t = read_rank(_write(tmp_path / "t.json", 3, [*rows, unnumbered], gz=gz))
    assert (t.rank, t.rows, t.calls) == (3, 1, {"0": {1: ("allreduce", "Float", WORLD)}})
    assert t.group_ranks == {"0": [0, 1, 2, 3]}


def test_a_group_made_again_under_its_name_is_another_communicator(tmp_path, capsys):
    """destroy_process_group and init_process_group: group "0" again, Seq from 1 again, another comm name.
    Each rank's two traces are one process's (its pid), so they are one run."""
    first, again = _row(1, "allreduce"), _row(1, "allgather")
    first["args"]["comm name"], again["args"]["comm name"] = "111", "222"
    _write(tmp_path / "rank0_a.json", 0, [first], pid=100)
    _write(tmp_path / "rank0_b.json", 0, [again], pid=100)
    _write(tmp_path / "rank1_a.json", 1, [dict(first)], pid=200)
    _write(tmp_path / "rank1_b.json", 1, [dict(again)], pid=200)
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 0 and "OK: the ranks agree" in out, out
    # the same traces, each rank's second from another process: a second run of the job beside the first
    _write(tmp_path / "rank0_b.json", 0, [again], pid=300)
    _write(tmp_path / "rank1_b.json", 1, [dict(again)], pid=400)
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 1 and "traces of 2 different runs" in " ".join(out.split()), out


def test_a_rank_outside_a_group_that_has_its_rows_is_reported(tmp_path, capsys):
    pair = "[0, 1]"
    _write(tmp_path / "rank0.json", 0, [_row(1, "allreduce", "1", pair)], world_size=8)
    _write(tmp_path / "rank5.json", 5, [_row(1, "allreduce", "1", pair)], world_size=8)
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 1 and "rank 5 has rows of group '1', whose ranks are [0, 1]" in " ".join(out.split()), out


def test_unreadable_and_foreign_files(tmp_path, capsys):
    good = _write(tmp_path / "rank0.json", 0, [_row(1, "allreduce")])
    _write(tmp_path / "rank1.json", 1, [_row(1, "allreduce")])
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b'{"traceEvents": []}')[:12] + b"garbage" * 4)
    rc, _, err = _run(capsys, good, str(broken))  # named: exit 2, one line
    assert rc == 2 and "broken gzip data" in err and "Traceback" not in err, err
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    rc, _, err = _run(capsys, good, str(deep))
    assert rc == 2 and "malformed trace" in err, err
    (tmp_path / "config.json").write_text('{"lr": 0.1}')  # not a trace: a directory's stray file is skipped
    rc, out, _ = _run(capsys, str(tmp_path))
    flat = " ".join(out.split())
    assert rc == 0 and "skipped" in flat and "config.json" in flat and "OK: the ranks agree" in flat, out


def test_the_same_file_twice_is_one_rank(tmp_path, capsys):
    one = _write(tmp_path / "rank0.json", 0, [_row(1, "allreduce")])
    rc, out, _ = _run(capsys, one, one)
    assert rc == 1 and "only rank(s) [0]" in " ".join(out.split()), out


def test_a_distributed_info_written_as_a_json_string_is_read(tmp_path):
    path = tmp_path / "rank2.json"
    path.write_text(json.dumps({"traceEvents": [_row(1, "allreduce")], "distributedInfo": json.dumps({"rank": 2})}))
    assert read_rank(str(path)).rank == 2


# ------------------------------------------------------------------ traces of one run, or not


def _comm(row: dict, comm: str) -> dict:
    """The row with HCCL's communicator name, as a torch-mspti that joins writes every joined row."""
    row["args"]["comm name"] = comm
    return row


def test_traces_of_different_worlds_are_refused_naming_each_world_and_file(tmp_path, capsys):
    """Rank 0 of a 2-rank run beside rank 1 of a 4-rank run: the rows agree, the worlds do not."""
    pair = "[0, 1]"
    _write(tmp_path / "rank0.json", 0, [_row(1, "allreduce", "0", pair)], world_size=2)
    _write(tmp_path / "rank1.json", 1, [_row(1, "allreduce", "0", pair)], world_size=4)
    rc, out, _ = _run(capsys, str(tmp_path))
    flat = " ".join(out.split())
    assert rc == 1 and "OK" not in flat, out
    assert "different worlds" in flat and "world_size 2" in flat and "world_size 4" in flat, out
    assert "rank0.json" in flat and "rank1.json" in flat and "give the traces of one run" in flat, out
    rc, out, _ = _run(capsys, "--json", str(tmp_path))
    doc = json.loads(out)
    assert rc == 1 and not doc["ok"] and [t["world_size"] for t in doc["traces"]] == [2, 4], doc
    assert any("different worlds" in p for p in doc["problems"]), doc


def test_a_rank_outside_its_world_is_refused(tmp_path, capsys):
    # the rows agree, and both ranks are of group "1": only world_size says rank 3 cannot be
    _write(tmp_path / "rank0.json", 0, [_row(1, "allreduce", "1", "[0, 3]")], world_size=2)
    _write(tmp_path / "rank3.json", 3, [_row(1, "allreduce", "1", "[0, 3]")], world_size=2)
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 1 and "rank 3 in a world of 2 ranks" in " ".join(out.split()), out


def test_ranks_of_different_runs_are_refused_by_their_communicators(tmp_path, capsys):
    """Rank 0 of one run beside rank 1 of another run of the same job: HCCL names each communicator anew
    in every run, so the two traces name their group "0" by different communicators."""
    _write(tmp_path / "runA_rank0.json", 0, [_comm(_row(1, "allreduce"), "111"), _comm(_row(2, "allgather"), "111")])
    _write(tmp_path / "runB_rank1.json", 1, [_comm(_row(1, "allreduce"), "222")])
    rc, out, _ = _run(capsys, str(tmp_path))
    flat = " ".join(out.split())
    assert rc == 1 and "nothing to compare" not in flat and "OK" not in flat, out
    assert "different runs" in flat and "runA_rank0.json" in flat and "runB_rank1.json" in flat, out
    assert "'111'" in flat and "'222'" in flat and "give the traces of one run" in flat, out


def test_ranks_of_one_run_are_not_refused_for_a_group_made_again_between_their_windows(tmp_path, capsys):
    """One run: group "1" made again (another communicator) between rank 0's window and rank 1's; they
    still share the default group's communicator, so they are one run."""
    pair = "[0, 1]"
    _write(
        tmp_path / "rank0.json",
        0,
        [_comm(_row(1, "allreduce"), "111"), _comm(_row(1, "broadcast", "1", pair), "333")],
    )
    _write(
        tmp_path / "rank1.json",
        1,
        [_comm(_row(1, "allreduce"), "111"), _comm(_row(1, "allgather", "1", pair), "444")],
    )
    _write(tmp_path / "rank2.json", 2, [_comm(_row(1, "allreduce"), "111")])
    rc, out, _ = _run(capsys, str(tmp_path))
    assert rc == 0 and "OK: the ranks agree" in out, out
    report = compare_ranks([read_rank(str(tmp_path / f"rank{r}.json")) for r in range(3)])
    assert (report.ok, report.compared) == (True, 3)


def test_two_runs_of_two_ranks_each_are_named_run_by_run(tmp_path):
    for run, comm in (("a", "111"), ("b", "222")):
        for r in (0, 1) if run == "a" else (2, 3):
            _write(tmp_path / f"{run}_rank{r}.json", r, [_comm(_row(1, "allreduce"), comm)])
    report = compare_ranks([read_rank(str(p)) for p in sorted(tmp_path.iterdir())])
    (problem,) = report.problems
    assert not report.ok and report.compared == 0, report
    assert "2 different runs" in problem and "ranks 0, 1" in problem and "ranks 2, 3" in problem, problem


def test_a_directory_that_holds_two_runs_of_the_same_ranks_is_refused(tmp_path, capsys):
    """tensorboard_trace_handler's directory keeps the traces of every run written into it: two runs
    of ranks 0 and 1 agree call by call, but are two runs."""
    for run, comm, pid in (("1", "111", 100), ("2", "222", 300)):
        for r in (0, 1):
            _write(tmp_path / f"rank{r}.{run}.pt.trace.json", r, [_comm(_row(1, "allreduce"), comm)], pid=pid + r)
    rc, out, _ = _run(capsys, str(tmp_path))
    flat = " ".join(out.split())
    assert rc == 1 and "traces of 2 different runs" in flat and "OK" not in flat, out
    assert "rank0.1.pt.trace.json" in flat and "rank1.2.pt.trace.json" in flat, out
