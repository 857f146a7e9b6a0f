"""User ranges, devices and collectives on the NPU lanes (trace-format.md "Device side", "Trace level").

One child (simulated NPU, two devices, direct launches, the simulator preloaded so that copies are
reported, ``ASCEND_RT_VISIBLE_DEVICES=4,5`` so that MSPTI's records carry physical ids 4 and 5 while
torch's devices are 0 and 1) runs, in order:

* ``ranges``: record_function("phase_mm") around matmuls with a nested range, on npu:0 only: each
  gpu_user_annotation span covers exactly its kernels, the nested one inside; key_averages() device
  totals equal the row durations (annotations never count: pytorch/pytorch#130730); only npu:0 in
  deviceProperties;
* ``threads``: a range in each of two threads, one per device (profile_all_threads);
* ``devices``: on each device a matmul, a copy and an all-reduce (the simulated hccl backend, a world
  of one rank) inside a range per device: one lane group per device, pid = logical id, sorted below
  every CPU process, deviceProperties of both; the collectives counted in device time, and the drain
  not kept waiting by them;
* ``tensorboard``: a schedule() cycle written by tensorboard_trace_handler: its deviceProperties.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from device_rows_child import CHILD
from sim_support import require_simulator, result, run_checks, simulator_library_path

CPU_SORT_LIMIT = 5_000_000  # kineto's kExceedMaxPid: device processes sort after every CPU pid
TOL = 0.002  # µs: kineto writes ts/dur with 3 decimals

CHECKS = r"""
import torch.distributed as dist
from torch._C._profiler import _ExperimentalConfig
from torch_mspti.sim.multirank import free_port

def _props(i):
    p = torch.npu.get_device_properties(i)
    return {"name": p.name, "total_memory": p.total_memory, "cube": p.cube_core_num, "vector": p.vector_core_num}

def check_ranges():
    a = torch.randn(128, 128, device="npu:0")
    torch.npu.synchronize(0)
    with profile(activities=ACT) as prof:
        with record_function("phase_mm"):
            for _ in range(3):
                torch.mm(a, a)
            with record_function("inner_add"):
                a + a
                a * 2
        torch.sum(a)
    return finish(prof)

def _mm_in_range(dev, x, name, barrier):
    torch.npu.set_device(dev)
    barrier.wait()
    with record_function(name):
        for _ in range(3):
            torch.mm(x, x)

def check_threads():
    a, b = torch.randn(64, 64, device="npu:0"), torch.randn(64, 64, device="npu:1")
    torch.npu.synchronize(0); torch.npu.synchronize(1)
    barrier = threading.Barrier(2)
    with profile(activities=ACT, experimental_config=_ExperimentalConfig(profile_all_threads=True)) as prof:
        t = threading.Thread(target=_mm_in_range, args=(1, b, "range_t1", barrier))
        t.start()
        _mm_in_range(0, a, "range_t0", barrier)
        t.join()
    return finish(prof)

def check_devices():
    dist.init_process_group("hccl", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{free_port()}")
    xs = [torch.randn(64, 64, device=f"npu:{i}") for i in (0, 1)]
    torch.npu.synchronize(0); torch.npu.synchronize(1)
    with profile(activities=ACT) as prof:
        for i, x in enumerate(xs):
            with record_function(f"dev{i}"):
                torch.mm(x, x)
                torch.ones(256).to(f"npu:{i}")
                dist.all_reduce(x)
    out = finish(prof)
    dist.destroy_process_group()
    out["comm_stream"] = [int(torch.ops.npu_sim.communication_stream(i)) for i in (0, 1)]
    out["props"] = [_props(i) for i in (0, 1)]
    out["visible"] = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    return out

def check_tensorboard():
    from torch.profiler import schedule, tensorboard_trace_handler
    out_dir = tempfile.mkdtemp()
    xs = [torch.randn(64, 64, device=f"npu:{i}") for i in (0, 1)]
    with profile(activities=ACT, schedule=schedule(wait=0, warmup=0, active=1, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(out_dir, worker_name="w")) as prof:
        for _ in range(2):
            for x in xs:
                torch.mm(x, x)
            prof.step()
    files = sorted(os.listdir(out_dir))
    with open(os.path.join(out_dir, files[0])) as f:
        data = json.load(f)
    return {"files": files, "device_properties": data.get("deviceProperties"),
            "kernel_pids": sorted({e["pid"] for e in data["traceEvents"] if e.get("cat") == "kernel"})}
"""


@pytest.fixture(scope="module")
def lanes():
    require_simulator()
    env = {"LD_PRELOAD": simulator_library_path(), "ASCEND_RT_VISIBLE_DEVICES": "4,5"}
    return run_checks(CHILD + CHECKS, {"device_count": 2, "launch_mode": "direct"}, env=env)


def _range(t: dict, name: str) -> dict:
    (r,) = [o for o in t["ops"].values() if o["cat"] == "user_annotation" and o["name"] == name]
    return r


def _rows_of_range(t: dict, name: str) -> list[dict]:
    """Device rows linked to an op inside the host range ``name`` (on the range's thread)."""
    rng, out = _range(t, name), []
    for row in t["rows"]:
        op = t["ops"].get(str(row["args"].get("External id")))
        if op and op["tid"] == rng["tid"] and rng["ts"] <= op["ts"] and op["end"] <= rng["end"]:
            out.append(row)
    return out


def _spans(t: dict, name: str) -> list[dict]:
    return [s for s in t["spans"] if s["name"] == name]


def _assert_span_covers_exactly(t: dict, name: str) -> dict:
    rows = _rows_of_range(t, name)
    assert rows, f"no device rows linked inside {name}"
    spans = _spans(t, name)
    lanes = {(r["pid"], r["tid"]) for r in rows}
    assert {(s["pid"], s["tid"]) for s in spans} == lanes and len(spans) == len(lanes), (name, spans, lanes)
    for s in spans:
        on_lane = [r for r in rows if (r["pid"], r["tid"]) == (s["pid"], s["tid"])]
        assert s["ts"] == pytest.approx(min(r["ts"] for r in on_lane), abs=TOL), (name, s)
        assert s["end"] == pytest.approx(max(r["end"] for r in on_lane), abs=TOL), (name, s)
    return {(s["pid"], s["tid"]): s for s in spans}


def _assert_device_time_is_the_rows(t: dict) -> None:
    total = sum(r["dur"] for r in t["rows"])
    counted = sum(a["self_device"] for a in t["averages"] if a["device_type"] != "DeviceType.CPU" and not a["is_user_annotation"])  # fmt: skip
    assert counted == pytest.approx(total, abs=0.01)
    assert t["table_total"] == pytest.approx(total, abs=t["table_tol"])  # what key_averages().table() prints
    # every device-side annotation is flagged so (torch leaves those out of its totals)
    names = {s["name"] for s in t["spans"]}
    assert {e["name"] for e in t["events"] if e["is_user_annotation"]} == names
    # (a device-side mstx range's host half, e.g. a collective's "communication" range, is a CPU row of the
    # same name: not an annotation, and it adds no device time)
    assert not [
        a
        for a in t["averages"]
        if a["key"] in names and not a["is_user_annotation"]
        and (a["device_type"] != "DeviceType.CPU" or a["self_device"] != 0)
    ]  # fmt: skip
    # the host ops' own device time is the rows linked to them, the ranges' is zero
    host = [h for h in t["host_events"].values() if h["name"] not in names]
    linked = sum(r["dur"] for r in t["rows"] if "External id" in r["args"])
    assert sum(h["self_device"] for h in host) == pytest.approx(linked, abs=0.01)
    assert all(h["self_device"] == 0 for h in t["host_events"].values() if h["name"] in names)


# ------------------------------------------------------------------------------------------ ranges


def test_a_range_is_a_span_from_its_first_kernel_start_to_its_last_kernel_end(lanes):
    t = result(lanes, "ranges")
    assert Counter(r["name"] for r in _rows_of_range(t, "phase_mm")) == Counter({"MatMulV2": 3, "Add": 1, "Mul": 1})
    outer = _assert_span_covers_exactly(t, "phase_mm")
    (sum_row,) = [r for r in t["rows"] if r["name"] == "ReduceSum"]
    span = outer[(sum_row["pid"], sum_row["tid"])]
    assert sum_row["ts"] >= span["end"] - TOL  # the kernel launched after the range is outside its span


def test_a_nested_range_is_a_span_inside_its_parent(lanes):
    t = result(lanes, "ranges")
    assert Counter(r["name"] for r in _rows_of_range(t, "inner_add")) == Counter({"Add": 1, "Mul": 1})
    inner = _assert_span_covers_exactly(t, "inner_add")
    outer = {(s["pid"], s["tid"]): s for s in _spans(t, "phase_mm")}
    for lane, s in inner.items():
        assert outer[lane]["ts"] - TOL <= s["ts"] and s["end"] <= outer[lane]["end"] + TOL, (s, outer[lane])


def test_ranges_never_add_device_time(lanes):
    _assert_device_time_is_the_rows(result(lanes, "ranges"))


def test_ranges_of_two_threads_are_spans_on_their_own_devices(lanes):
    t = result(lanes, "threads")
    for dev, name in ((0, "range_t0"), (1, "range_t1")):
        rows = _rows_of_range(t, name)
        assert [r["name"] for r in rows] == ["MatMulV2"] * 3 and {r["pid"] for r in rows} == {dev}, (name, rows)
        assert set(_assert_span_covers_exactly(t, name)) == {(dev, 1)}
    assert _range(t, "range_t0")["tid"] != _range(t, "range_t1")["tid"]
    _assert_device_time_is_the_rows(t)


# ------------------------------------------------------------------------------------------ devices


def test_device_properties_list_only_the_devices_that_appear(lanes):
    t = result(lanes, "ranges")  # npu:0 only (npu:1 not touched yet in this process)
    assert {r["pid"] for r in t["rows"]} == {0}
    assert [p["id"] for p in t["device_properties"]] == [0], t["device_properties"]


def test_device_properties_describe_both_simulated_devices(lanes):
    t = result(lanes, "devices")
    props = t["device_properties"]
    assert [p["id"] for p in props] == [0, 1], props
    for p, own in zip(props, t["props"], strict=True):
        assert own["name"] == "Ascend910B3 (simulated)"
        assert (p["name"], p["totalGlobalMem"], p["cubeCoreNum"], p["vectorCoreNum"]) == (
            own["name"],
            own["total_memory"],
            own["cube"],
            own["vector"],
        ), p
        assert p["totalGlobalMem"] == 64 << 30 and p["deviceType"] == "NPU", p


def test_each_device_is_one_lane_group_with_its_logical_id_below_every_cpu_process(lanes):
    t = result(lanes, "devices")
    assert t["visible"] == "4,5"  # MSPTI's records carry the physical ids 4 and 5
    assert {r["pid"] for r in t["rows"]} == {0, 1}
    assert all(r["pid"] == r["args"]["device"] for r in t["rows"])
    sort = {m["pid"]: m["args"]["sort_index"] for m in t["meta"] if m["name"] == "process_sort_index"}
    names = {m["pid"]: m["args"]["name"] for m in t["meta"] if m["name"] == "process_name"}
    cpu = {o["pid"] for o in t["ops"].values()}
    assert (names[0], names[1]) == ("NPU 0", "NPU 1") and sort[0] < sort[1], (names, sort)
    assert min(sort[0], sort[1]) > max(sort[p] for p in cpu) and sort[0] == CPU_SORT_LIMIT, sort
    threads = {(m["pid"], m["tid"]): m["args"]["name"] for m in t["meta"] if m["name"] == "thread_name"}
    for r in t["rows"]:
        assert threads[(r["pid"], r["tid"])] == f"stream {r['tid']}", r


def test_kernels_copies_collectives_and_ranges_stay_on_their_device(lanes):
    t = result(lanes, "devices")
    for dev in (0, 1):
        rows = _rows_of_range(t, f"dev{dev}")
        kinds = Counter((r["cat"], r["name"].split("__")[0], r["pid"], r["tid"]) for r in rows)
        comm = t["comm_stream"][dev]
        assert kinds == Counter(
            {
                ("kernel", "MatMulV2", dev, 1): 1,
                ("gpu_memcpy", "Memcpy HtoD (Host -> Device)", dev, 1): 1,
                ("kernel", "hcom_allReduce", dev, comm): 1,
            }
        ), kinds
        assert set(_assert_span_covers_exactly(t, f"dev{dev}")) == {(dev, 1), (dev, comm)}


def test_collectives_count_in_device_time_and_do_not_hold_the_drain(lanes):
    t = result(lanes, "devices")
    comm = [r for r in t["rows"] if r["name"].startswith("hcom_allReduce")]
    assert len(comm) == 2 and all(r["args"]["Collective name"] == "allreduce" for r in comm), comm
    _assert_device_time_is_the_rows(t)
    for r in comm:  # in its op's own device time, like a kernel
        host = t["host_events"][str(r["args"]["External id"])]
        assert host["self_device"] == pytest.approx(r["dur"], abs=0.01), (r, host)
    s = t["session"]
    assert s["records_by_kind"]["COMMUNICATION"] == 2, s["records_by_kind"]
    assert s["drain"]["exit_reason"] == "balanced" and s["drain"]["pending_launches"] == 0, s["drain"]
    assert s["warnings"] == [], s["warnings"]
    assert t["library"]["capabilities"]["communication"] is True and "communication" not in t["library"]["notes"]


# ------------------------------------------------------------------------------------------ TensorBoard


def test_the_session_reports_how_long_its_stop_and_process_trace_took(lanes):
    s = result(lanes, "devices")["session"]
    timings, drain = s["timings"], s["drain"]
    # stop() holds the drain and more (counters, the launch table, the findings).
    assert timings["stop_ms"] >= drain["ms"] > 0, (timings, drain)
    assert timings["process_trace_ms"] > 0, timings


def test_tensorboard_trace_names_its_npus_in_device_properties(lanes):
    """TensorBoard's profiler plugin (torch_tb_profiler 0.4) takes a device's name and memory from
    ``deviceProperties[i]`` for device i (by position, not by "id") and labels the run's "Device
    Type" GPU whenever there are kernels, without reading deviceProperties for it: the NPU can be
    named there, the label cannot be changed by the trace."""
    t = result(lanes, "tensorboard")
    assert len(t["files"]) == 1 and t["files"][0].startswith("w."), t["files"]
    props = t["device_properties"]
    assert t["kernel_pids"] == [0, 1]
    assert [p["id"] for p in props] == [0, 1] == list(range(len(props)))  # position == id
    assert all(p["deviceType"] == "NPU" and p["name"] == "Ascend910B3 (simulated)" for p in props), props


# ------------------------------------------------------------------------------------------ generations

COLLECTIVE = r"""
import ctypes
f = sim.msptiSimLaunchCommunication
f.restype = ctypes.c_uint64
f.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32,
                                      ctypes.c_uint64, ctypes.c_char_p]

@torch.library.custom_op("rows::all_reduce", mutates_args=())
def _all_reduce(t: torch.Tensor) -> torch.Tensor:
    out["correlation"] = f(b"hcom_allReduce__123_0_1", b"RING", b"4567123", 4, 1024, 0, 6, 30000, None)
    return t.clone()

launch("Before")
torch.ops.rows.all_reduce(x)
launch("After")
sync()
"""


@pytest.mark.parametrize("generation", ["8.1", "26.1"])
def test_a_collective_is_a_row_where_the_kind_exists_and_holds_nothing_where_not(generation, tmp_path):
    """COMMUNICATION came with MSPTI 8.2 (mspti.md 8): on 8.1 the collective makes no record and
    the capability says why; the kernels around it are complete either way and the drain ends
    balanced, never waiting for the collective."""
    require_simulator()
    import simrun

    run = simrun.run(COLLECTIVE, tmp_path, generation=generation, delay_ns=100_000_000, preload=generation == "8.1")
    has_kind = generation == "26.1"
    rows = simrun.kernels(run.trace)
    assert sorted(r["name"] for r in rows if r["name"] in ("Before", "After")) == ["After", "Before"], rows
    comm = [r for r in rows if r["name"].startswith("hcom_")]
    assert (run.extra["correlation"] > 0) is has_kind, run.extra
    session = run.diagnostics["last_session"]
    assert session["drain"]["exit_reason"] == "balanced" and session["drain"]["pending_launches"] == 0
    assert not {"pending", "timeout"} & set(session["warnings"]), session["warnings"]
    notes = run.diagnostics["library"]["capability_notes"]
    if has_kind:
        (row,) = comm
        op = next(e for e in simrun.cpu_ops(run.trace) if e["args"].get("External id") == row["args"]["External id"])
        assert op["name"] == "rows::all_reduce" and (row["pid"], row["tid"]) == (0, 6), (op, row)
        assert (row["args"]["In msg nelems"], row["args"]["bytes"], row["args"]["dtype"]) == (1024, 4096, "Float")
        assert "communication" not in notes
    else:
        assert comm == [] and "COMMUNICATION" not in session["enabled_kinds"]
        assert run.diagnostics["library"]["capabilities"]["communication"] is False
        assert "does not know COMMUNICATION" in notes["communication"], notes
