"""Collective rows of a process group that leaves a rank out: ``Rank`` is the rank in the group.

Every other multi-rank test profiles groups that hold the whole world, where a process's rank in the
group equals its global rank, so a ``Rank`` taken from ``dist.get_rank()`` (or a group rank looked up
by the wrong index) would pass them all. Here three ranks of the simulated ``hccl`` backend share the
world group and ranks 0 and 2 also form ``dist.new_group([0, 2])`` (``group_desc="evens"``); rank 1 is
not in it. One profiled window per rank holds a world all-reduce and, on the two members, an
all-reduce, a broadcast from global rank 2, an all-gather and a send/recv pair on the subgroup.

Asserted per rank and per collective row (README "Collectives", docs/kineto.md 8; torch writes the
same for NCCL: ``Rank`` is the ProcessGroup's ``rank_``, its rank in the group):

* the subgroup's rows carry ``Process Group Ranks`` ``"[0, 2]"``, ``Group size`` 2 and ``Rank`` 0 on
  global rank 0 and 1 on global rank 2 (never 2, the global rank); rank 1 has no such row;
* the world rows carry ``"[0, 1, 2]"``, ``Group size`` 3 and the global rank;
* ``Src Rank``/``Dst Rank`` of the send/recv pair are ranks in the group, as README documents;
* both members give each subgroup collective the same ``Seq``, and ``torch-mspti check`` accepts each
  rank's trace (it also checks ``Rank`` against ``distributedInfo.rank`` and the group's ranks).

src/torch_mspti/_communicators.py gives the rank in the group (``ranks.index(dist.get_rank())``); with
``dist.get_rank()`` in its place all three tests fail (global rank 2's rows say ``Rank`` 2 and ``Dst
Rank`` 2, and ``torch-mspti check`` rejects its trace), while every world-group test still passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator

WORLD = 3
EVENS = [0, 2]  # the subgroup's global ranks; global rank 1 is left out

_RANKS_SCRIPT = """
import json, os, sys
import torch
import torch.multiprocessing as mp


def main(rank, world, port, out):
    from torch_mspti import sim

    sim.enable(device_count=world)
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
    result = {"rank": rank}
    try:
        evens = dist.new_group(ranks=%(evens)r, group_desc="evens")  # every rank takes part in new_group
        member = rank in %(evens)r
        result["evens_pg"] = dist.distributed_c10d._get_process_group_name(evens) if member else None
        dev = torch.device("npu", rank)
        x = torch.ones(4, device=dev) * (rank + 1)
        gathered = torch.empty(4 * len(%(evens)r), device=dev)
        p2p = torch.ones(3, device=dev)
        expect = []  # (collective, group) in issue order
        torch.npu.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            dist.all_reduce(x)
            expect.append(("allreduce", "world"))
            if member:
                dist.all_reduce(x, group=evens)
                expect.append(("allreduce", "evens"))
                dist.broadcast(x, src=2, group=evens)  # src is a global rank: the group's rank 1
                expect.append(("broadcast", "evens"))
                dist.all_gather_into_tensor(gathered, x, group=evens)
                expect.append(("allgather", "evens"))
                if rank == 0:
                    dist.send(p2p, dst=2, group=evens)
                    expect.append(("send", "evens"))
                else:
                    dist.recv(p2p, src=0, group=evens)
                    expect.append(("recv", "evens"))
            torch.npu.synchronize()
        result["trace"] = os.path.join(out, f"trace_rank{rank}.json")
        prof.export_chrome_trace(result["trace"])
        result["expect"] = expect
    except Exception:
        import traceback

        result["error"] = traceback.format_exc()
    finally:
        with open(os.path.join(out, f"result_rank{rank}.json"), "w", encoding="utf-8") as f:
            json.dump(result, f)
        dist.destroy_process_group()


if __name__ == "__main__":
    from torch_mspti.sim.multirank import free_port

    mp.spawn(main, args=(%(world)d, free_port(), sys.argv[1]), nprocs=%(world)d)
"""


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    require_simulator()
    out = tmp_path_factory.mktemp("subgroup")
    script = out / "subgroup_ranks.py"
    script.write_text(_RANKS_SCRIPT % {"evens": EVENS, "world": WORLD})
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1", OMP_NUM_THREADS="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600, env=env, cwd=out
    )
    results = []
    for r in range(WORLD):
        f = out / f"result_rank{r}.json"
        assert f.is_file(), f"no {f.name} (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        result = json.loads(f.read_text())
        assert "error" not in result, f"rank {r} failed:\n{result['error']}"
        results.append(result)
    return results


def _trace(path: str) -> dict:
    return json.loads(Path(path).read_text())


def _comm_rows(data: dict) -> list[dict]:
    rows = [e for e in data["traceEvents"] if e.get("ph") == "X" and str(e.get("name", "")).startswith("hcom_")]
    return sorted(rows, key=lambda e: e["ts"])


def test_a_subgroups_rows_carry_the_rank_in_the_group_not_the_global_rank(ranks):
    for r in ranks:
        rank = r["rank"]
        data = _trace(r["trace"])
        assert data["distributedInfo"]["rank"] == rank, data["distributedInfo"]
        rows = _comm_rows(data)
        got = [(row["args"].get("Collective name"), row["args"].get("Process Group Description")) for row in rows]
        want = [(c, "default_pg" if g == "world" else "evens") for c, g in r["expect"]]
        assert got == want, f"rank {rank}: {got} != {want}"
        for row in rows:
            a = row["args"]
            if a["Process Group Description"] == "evens":
                assert rank in EVENS, f"rank {rank} is not in the subgroup, yet has its row {a}"
                assert a["Process Group Name"] == r["evens_pg"], a
                assert (a["Process Group Ranks"], a["Group size"]) == (str(EVENS), len(EVENS)), a
                assert a["Rank"] == EVENS.index(rank), (
                    f"global rank {rank}: Rank {a['Rank']} is not its rank in {EVENS}"
                )
            else:
                assert (a["Process Group Ranks"], a["Group size"]) == (str(list(range(WORLD))), WORLD), a
                assert a["Rank"] == rank, a


def test_a_subgroups_point_to_point_peers_are_ranks_in_the_group(ranks):
    """Global rank 0 sends to global rank 2: in the group [0, 2] that is group rank 0 to group rank 1."""
    for r in ranks:
        p2p = [
            row["args"] for row in _comm_rows(_trace(r["trace"])) if row["args"]["Collective name"] in ("send", "recv")
        ]
        if r["rank"] not in EVENS:
            assert p2p == [], p2p
            continue
        assert [(a["Collective name"], a["Src Rank"], a["Dst Rank"]) for a in p2p] == [
            ("send" if r["rank"] == 0 else "recv", 0, 1)
        ], p2p
        assert p2p[0]["Rank"] == EVENS.index(r["rank"]), p2p


def test_both_members_number_the_subgroups_collectives_alike_and_check_accepts_every_trace(ranks):
    seqs = {}
    for r in ranks:
        data = _trace(r["trace"])
        rows = [row["args"] for row in _comm_rows(data)]
        health = data["torch_mspti"]
        health = json.loads(health) if isinstance(health, str) else health
        assert health["collectives"]["joined"] == len(rows) > 0, health["collectives"]
        evens = [a for a in rows if a["Process Group Description"] == "evens"]
        seqs[r["rank"]] = [
            (a["Seq"], "p2p" if a["Collective name"] in ("send", "recv") else a["Collective name"]) for a in evens
        ]
        proc = subprocess.run(
            [sys.executable, "-m", "torch_mspti_cli", "check", r["trace"]], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seqs[1] == [] and seqs[0] == seqs[2] and len(seqs[0]) == 4, seqs
    assert [s for s, _ in seqs[0]] == list(range(seqs[0][0][0], seqs[0][0][0] + 4)), seqs
