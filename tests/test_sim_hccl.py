"""The simulated ``hccl`` backend (torch_mspti.sim.hccl) and its per-rank traces.

Multi-process runs (each a module fixture, every run one process per rank on this machine):

* ``torchrun_direct``: ``torchrun --standalone --nproc-per-node 2 tests/hccl_check.py``, direct launches;
* ``spawn_queued``: ``torch.multiprocessing.spawn`` of the same check, queued launches (torch_npu's task
  queue);
* ``demo``: ``torch-mspti demo --workload ddp --ranks 2``.

hccl_check.py compares every collective with gloo on CPU, trains DDP and FSDP against a CPU model and
profiles the ``ddp`` workload (one trace per rank) and a window with a collective of each kind. The
communication-row tests assert the trace format the README describes ("Collectives") and
docs/kineto.md 8: rows named as MSPTI names them on the device's communication stream, linked to their
ops, joined with their ``"communication"`` mstx range and their process group, with the collective's
metadata under kineto's NCCL keys, and the same Seq for the same collective on every rank.
The hardware test at the end runs the same check on real devices with torch_npu's hccl
(docs/multi-rank.md, "On Ascend hardware").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from hw_support import parse_devices
from sim_support import require_simulator, run_once

from torch_mspti.sim import hccl_model

TESTS = Path(__file__).resolve().parent
CHECK = TESTS / "hccl_check.py"
RANKS = 2
HOST_OPS = {c.host_op: c for c in hccl_model.COLLECTIVES.values()}
NS = 0.0015  # 1 ns in the trace's µs, with the rounding of a µs float near 5e12


# ------------------------------------------------------------------------------------------ model


def test_op_names_are_hccls_with_the_communicator_digits_and_index():
    ar = hccl_model.COLLECTIVES["allreduce"]
    assert hccl_model.op_name(ar, "16898834563344171674", 0) == "hcom_allReduce__674_0_1"
    assert hccl_model.op_name(hccl_model.COLLECTIVES["recv"], "5862276093215481612", 12) == "hcom_receive__612_12_1"
    assert hccl_model.op_name(hccl_model.COLLECTIVES["reduce_scatter"], "7", 3) == "hcom_reduceScatter__007_3_1"


def test_data_types_are_mspti_communication_data_types():
    expected = {torch.int8: 0, torch.int32: 2, torch.float16: 3, torch.float32: 4, torch.int64: 5}
    expected.update({torch.uint8: 7, torch.bool: 7, torch.float64: 10, torch.bfloat16: 11})
    assert {d: hccl_model.data_type(d) for d in expected} == expected
    with pytest.raises(TypeError, match="cannot communicate torch.complex64"):
        hccl_model.data_type(torch.complex64)


def test_link_model_is_latency_plus_ring_traffic_over_bandwidth():
    m = hccl_model.LinkModel(bandwidth_gb_s=10.0, latency_us=5.0)
    ar, ag = hccl_model.COLLECTIVES["allreduce"], hccl_model.COLLECTIVES["_allgather_base"]
    assert m.duration_ns(ar, 1000, 4, 1) == 5000  # one rank: latency only
    assert m.duration_ns(ar, 1000, 4, 4) == 5000 + int(2 * 3 / 4 * 4000 / 10)
    assert m.duration_ns(ag, 1000, 2, 4) == 5000 + int(3 * 2000 / 10)
    with pytest.raises(ValueError, match="bandwidth_gb_s"):
        hccl_model.LinkModel(bandwidth_gb_s=0)


# ------------------------------------------------------------------------------------------ runs


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1", OMP_NUM_THREADS="1", **extra)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _results(out: Path, proc: subprocess.CompletedProcess, ranks: int = RANKS) -> list[dict]:
    files = [out / f"result_rank{r}.json" for r in range(ranks)]
    missing = [f.name for f in files if not f.is_file()]
    assert not missing, f"no {missing} (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    results = [json.loads(f.read_text()) for f in files]
    for r in results:
        assert "error" not in r, f"rank {r['rank']} failed:\n{r['error']}"
    return results


def _torchrun(out: Path, device: str, launch_mode: str, ranks: int, env: dict[str, str]) -> list[dict]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", str(CHECK)]
    cmd += ["--out", str(out), "--device", device, "--launch-mode", launch_mode]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=out)
    return _results(out, proc, ranks)


@pytest.fixture(scope="module")
def torchrun_direct(tmp_path_factory) -> list[dict]:
    require_simulator()
    return run_once(tmp_path_factory, "hccl_torchrun", lambda out: _torchrun(out, "sim", "direct", RANKS, _env()))


def _spawn(out: Path, launch_mode: str) -> list[dict]:
    code = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
        "import torch.multiprocessing as mp, hccl_check\n"
        "from torch_mspti.sim.multirank import free_port\n"
        f"mp.spawn(hccl_check.spawn_main, args=({RANKS}, free_port(), {str(out)!r}, 'sim', {launch_mode!r}), nprocs={RANKS})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=_env())
    return _results(out, proc)


@pytest.fixture(scope="module")
def spawn_queued(tmp_path_factory) -> list[dict]:
    require_simulator()
    return run_once(tmp_path_factory, "hccl_spawn", lambda out: _spawn(out, "queued"))


def _mstx_fields(message: str) -> dict[str, str]:
    """torch_npu's escaped-JSON mstx message as a dict (every \\" a quote)."""
    return json.loads(message.replace('\\"', '"'))


def test_mstx_message_is_torch_npus_escaped_json_of_strings():
    """getMstxHcclMsg's shape (docs/torch_npu.md 5): backslash-escaped quotes around every key and value,
    ``,`` between pairs, every value a string; srcRank only on receives and destRank only on sends."""
    ar = hccl_model.COLLECTIVES["allreduce"]
    msg = hccl_model.mstx_message(ar, "16898834563344171674", torch.bfloat16, 1024, 6)
    assert msg.startswith('{\\"opName\\": \\"HcclAllreduce\\",\\"groupName\\": ') and '"{' not in msg, msg
    assert '"' not in msg.replace('\\"', ""), msg  # no bare quote: all are escaped
    assert _mstx_fields(msg) == {
        "opName": "HcclAllreduce", "groupName": "16898834563344171674", "dataType": "bfp16", "count": "1024",
        "streamId": "6",
    }  # fmt: skip
    send = _mstx_fields(hccl_model.mstx_message(hccl_model.COLLECTIVES["send"], "7", torch.int64, 3, 2, dst_rank=1))
    recv = _mstx_fields(hccl_model.mstx_message(hccl_model.COLLECTIVES["recv"], "7", torch.int64, 3, 2, src_rank=0))
    assert (send["opName"], send["destRank"], "srcRank" in send) == ("HcclSend", "1", False), send
    assert (recv["opName"], recv["srcRank"], "destRank" in recv) == ("HcclRecv", "0", False), recv
    # HCCL types outside torch_npu's name table are "na"; all-gather's opName is not its host range's name
    f8 = _mstx_fields(hccl_model.mstx_message(ar, "7", torch.float8_e4m3fn, 1, 2))
    assert f8["dataType"] == "na", f8
    ag = hccl_model.COLLECTIVES["allgather"]
    assert (ag.host_op, _mstx_fields(hccl_model.mstx_message(ag, "7", torch.float32, 1, 2))["opName"]) == (
        "HcclAllgather",
        "HcclAllGather",
    )


RUNS = ["torchrun_direct", "spawn_queued"]


def _events(path: str) -> list[dict]:
    return json.loads(Path(path).read_text())["traceEvents"]


def _comm_rows(events: list[dict]) -> list[dict]:
    rows = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("hcom_")]
    return sorted(rows, key=lambda e: e["ts"])


def _host_comm_ops(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in HOST_OPS]


# ------------------------------------------------------------------------------------------ results


@pytest.mark.parametrize("run", RUNS)
def test_collectives_on_npu_equal_gloo_on_cpu(run, request):
    for r in request.getfixturevalue(run):
        bad = {name: why for name, why in r["collectives"].items() if why != "ok"}
        assert not bad, f"rank {r['rank']}: {bad}"
        assert len(r["collectives"]) >= 30


def test_each_process_group_is_its_own_communicator_named_alike_on_all_ranks(torchrun_direct):
    names = [r["comm_names"] for r in torchrun_direct]
    assert len(set(names[0])) == len(names[0]) >= 3 and names[0] == names[1], names
    assert all(n.isdigit() and len(n) >= 19 for n in names[0]), names  # HCCL-style numeric names


@pytest.mark.parametrize("run", RUNS)
def test_each_collective_is_one_communication_record_named_and_described_as_hccl_does(run, request):
    """MSPTI's own records (read without the plugin): name, algType, commName, dataType, count, the
    device's communication stream, the modelled duration, and an HCCL API record sharing the id."""
    for r in request.getfixturevalue(run):
        rec = r["records"]
        comms = sorted(rec["comms"], key=lambda c: c["id"])
        assert len(comms) == len(rec["expected"]), (comms, rec["expected"])
        indices = []
        for c, (kind, count, dtype, duration_ns, _) in zip(comms, rec["expected"], strict=True):
            m = re.fullmatch(rf"hcom_{kind}__{r['comm_name'][-3:]}_(\d+)_1", c["name"])
            assert m, (c["name"], kind)
            indices.append(int(m[1]))
            assert (c["alg"], c["comm"], c["count"], c["dtype"]) == (
                hccl_model.ALG_TYPE,
                r["comm_name"],
                count,
                dtype,
            ), c
            assert (c["device"], c["stream"], c["end"] - c["start"]) == (r["device"], r["comm_stream"], duration_ns), c
        assert indices == list(range(indices[0], indices[0] + len(indices)))  # numbered in issue order
        apis = {a["id"]: a["name"] for a in rec["apis"]}
        assert [apis.get(c["id"]) for c in comms] == [e[4] for e in rec["expected"]], rec["apis"]
        launchers = {a["tid"] for a in rec["apis"]}
        if run == "torchrun_direct":
            assert launchers == {rec["caller"]}  # direct: the collective's own thread launches
        else:
            assert rec["caller"] not in launchers  # queued: torch_npu's task-queue thread launches


@pytest.mark.parametrize("run", RUNS)
def test_ddp_and_fsdp_train_like_one_cpu_model_on_all_batches(run, request):
    for r in request.getfixturevalue(run):
        assert r["ddp_max_diff"] < 1e-6 and r["fsdp_max_diff"] < 1e-6, r


@pytest.mark.parametrize("run", RUNS)
def test_each_rank_writes_one_trace_with_its_distributed_info(run, request):
    results = request.getfixturevalue(run)
    files = sorted(Path(results[0]["trace_dir"]).glob("*.json"))
    assert [f.name.split(".")[0] for f in files] == [f"rank{r}" for r in range(RANKS)], files
    for r, f in enumerate(files):
        info = json.loads(f.read_text())["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("hccl", r, RANKS), info
        assert results[r]["device"] == r  # one simulated device per rank


# ------------------------------------------------------------------------------------------ trace rows


@pytest.mark.parametrize("run", RUNS)
def test_collectives_are_rows_on_the_devices_communication_stream(run, request):
    results = request.getfixturevalue(run)
    names = []
    for r in results:
        rows = _comm_rows(_events(r["trace"]))
        assert rows, f"rank {r['rank']}: no communication rows (hcom_*) in {r['trace']}"
        digits = r["comm_name"][-3:]
        for row in rows:
            assert re.fullmatch(rf"hcom_(allReduce|broadcast)__{digits}_\d+_1", row["name"]), row["name"]
            assert row["cat"] == "kernel" and (row["pid"], row["tid"]) == (r["device"], r["comm_stream"]), row
        names.append([row["name"] for row in rows])
    assert names[0] == names[1]  # every rank numbers the same collectives alike, as HCCL does


def _trace(path: str) -> dict:
    return json.loads(Path(path).read_text())


def _health(data: dict) -> dict:
    report = data["torch_mspti"]
    return json.loads(report) if isinstance(report, str) else report


@pytest.mark.parametrize("run", RUNS)
def test_communication_rows_carry_the_collective_metadata(run, request):
    """The DDP workload's rows (world group): MSPTI's facts and, joined with the group, kineto's NCCL fields
    with the values of the trace's own distributedInfo.pg_config."""
    for r in request.getfixturevalue(run):
        data = _trace(r["trace"])
        world = next(g for g in data["distributedInfo"]["pg_config"] if g["pg_desc"] == "default_pg")
        rows = _comm_rows(data["traceEvents"])
        allreduces = [row for row in rows if row["name"].startswith("hcom_allReduce_")]
        assert allreduces, f"rank {r['rank']}: no all-reduce rows"
        for row in rows:
            a = row.get("args", {})
            assert (a.get("device"), a.get("stream")) == (r["device"], r["comm_stream"]), a
            assert (a.get("algorithm"), a.get("type"), a.get("comm name")) == (
                hccl_model.ALG_TYPE, "COMMUNICATION", r["comm_name"],
            ), a  # fmt: skip
            assert (a.get("Process Group Name"), a.get("Process Group Description")) == ("0", "default_pg"), a
            assert (a.get("Process Group Ranks"), a.get("Group size")) == (str(world["ranks"]), RANKS), a
            assert a.get("Rank") == r["rank"] and isinstance(a.get("Seq"), int) and a["Seq"] > 0, a
            assert isinstance(a.get("correlation"), int), a
        for row in allreduces:  # DDP's one bucket holds every gradient of the model
            a = row["args"]
            assert (a.get("Collective name"), a.get("dtype")) == ("allreduce", "Float"), a
            assert a.get("In msg nelems") == a.get("Out msg nelems") == r["model_numel"], a
            assert a.get("bytes") == 4 * r["model_numel"], a
        assert _health(data)["collectives"]["joined"] == len(rows) > 0, _health(data)["collectives"]


@pytest.mark.parametrize("run", RUNS)
def test_every_kind_of_collective_row_is_joined_with_its_group_and_counts(run, request):
    """Each row of the every-kind window (hccl_check._profile_every_kind) in issue order: its collective,
    the pg_name of the group it ran on (world or "pair"), In/Out msg nelems from HCCL's count
    (torch_npu.md 6: all-gather's out and reduce-scatter's in are count x ranks, all-to-all's per-peer
    count x ranks both ways, all-to-all-v has no Out), Src/Dst Rank on point-to-point only, and Seq
    numbering each group's calls one after another."""
    for r in request.getfixturevalue(run):
        data = _trace(r["kinds_trace"])
        groups = {g["pg_name"]: g for g in data["distributedInfo"]["pg_config"]}
        rows = _comm_rows(data["traceEvents"])
        expect = r["kinds_expect"]
        assert len(rows) == len(expect), ([row["name"] for row in rows], expect)
        last_seq: dict[str, int] = {}
        for row, want in zip(rows, expect, strict=True):
            a = row["args"]
            got = (
                a.get("Collective name"),
                a.get("Process Group Name"),
                a.get("In msg nelems"),
                a.get("Out msg nelems"),
            )
            assert got == (want["collective"], want["pg"], want["in"], want["out"]), (row["name"], a, want)
            g = groups[want["pg"]]
            assert a["Process Group Description"] == g["pg_desc"] and a["Process Group Ranks"] == str(g["ranks"]), a
            assert a["Group size"] == g["pg_size"] and a["Rank"] == g["ranks"].index(r["rank"]), a
            assert (a.get("Src Rank"), a.get("Dst Rank")) == (want.get("src"), want.get("dst")), (a, want)
            if want["pg"] in last_seq:
                assert a["Seq"] == last_seq[want["pg"]] + 1, (a, last_seq)
            last_seq[want["pg"]] = a["Seq"]
        assert groups[expect[-1]["pg"]]["pg_desc"] == "pair"
        counts = _health(data)["collectives"]
        assert (counts["rows"], counts["joined"], counts["unjoined"], counts["no_seq"]) == (len(rows), len(rows), 0, 0)


@pytest.mark.parametrize("run", RUNS)
def test_each_collective_has_the_same_seq_and_group_on_every_rank(run, request):
    """Rank against rank: per process group, the rows ordered by Seq give the same (Seq, collective, dtype,
    group ranks, Src/Dst Rank) on both ranks, in both profiled windows (a send matches its peer's receive),
    and each row's group is a pg_config entry of the trace."""
    results = request.getfixturevalue(run)
    for key in ("trace", "kinds_trace"):
        per_rank = []
        for r in results:
            data = _trace(r[key])
            names = {g["pg_name"] for g in data["distributedInfo"]["pg_config"]}
            by_group: dict[str, list[tuple]] = {}
            for row in _comm_rows(data["traceEvents"]):
                a = row["args"]
                assert a["Process Group Name"] in names, (a, names)
                # A send on one rank is the receive with the same Seq, Src and Dst on its peer.
                kind = "send/recv" if a["Collective name"] in ("send", "recv") else a["Collective name"]
                facts = (a["Seq"], kind, a["dtype"], a["Process Group Ranks"], a.get("Src Rank"), a.get("Dst Rank"))
                by_group.setdefault(a["Process Group Name"], []).append(facts)
            per_rank.append({g: sorted(v) for g, v in by_group.items()})
        assert per_rank[0] and all(p == per_rank[0] for p in per_rank[1:]), (key, per_rank)
        # torch-mspti ranks says the same of these traces
        cmd = [sys.executable, "-m", "torch_mspti_cli", "ranks", "--json", *(r[key] for r in results)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        doc = json.loads(proc.stdout)
        assert proc.returncode == 0 and doc["ok"] and doc["compared"] >= len(per_rank[0]), (proc.stderr, doc)


@pytest.mark.parametrize("run", RUNS)
def test_check_accepts_each_ranks_collective_metadata(run, request):
    for r in request.getfixturevalue(run):
        for key in ("trace", "kinds_trace"):
            proc = subprocess.run(
                [sys.executable, "-m", "torch_mspti_cli", "check", r[key]], capture_output=True, text=True, timeout=300
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert re.search(r"collectives\s+(\d+) rows \(joined \1, with Seq \1\)", proc.stdout), proc.stdout


def _trace_message(name: str) -> dict[str, str]:
    """A marker's message as the trace holds it: kineto's JSON writer turns each \\" into /'."""
    return json.loads(name.replace("/'", '"'))


@pytest.mark.parametrize("run", RUNS)
def test_each_collective_is_inside_a_communication_mstx_range_like_process_group_hccls(run, request):
    """ProcessGroupHCCL's MstxRange (docs/torch_npu.md 5): one "communication" range per collective, on the
    host (the launching thread's mstx lane) and on the collective's stream's mstx lane (mstx ranges have
    lanes of their own, MarkerActivities.h), whose device span holds the row, and
    whose message describes that row: opName of its collective, groupName = its commName, count = In msg
    nelems, dataType of its dtype, streamId = its stream. No record_param_comms anywhere (torch_npu never
    opens one)."""
    mstx_ops = {c.kind: c.mstx_op for c in hccl_model.COLLECTIVES.values()}
    names = {"Float": "fp32", "Int": "int32", "Long": "int64"}
    for r in request.getfixturevalue(run):
        events = _events(r["trace"])
        assert not [e for e in events if e.get("name") == "record_param_comms"]
        ranges = [e for e in events if e.get("ph") == "X" and (e.get("args") or {}).get("domain") == "communication"]
        device = [e for e in ranges if e["cat"] == "gpu_user_annotation"]
        host = {e["args"]["marker id"]: e for e in ranges if e["cat"] == "privateuse1_driver"}
        rows = _comm_rows(events)
        lanes = {
            (e["pid"], e["tid"]): e["args"]["name"]
            for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name"
        }
        assert len(device) == len(host) == len(rows), (len(device), len(host), len(rows))
        for row in rows:
            a = row["args"]
            # The range ends when the stream passes its end, often the row's own end; the trace's µs floats
            # (5e12 µs) hold ns to about ±1 ns.
            around = [
                d
                for d in device
                if d["pid"] == row["pid"] and lanes.get((d["pid"], d["tid"])) == f"stream {row['tid']} mstx ranges"
                and d["ts"] <= row["ts"] + NS
                and row["ts"] + row["dur"] <= d["ts"] + d["dur"] + NS
            ]  # fmt: skip
            assert len(around) == 1, (row, around)
            d = around[0]
            h = host[d["args"]["marker id"]]  # the same range's host side
            assert h["name"] == d["name"] and h["ts"] <= d["ts"], (h, d)
            kind = re.fullmatch(r"hcom_(\w+?)__\d+_\d+_1", row["name"])[1]
            assert _trace_message(d["name"]) == {
                "opName": mstx_ops[kind], "groupName": a["comm name"], "dataType": names[a["dtype"]],
                "count": str(a["In msg nelems"]), "streamId": str(r["comm_stream"]),
            }, (d["name"], a)  # fmt: skip


def test_communication_rows_are_linked_to_the_ops_that_launched_them(torchrun_direct):
    for r in torchrun_direct:
        events = _events(r["trace"])
        ops = {
            e["args"]["External id"]: e
            for e in events
            if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})
        }
        finishes = {e.get("id") for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
        rows = _comm_rows(events)
        assert rows, f"rank {r['rank']}: no communication rows"
        linked_ops = []
        for row in rows:
            op = ops.get(row["args"].get("External id"))
            assert op is not None, f"{row['name']} is not linked to an op: {row['args']}"
            assert op["name"] in HOST_OPS and row["name"].startswith(f"hcom_{HOST_OPS[op['name']].kind}_"), (op, row)
            assert simrun.flow_id(row["args"]["correlation"]) in finishes, f"no arrow ends on {row['name']}"
            linked_ops.append(op["args"]["External id"])
        host = [e["args"]["External id"] for e in _host_comm_ops(events)]
        assert sorted(linked_ops) == sorted(host)  # one row per collective op, none without its row


_EXIT_WITH_WORK_IN_FLIGHT = """
import torch, torch.multiprocessing as mp

def main(rank, world, port):
    import torch_mspti.sim as sim
    sim.enable()
    import torch.distributed as dist
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
    t = torch.ones(1 << 16, device="npu")
    for _ in range(20):
        dist.all_reduce(t, async_op=True)  # never waited for: gloo completes them while the rank exits

if __name__ == "__main__":
    from torch_mspti.sim.multirank import free_port
    mp.spawn(main, args=(2, free_port()), nprocs=2)
"""


def test_a_rank_that_exits_with_collectives_in_flight_exits_cleanly(tmp_path):
    """Each collective completes through a Python callback on gloo's thread; one that ran while the
    interpreter finalised took the GIL there and ended in std::terminate (SIGABRT). The rank's exit now
    waits for them (hccl_ops.wait_for_pending_works). Before: 6 of 6 such runs aborted."""
    require_simulator()
    script = tmp_path / "exit_in_flight.py"
    script.write_text(_EXIT_WITH_WORK_IN_FLIGHT)
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=_env())
        assert proc.returncode == 0 and "terminate called" not in proc.stderr, proc.stderr[-3000:]


# ------------------------------------------------------------------------------------------ demo


def _demo(out_dir: Path) -> dict:
    out = out_dir / "trace.json"
    cmd = [sys.executable, "-m", "torch_mspti_cli", "demo", "--workload", "ddp", "--ranks", str(RANKS)]
    cmd += ["--out", str(out), "--device", "sim", "--size", "32"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env())
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "out": str(out)}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    require_simulator()
    run = run_once(tmp_path_factory, "hccl_demo", _demo)
    return subprocess.CompletedProcess([], run["rc"], run["stdout"], run["stderr"]), Path(run["out"])


def test_demo_runs_one_process_per_rank_and_prints_a_summary_per_rank(demo):
    proc, out = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in range(RANKS):
        line = next((ln for ln in proc.stdout.splitlines() if ln.strip().startswith(f"rank {r} ")), "")
        assert "backend hccl world 2" in line and "kernels " in line and "linked " in line, proc.stdout
        assert str(out.with_name(f"trace_rank{r}.json")) in proc.stdout
    tb = out.with_name("trace_tb")
    assert str(tb) in proc.stdout
    assert sorted(f.name.split(".")[0] for f in tb.glob("*.json")) == ["rank0", "rank1"]


def test_demo_summary_counts_the_linked_collectives(demo):
    proc, _ = demo
    for r in range(RANKS):
        line = next(ln for ln in proc.stdout.splitlines() if ln.strip().startswith(f"rank {r} "))
        m = re.search(r"collectives (\d+) \((\d+) linked; (\d+) c10d ops\)", line)
        assert m and int(m[1]) > 0 and int(m[2]) == int(m[1]), line


# ------------------------------------------------------------------------------------------ hardware

DDP_DEVICES_ENV = "TORCH_MSPTI_TEST_DDP_DEVICES"


@pytest.mark.npu
def test_real_devices_run_the_same_check_with_torch_npus_hccl(tmp_path):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("multi-rank hardware test: run it outside xdist (docs/multi-rank.md, section On Ascend hardware)")
    devices = parse_devices(os.environ.get(DDP_DEVICES_ENV) or "0")
    if len(devices) < 2:
        pytest.skip(f"multi-rank hardware test: set {DDP_DEVICES_ENV} to >= 2 device ids, e.g. 0,1")
    env = _env(ASCEND_RT_VISIBLE_DEVICES=",".join(devices), TASK_QUEUE_ENABLE="0")
    results = _torchrun(tmp_path, "real", "direct", len(devices), env)
    for r in results:
        bad = {name: why for name, why in r["collectives"].items() if why != "ok"}
        assert not bad and r["ddp_max_diff"] < 1e-4 and r["fsdp_max_diff"] < 1e-4, (bad, r)
        events = _events(r["trace"])
        rows = _comm_rows(events)
        assert rows and all("External id" in row.get("args", {}) for row in rows), rows[:3]
        comm = {id(row) for row in rows}
        compute = {(e["pid"], e["tid"]) for e in events if e.get("cat") == "kernel" and id(e) not in comm}
        assert not compute & {(row["pid"], row["tid"]) for row in rows}  # HCCL has its own streams
        info = json.loads(Path(r["trace"]).read_text())["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("hccl", r["rank"], len(devices))


# ------------------------------------------------------------------------------------------ 8.1


def test_without_communication_records_check_and_doctor_say_collectives_were_not_collected(tmp_path):
    """The 8.1 generation has no COMMUNICATION kind: a DDP trace then holds the collectives' host-side
    ops and no collective row. The health report says so, and check and doctor warn (not fail)."""
    require_simulator()
    from torch_mspti import simulator_library

    # 8.1 knows a device only when preloaded (mspti.md 5.5): the kernels then come, the collectives not
    env = _env(TORCH_MSPTI_LIBRARY=simulator_library("8.1"), LD_PRELOAD=simulator_library("8.1"), COLUMNS="1000")
    demo = [sys.executable, "-m", "torch_mspti_cli", "demo", "--workload", "ddp", "--ranks", "2", "--steps", "2"]
    proc = subprocess.run(
        [*demo, "--out", str(tmp_path / "trace.json")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = sorted((tmp_path / "trace_tb").glob("*.json"))
    assert len(files) == 2, (files, proc.stdout[-2000:])
    for f in files:
        trace = json.loads(f.read_text())
        events = trace["traceEvents"]
        assert _host_comm_ops(events) and not _comm_rows(events), f  # the premise: host side only
        health = trace["torch_mspti"]
        assert "COMMUNICATION" not in health["enabled_kinds"], health["enabled_kinds"]
        (note,) = health["not_collected"]
        assert note.startswith("COMMUNICATION: HCCL/LCCL collectives are not collected") and "8.2" in note, note
        report = subprocess.run(
            [sys.executable, "-m", "torch_mspti_cli", "check", "--json", str(f)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert report.returncode == 0, report.stdout[-3000:]
        warned = [w for w in json.loads(report.stdout)["warnings"] if w["rule"] == "kinds-not-collected"]
        assert len(warned) == 1 and "collectives are not collected" in warned[0]["message"], report.stdout[-3000:]
        doctor = subprocess.run(
            [sys.executable, "-m", "torch_mspti_cli", "doctor", str(f)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert doctor.returncode == 0, doctor.stdout[-3000:]
        assert "collectives are not collected" in doctor.stdout, doctor.stdout[-3000:]
