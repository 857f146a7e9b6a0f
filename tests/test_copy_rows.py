"""Memory copies on the NPU lanes (README "Copies, user ranges, devices"; mspti.md 3.4, 5.5).

MSPTI reports MEMCPY records only with its library in LD_PRELOAD from process start. So:

* ``preloaded``: a child started with the simulator in LD_PRELOAD runs a copy-heavy step, each copy
  inside its own record_function range; every copy must be one gpu_memcpy row on its device's
  stream lane with the tensor's byte count, copy kind and bandwidth, linked to the op instance that
  issued it, and counted in device time by ``events()`` and ``key_averages()``; both launch modes;
* ``plain``: the same kind of step without the preload: no copy rows, the capability says why and
  how to fix it (once per process), and the kernels are all there and linked;
* ``torch-mspti demo --memcpy`` restarts itself with the preload and its trace has the copies.

Records arrive 200 ms after the copy (the simulator's default delivery delay), so the copies at the
end of a profile test that the drain waits for them instead of disabling MEMCPY first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from device_rows_child import CHILD
from sim_support import require_simulator, result, run_checks, simulator_library_path

F32 = 4
SHAPE = (256, 128)
MATRIX = SHAPE[0] * SHAPE[1] * F32
# range -> (row name, bytes, copy kind, device, stream ("side": the side stream), op that issues it)
COPIES = {
    "h2d": ("Memcpy HtoD (Host -> Device)", 1000 * F32, "HtoD", 0, 1, "aten::copy_"),
    "h2d_side": ("Memcpy HtoD (Host -> Device)", 64 * 64 * F32, "HtoD", 0, "side", "aten::copy_"),
    "d2h": ("Memcpy DtoH (Device -> Host)", MATRIX, "DtoH", 0, 1, "aten::copy_"),
    "item": ("Memcpy DtoH (Device -> Host)", F32, "DtoH", 0, 1, "aten::_local_scalar_dense"),
    "d2d": ("Memcpy DtoD (Device -> Device)", MATRIX, "DtoD", 0, 1, "aten::copy_"),
    "d2d_peer": ("Memcpy DtoD (Device -> Device)", MATRIX, "DtoD", 1, 1, "aten::copy_"),
}

STEP = r"""
def check_copy_step():
    x = torch.randn(*SHAPE, device="npu")
    dst = torch.empty_like(x)
    torch.empty(1, device="npu:1")  # the first allocation on npu:1 launches its housekeeping kernel now
    side = torch.npu.Stream()
    host = torch.ones(1000)
    torch.npu.synchronize(0); torch.npu.synchronize(1)
    with profile(activities=ACT) as prof:
        with record_function("h2d"):
            a = host.to("npu")
        with record_function("h2d_side"):
            with torch.npu.stream(side):
                b = torch.ones(64, 64).to("npu", non_blocking=True)
        with record_function("d2h"):
            c = x.cpu()
        with record_function("item"):
            v = x.sum().item()
        with record_function("d2d"):
            dst.copy_(x)
        with record_function("d2d_peer"):
            y = x.to("npu:1")
    out = finish(prof)
    out["side_stream"] = side.stream_id
    return out
""".replace("*SHAPE", ", ".join(map(str, SHAPE)))

TWICE = r"""
def check_no_preload_twice():
    x = torch.randn(*SHAPE, device="npu")
    torch.npu.synchronize()
    outs = []
    for _ in range(2):
        with profile(activities=ACT) as prof:
            with record_function("copies"):
                a = torch.ones(1000).to("npu")
                c = x.cpu()
            with record_function("compute"):
                for _ in range(3):
                    torch.mm(x, x.t())
                v = x.sum().item()
        outs.append(finish(prof))
    return outs
""".replace("*SHAPE", ", ".join(map(str, SHAPE)))


BEHIND = r"""
def check_copies_behind_a_long_kernel():
    import json, os, tempfile
    x = torch.randn(256, 256, device="npu")
    h = torch.randn(64, 64)
    torch.npu.synchronize()
    with profile(activities=ACT) as prof:
        for _ in range(3):
            torch.mm(x, x)                        # 5 ms on stream 1
            a = h.to("npu", non_blocking=True)    # queued behind it, while it runs
            torch.npu.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    rows = [(e["name"], e["ts"], e["dur"]) for e in events
            if e.get("ph") == "X" and e.get("pid") == 0 and e.get("cat") in ("kernel", "gpu_memcpy")]
    mm = [a.self_device_time_total for a in prof.key_averages() if a.key == "MatMulV2"]
    return {"rows": sorted(rows, key=lambda r: r[1]), "matmul_device_us": mm}
"""


@pytest.fixture(scope="module")
def behind():
    require_simulator()
    env = {"LD_PRELOAD": simulator_library_path()}
    enable = {"launch_mode": "direct", "fixed_duration_ns": 5_000_000}
    return result(run_checks(CHILD + BEHIND, enable, env=env), "copies_behind_a_long_kernel")


def test_an_async_copy_queued_behind_a_kernel_leaves_the_kernel_its_device_time(behind):
    """MSPTI writes a copy's record with the ACL call's host span (mspti.md 5.7), which for an async copy
    lies inside the kernel it queued behind. The kernel keeps its whole 5 ms; the copy follows it."""
    rows = behind["rows"]
    names = [name for name, _, _ in rows]
    assert names == ["MatMulV2", "Memcpy HtoD (Host -> Device)"] * 3, names
    for (_, ts, dur), (_, copy_ts, _) in zip(rows[0::2], rows[1::2], strict=True):
        assert dur == pytest.approx(5000.0, abs=0.01)
        assert copy_ts >= ts + dur - 0.002  # µs, with the float rounding of the trace's timestamps
    assert behind["matmul_device_us"] == [pytest.approx(15000.0, abs=0.1)]


@pytest.fixture(scope="module", params=["direct", "queued"])
def preloaded(request):
    require_simulator()
    env = {"LD_PRELOAD": simulator_library_path()}
    r = run_checks(CHILD + STEP, {"device_count": 2, "launch_mode": request.param}, env=env)
    return request.param, result(r, "copy_step")


@pytest.fixture(scope="module")
def plain():
    require_simulator()
    return result(run_checks(CHILD + TWICE, {"device_count": 2, "launch_mode": "direct"}), "no_preload_twice")


def _ranges(t: dict) -> dict[str, dict]:
    return {o["name"]: o for o in t["ops"].values() if o["cat"] == "user_annotation"}


def _op(t: dict, row: dict) -> dict | None:
    eid = row["args"].get("External id")
    return t["ops"].get(str(eid)) if eid is not None else None


def _copies_in(t: dict, rng: dict) -> list[dict]:
    """The copy rows whose linked op lies inside the host range ``rng``."""
    out = []
    for row in t["rows"]:
        op = _op(t, row)
        if row["cat"] == "gpu_memcpy" and op and rng["ts"] <= op["ts"] and op["end"] <= rng["end"]:
            out.append(row)
    return out


def test_every_copy_is_one_row_on_its_stream_lane_with_bytes_kind_and_bandwidth(preloaded):
    mode, t = preloaded
    copies = [r for r in t["rows"] if r["cat"] == "gpu_memcpy"]
    expected = Counter((name, size, kind) for name, size, kind, *_ in COPIES.values())
    got = Counter((r["name"], r["args"]["bytes"], r["args"]["copy kind"]) for r in copies)
    assert got == expected, (mode, got, expected)
    for r in copies:
        a = r["args"]
        assert (r["pid"], r["tid"]) == (a["device"], a["stream"]), r
        assert a["memory bandwidth (GB/s)"] == pytest.approx(a["bytes"] / (r["dur"] * 1e3), rel=1e-3), r
    if mode == "direct":  # which row is which: by its op, inside its range
        for rng_name, (name, size, _kind, device, stream, _) in COPIES.items():
            rows = _copies_in(t, _ranges(t)[rng_name])
            lane = (device, t["side_stream"] if stream == "side" else stream)
            assert [(r["name"], r["args"]["bytes"], (r["pid"], r["tid"])) for r in rows] == [(name, size, lane)], (
                rng_name,
                rows,
            )


def test_copies_are_linked_to_the_op_instance_that_issued_them(preloaded):
    mode, t = preloaded
    if mode == "queued":
        # The task-queue thread issues the copies after their ops returned: no op owns them, so none
        # is credited (MSPTI's hint would name whichever op is open on another thread then).
        copies = [r for r in t["rows"] if r["cat"] == "gpu_memcpy"]
        assert len(copies) == len(COPIES), copies
        for row in copies:
            assert row["args"]["link"] == "no_op_on_thread" and _op(t, row) is None, row["args"]
        return
    for rng_name, (*_, op_name) in COPIES.items():
        rng = _ranges(t)[rng_name]
        (row,) = _copies_in(t, rng)
        op = _op(t, row)
        assert op["name"] == op_name and row["args"]["link"] == "verified", (rng_name, op, row["args"])
        # The op instance of this range (`.item()` nests two _local_scalar_dense: the npu one issues the
        # copy after the CPU one it calls has returned, so either may be the innermost open op).
        assert rng["ts"] <= op["ts"] and op["end"] <= rng["end"] and op["tid"] == rng["tid"], (rng_name, op, rng)
    # Copies launch no kernel: the only kernel of the step is the sum's.
    kernels = [r["name"] for r in t["rows"] if r["cat"] == "kernel" and _op(t, r)]
    assert kernels == ["ReduceSum"], kernels


def test_copy_rows_count_in_device_time_like_kernels(preloaded):
    mode, t = preloaded
    rows = t["rows"]
    device = [e for e in t["events"] if not e["is_user_annotation"]]
    as_rows = Counter((r["name"], round(r["dur"], 3)) for r in rows)
    assert Counter((e["name"], round(e["dur"], 3)) for e in device) == as_rows, mode
    total = sum(r["dur"] for r in rows)
    averaged = sum(a["self_device"] for a in t["averages"] if a["device_type"] != "DeviceType.CPU")
    averaged -= sum(a["self_device"] for a in t["averages"] if a["is_user_annotation"])
    assert averaged == pytest.approx(total, abs=0.01)
    assert t["table_total"] == pytest.approx(total, abs=t["table_tol"])
    # Each linked copy is in its op's own device time, and in nothing else's.
    for r in rows:
        if r["cat"] != "gpu_memcpy" or "External id" not in r["args"]:
            continue
        host = t["host_events"][str(r["args"]["External id"])]
        assert (r["name"], r["args"]["device"]) in {(k[0], k[1]) for k in host["kernels"]}, (r, host)
        assert host["self_device"] == pytest.approx(sum(k[2] for k in host["kernels"]), abs=0.01)
    if mode == "direct":
        linked = sum(r["dur"] for r in rows if r["cat"] == "gpu_memcpy")
        assert sum(h["self_device"] for h in t["host_events"].values() if h["name"] in ("aten::copy_", "aten::_local_scalar_dense")) == pytest.approx(linked, abs=0.01)  # fmt: skip


def test_with_the_preload_the_drain_gets_every_copy_and_reports_the_capability(preloaded):
    mode, t = preloaded
    s = t["session"]
    assert s["drain"]["exit_reason"] == "balanced" and s["drain"]["pending_launches"] == 0, s["drain"]
    # queued: the launches come from the task-queue thread, which the plugin says once
    assert s["warnings"] == (["task-queue"] if mode == "queued" else []), s["warnings"]
    assert s["records_by_kind"]["MEMCPY"] == len(COPIES), s["records_by_kind"]
    assert {"MEMCPY", "MEMSET"} <= set(s["enabled_kinds"]), s["enabled_kinds"]
    assert t["library"]["capabilities"]["memcpy_memset"] is True, t["library"]
    assert "memcpy_memset" not in t["library"]["notes"], t["library"]


def test_without_the_preload_there_are_no_copy_rows_and_the_reason_is_given_once(plain):
    first, second = plain
    for t in plain:
        assert not [r for r in t["rows"] if r["cat"] in ("gpu_memcpy", "gpu_memset")], t["rows"]
        assert "MEMCPY" not in t["session"]["records_by_kind"] and "MEMCPY" not in t["session"]["enabled_kinds"]
        note = t["library"]["notes"].get("memcpy_memset", "")
        assert t["library"]["capabilities"]["memcpy_memset"] is False
        assert "LD_PRELOAD" in note and "process start" in note and "run with LD_PRELOAD=" in note, note
    # The warning (the note, with the number of copy calls) once per process, not once per profile.
    assert "copies" in first["session"]["warnings"], first["session"]["warnings"]
    assert "copies" not in second["session"]["warnings"], second["session"]["warnings"]


def test_without_the_preload_kernels_are_complete_and_linked(plain):
    for t in plain:
        s = t["session"]
        assert s["drain"]["exit_reason"] == "balanced" and s["drain"]["pending_launches"] == 0, s["drain"]
        linked = Counter((r["name"], _op(t, r)["name"]) for r in t["rows"] if _op(t, r))
        assert linked == Counter({("MatMulV2", "aten::mm"): 3, ("ReduceSum", "aten::sum"): 1}), linked
        assert all(r["args"]["link"] == "verified" for r in t["rows"] if _op(t, r))


# ------------------------------------------------------------------------------------------ demo


def _demo_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TORCH_MSPTI_PRELOAD_RESTARTED")}
    return dict(env, TORCH_DEVICE_BACKEND_AUTOLOAD="1", OMP_NUM_THREADS="1")


@pytest.mark.parametrize("memcpy", [True, False])
def test_demo_memcpy_restarts_with_the_preload_and_shows_the_copies(tmp_path, memcpy):
    require_simulator()
    out = tmp_path / "trace.json"
    cmd = [sys.executable, "-m", "torch_mspti_cli", "demo", "--device", "sim", "--size", "32", "--out", str(out)]
    proc = subprocess.run(cmd + (["--memcpy"] if memcpy else []), capture_output=True, text=True, timeout=300,
                          env=_demo_env(), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = json.loads(out.read_text())["traceEvents"]
    copies = Counter(e["args"]["copy kind"] for e in events if e.get("cat") == "gpu_memcpy")
    restarted = "restarting with LD_PRELOAD=" in proc.stdout
    if not memcpy:
        assert not restarted and not copies, (proc.stdout, copies)
        return
    assert restarted and simulator_library_path() in proc.stdout, proc.stdout
    # the 'copy' phase: one HtoD of the host matrix (32 x 32 floats), one DtoH of the sum
    assert copies == Counter({"HtoD": 1, "DtoH": 1}), copies
    sizes = sorted(e["args"]["bytes"] for e in events if e.get("cat") == "gpu_memcpy")
    assert sizes == [F32, 32 * 32 * F32], sizes
    line = next(ln for ln in proc.stdout.splitlines() if ln.strip().startswith("copies"))
    assert "2 memcpy (DtoH 1, HtoD 1)" in line, line


def test_demo_help_documents_memcpy():
    proc = subprocess.run([sys.executable, "-m", "torch_mspti_cli", "demo", "--help"], capture_output=True, text=True)
    text = " ".join(proc.stdout.split())
    assert "--memcpy" in text and "LD_PRELOAD" in text and "restarts" in text, text
