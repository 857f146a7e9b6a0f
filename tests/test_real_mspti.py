"""The real-MSPTI tier: the simulated NPU over Huawei's real libmspti.so and a fake CANN layer.

``torch_mspti.sim.enable(cann_root=ROOT)`` reports every kernel launch of the simulated device to
the fake CANN layer of ROOT (laid out by the fixture's ``make_root.sh``), which hands it to the real
MSPTI that the plugin reads (src/sim/device/README.md, "Real MSPTI"). The fixture is found at
``$TORCH_MSPTI_REALMSPTI_DIR``, else ``<repo>/../shared/realmspti``; without it every test skips.

Ground truth per launch: the fake layer logs every launch it sees (``FAKECANN_TRACE=1``: stream,
task id, kernel, launching thread). The child marks each profiling window in that log (after the
window opened and before it closes, with the launch queue drained), so the launches of a window
are exactly the kernels its trace must hold; the device's own kernel counter must agree. Each
kernel must arrive once, with its launch event on the launching thread and an arrow. In direct
mode the kernels named ``K<n>`` (``torch.ops.npu_sim.launch_kernel``, whose RecordFunction named
after the kernel is the op instance of call n) are also audited against their op instance
(tests/op_links.py). Queued mode: the task-queue worker runs no op, so today its kernels are
``no_op_on_thread`` (the documented behaviour); only arrival, launch events and arrows are asserted.

Each scenario runs with the fake device handing its records over at once and 200 ms late
(``FAKECANN_DEVICE_DELAY_MS``), where MSPTI's Disable drops records its reader thread has not yet
parsed: the "0 kernels lost" assertions then fail until the plugin's stop() accounts for that.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from op_links import LINKED_STATES, audit, state_problems
from sim_support import require_simulator, result, run_checks, run_once
from simrun import clean_environment, flow_events, flow_id, kernels, launches

from torch_mspti_cli.check import check_trace

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(os.environ.get("TORCH_MSPTI_REALMSPTI_DIR") or REPO.parent / "shared" / "realmspti")
DELAYS_MS = (0, 200)
MODES = ("direct", "queued")

_MISSING = f"real-MSPTI fixture not found at {FIXTURE} (set TORCH_MSPTI_REALMSPTI_DIR to the realmspti folder)"
if not (FIXTURE / "make_root.sh").is_file() and os.environ.get("TORCH_MSPTI_REQUIRE_REALMSPTI") == "1":
    # CI sets this (ci/build_and_test.sh): there the tier must run, never skip
    raise RuntimeError(_MISSING + "; TORCH_MSPTI_REQUIRE_REALMSPTI=1 asks for the real-MSPTI tier")
pytestmark = pytest.mark.skipif(not (FIXTURE / "make_root.sh").is_file(), reason=_MISSING)


@pytest.fixture(scope="session")
def cann_root(tmp_path_factory) -> str:
    """A CANN root made by the fixture's make_root.sh (compiles fakecann.c), once per xdist worker."""
    require_simulator()
    out = tmp_path_factory.mktemp("cann_root")
    proc = subprocess.run(
        ["bash", str(FIXTURE / "make_root.sh"), str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"make_root.sh failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip().splitlines()[-1]


def _env(delay_ms: int, out: Path) -> dict[str, str]:
    env = clean_environment()
    env.update(FAKECANN_DEVICE_DELAY_MS=str(delay_ms), FAKECANN_TRACE="1", FAKECANN_LOG="3", REAL_OUT=str(out))
    return env


# ------------------------------------------------------------------------------------- the child

HARNESS = r"""
import os, sys, threading, time
import torch_mspti
import torch.profiler.profiler as _pp
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch._C._profiler import _ExperimentalConfig
from torch_mspti.sim import workloads

ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
OUT = os.environ["REAL_OUT"]
sys.stderr.flush()
os.dup2(os.open(os.path.join(OUT, "fakecann.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)

# Profiling windows: the device's kernel counter and a mark in the fake layer's launch log, taken
# after the window opened and before it closes, with the launch queues drained (nothing in flight).
WINDOWS = []
_start, _stop = _pp._KinetoProfile.start_trace, _pp._KinetoProfile.stop_trace

def _kernels():
    return int(torch.ops.npu_sim.counters()[2])

def _start_trace(self):
    torch.ops.npu_sim.drain()
    _start(self)
    WINDOWS.append({"start": _kernels()})
    os.write(2, f"\n@@WINDOW {len(WINDOWS) - 1} start\n".encode())

def _stop_trace(self):
    torch.ops.npu_sim.drain()
    WINDOWS[-1]["stop"] = _kernels()
    os.write(2, f"\n@@WINDOW {len(WINDOWS) - 1} stop\n".encode())
    _stop(self)

_pp._KinetoProfile.start_trace, _pp._KinetoProfile.stop_trace = _start_trace, _stop_trace

def _session():
    return torch_mspti.diagnostics(load_library=False).to_dict()["last_session"]

def _export(prof, name):
    path = os.path.join(OUT, name + ".json")
    prof.export_chrome_trace(path)
    return {"trace": path, "window": len(WINDOWS) - 1, "session": _session()}

def _profile(name, fn, **kw):
    with profile(activities=ACT, **kw) as prof:
        fn()
        torch.npu.synchronize()
    return _export(prof, name)

def kn(first, count):
    for n in range(first, first + count):
        torch.ops.npu_sim.launch_kernel(f"K{n}", 0, 1000)

def check_settings():
    return torch_mspti.sim.settings()

def check_kn():
    kn(0, 5); torch.npu.synchronize()  # warm-up
    return [_profile("kn", lambda: kn(1000, 300))]

def check_aten():
    a = torch.randn(64, 64, device="npu"); b = torch.randn(64, 64, device="npu")
    def ops():
        for _ in range(20):
            torch.add(a, b); torch.mul(a, b); torch.sub(a, b)
    return [_profile("aten", ops)]

def check_steady():  # launches spread over 3x the device's hand-over delay, up to the stop
    def run():
        for n in range(7000, 7300):
            torch.ops.npu_sim.launch_kernel(f"K{n}", 0, 1000)
            time.sleep(0.002)
    return [_profile("steady", run)]

def check_sessions():
    return [_profile(f"session{i}", lambda i=i: kn(2000 + 100 * i, 100)) for i in range(3)]

def check_schedule():
    cycles = []
    step = [0]
    def ready(p):
        cycles.append(_export(p, f"cycle{len(cycles)}"))
    sched = schedule(wait=1, warmup=1, active=2, repeat=3)
    with profile(activities=ACT, schedule=sched, on_trace_ready=ready) as prof:
        for s in range(12):
            kn(3000 + 10 * s, 10)
            prof.step()
    return cycles

def check_threads():
    def worker(base):
        kn(base, 50)
    def run():
        ts = [threading.Thread(target=worker, args=(4000 + 100 * i,)) for i in range(4)]
        for t in ts:
            t.start()
        kn(4900, 50)
        for t in ts:
            t.join()
    return [_profile("threads", run, experimental_config=_ExperimentalConfig(profile_all_threads=True))]

def check_workloads():
    out = []
    for name, size in (("phases", 128), ("mlp", 64), ("transformer", 32)):
        before = len(WINDOWS)
        path = workloads.run(name, size=size, steps=2, out=os.path.join(OUT, f"demo_{name}.json"))
        assert len(WINDOWS) == before + 1, (name, before, len(WINDOWS))
        out.append({"trace": path, "window": len(WINDOWS) - 1, "session": _session(), "workload": name})
    return out

def check_mstx():
    mstx = torch.npu.mstx
    s = torch.npu.current_stream()
    def run():
        mstx.mark("host-mark")
        r = mstx.range_start("host-range")
        kn(5000, 3)
        mstx.range_end(r)
        mstx.mark("dom-mark", domain="train")
        r = mstx.range_start("dom-range", domain="train")
        mstx.range_end(r, domain="train")
        mstx.mark("stream-mark", stream=s)
        r = mstx.range_start("stream-range", stream=s)
        kn(5003, 3)
        mstx.range_end(r)
    return [_profile("mstx", run)]

def check_cap():
    torch_mspti.config.max_session_records = 300
    try:
        return [_profile("cap", lambda: kn(6000, 400))]
    finally:
        torch_mspti.config.max_session_records = 67108864

def _peer_takes_the_subscriber(out):
    # another MSPTI consumer right after the profile: it retries while MSPTI refuses it
    import ctypes
    lib = ctypes.CDLL(torch_mspti.sim.settings()["mspti_library"])
    out["release_after_stop"] = torch_mspti.diagnostics(load_library=False).to_dict()["plugin"]["release"]
    handle, refused = ctypes.c_void_p(), 0
    while (rc := lib.msptiSubscribe(ctypes.byref(handle), None, None)) == 2 and refused < 1000:
        refused += 1
        time.sleep(0.001)
    out["peer_subscribe"], out["peer_refused"] = rc, refused
    out["peer_unsubscribe"] = lib.msptiUnsubscribe(handle)
    return out

def check_release():
    # stop() hands MSPTI's Unsubscribe (about 1 s here: it joins a poller that waits out a 1 s
    # driver poll) to a thread of its own; another MSPTI consumer then gets the subscriber (MSPTI
    # makes its Subscribe wait, or refuses it while the Unsubscribe stops the device tasks).
    # With unsubscribe_at_stop, stop() unsubscribes itself: the consumer gets it at once.
    first = _peer_takes_the_subscriber(_profile("release0", lambda: kn(8000, 50)))
    torch_mspti.config.unsubscribe_at_stop = True
    try:
        second = _peer_takes_the_subscriber(_profile("release1", lambda: kn(8100, 50)))
    finally:
        torch_mspti.config.unsubscribe_at_stop = False
    return [first, second, _profile("release2", lambda: kn(8200, 50))]

def check_back_to_back():  # a profile started while the previous one's Unsubscribe still runs
    return [_profile(f"again{i}", lambda i=i: kn(8300 + 100 * i, 50)) for i in range(2)]

def check_windows():  # last: every window above
    return WINDOWS
"""

_LAUNCH = re.compile(r"\[fakecann\] launch dev (\d+) stream (\d+) task (\d+) (\S+) tid (\d+) switch 0x([0-9a-f]+)")
_WINDOW = re.compile(r"@@WINDOW (\d+) (start|stop)")


def launches_by_window(log: str) -> dict[int, list[dict]]:
    """The fake layer's launches inside each marked window (found anywhere in the text: its trace
    lines may share a line with another thread's)."""
    marks = [(m.start(), int(m.group(1)), m.group(2)) for m in _WINDOW.finditer(log)]
    found = [(m.start(), m) for m in _LAUNCH.finditer(log)]
    out: dict[int, list[dict]] = {}
    for i, (pos, window, what) in enumerate(marks):
        if what != "start":
            continue
        end = next(p for p, w, kind in marks[i + 1 :] if w == window and kind == "stop")
        out[window] = [
            {
                "stream": int(m.group(2)),
                "task": int(m.group(3)),
                "name": m.group(4),
                "tid": int(m.group(5)),
                "switch": int(m.group(6), 16),
            }
            for p, m in found
            if pos < p < end
        ]
    return out


def _run(cann_root: str, mode: str, delay: int, out: Path) -> dict:
    results = run_checks(HARNESS, {"cann_root": cann_root, "launch_mode": mode}, env=_env(delay, out), timeout=600)
    log = (out / "fakecann.log").read_text(errors="replace")
    launched = {str(k): v for k, v in launches_by_window(log).items()}
    return {"results": results, "launched": launched, "cann_root": cann_root}


@pytest.fixture(scope="module", params=[(m, d) for m in MODES for d in DELAYS_MS], ids=lambda p: f"{p[0]}-{p[1]}ms")
def child(request, tmp_path_factory, cann_root) -> dict:
    mode, delay = request.param
    data = run_once(tmp_path_factory, f"real_mspti_{mode}_{delay}", lambda out: _run(cann_root, mode, delay, out))
    data["mode"], data["delay"] = mode, delay
    return data


def _sessions(child: dict, check: str) -> list[dict]:
    out = []
    for s in result(child["results"], check):
        s = dict(s)
        s["path"] = s["trace"]
        s["trace"] = json.loads(Path(s["path"]).read_text())
        s["launched"] = child["launched"][str(s["window"])]
        out.append(s)
    return out


def assert_every_launch_arrived(s: dict, window: dict | None = None) -> None:
    """Every kernel the fake layer saw in the window is in the trace once, on its stream, with its
    launch event on the launching thread and an arrow from that event to the row; nothing else."""
    trace, launched = s["trace"], s["launched"]
    assert launched, "no launch in the window"
    assert all(x["switch"] for x in launched), "a launch in the window found MSPTI not collecting"
    rows = kernels(trace)
    want = Counter((x["name"], x["stream"]) for x in launched)
    got = Counter((k["name"], k["tid"]) for k in rows)
    lost, extra = want - got, got - want
    assert not lost, f"{sum(lost.values())} of {len(launched)} kernels lost: {sorted(lost)[:10]}"
    assert not extra, f"{sum(extra.values())} kernel rows no launch made: {sorted(extra)[:10]}"
    by_corr = {ev["args"]["correlation"]: ev for ev in launches(trace)}
    starts = {(f["id"], f["pid"], f["tid"], f["ts"]) for f in flow_events(trace, "s")}
    ends = {(f["id"], f["pid"], f["tid"], f["ts"]) for f in flow_events(trace, "f")}
    threads = Counter()
    for k in rows:
        cid = k["args"].get("correlation")
        launch = by_corr.get(cid)
        assert launch is not None, f"{k['name']}: no launch event with correlation {cid}"
        threads[(k["name"], launch["tid"])] += 1
        fid = flow_id(cid)
        assert (fid, launch["pid"], launch["tid"], launch["ts"]) in starts, f"{k['name']}: no arrow from its launch"
        assert (fid, k["pid"], k["tid"], k["ts"]) in ends, f"{k['name']}: no arrow to its row"
    assert threads == Counter((x["name"], x["tid"]) for x in launched), "launch events not on the launching threads"
    assert check_trace(trace).ok, check_trace(trace).to_dict()
    assert not state_problems(trace, s["session"]), state_problems(trace, s["session"])


def _op_credit(child: dict, s: dict, kn_only: bool = True) -> None:
    """Direct mode: each K<n> row points to the op instance that launched it (op_links.audit, with
    launch_kernel's RecordFunction K<n> as the instance of call n)."""
    trace = json.loads(json.dumps(s["trace"]))
    for e in trace["traceEvents"]:
        m = re.fullmatch(r"K(\d+)", e.get("name", ""))
        if m and e.get("cat") == "cpu_op":
            e.setdefault("args", {})["Concrete Inputs"] = [m.group(1)]
    res = audit(trace)
    launched_kn = [x for x in s["launched"] if re.fullmatch(r"K\d+", x["name"])]
    assert res.kernels == len(launched_kn), res.summary()
    assert not res.wrong and not res.problems, (res.summary(), res.wrong[:5], res.problems[:5])
    if child["mode"] == "direct":
        assert sum(res.states[st] for st in LINKED_STATES) == res.kernels, res.summary()
    else:  # today: the task-queue worker runs no op, so its launches are credited to none
        assert dict(res.states) == {"no_op_on_thread": res.kernels}, res.summary()


# ------------------------------------------------------------------------------------------ tests


def test_settings_report_the_real_mspti(child):
    s, cann_root = result(child["results"], "settings"), child["cann_root"]
    assert s["mspti"] == "real" and s["cann_root"] == cann_root, s
    assert s["mspti_library"] == os.path.join(cann_root, "lib64", "libmspti.so"), s
    assert s["device_count"] == 1 and s["launch_mode"] == child["mode"], s


@pytest.mark.parametrize("check", ["kn", "steady", "sessions", "schedule", "threads", "mstx"])
def test_every_launch_arrives_with_its_launch_event_and_arrow(child, check):
    for s in _sessions(child, check):
        assert_every_launch_arrived(s)


@pytest.mark.parametrize("check", ["kn", "steady", "sessions", "schedule", "threads"])
def test_each_kernel_points_to_the_op_instance_that_launched_it(child, check):
    for s in _sessions(child, check):
        _op_credit(child, s)


def test_schedule_gives_one_trace_per_cycle_each_with_its_own_kernels(child):
    cycles = _sessions(child, "schedule")
    assert len(cycles) == 3
    names = [sorted(k["name"] for k in kernels(c["trace"])) for c in cycles]
    assert all(len(n) == 20 for n in names), [len(n) for n in names]
    assert not set(names[0]) & set(names[1]) and not set(names[1]) & set(names[2])


def test_aten_ops_each_launch_their_own_kernel(child):
    (s,) = _sessions(child, "aten")
    assert_every_launch_arrived(s)
    if child["mode"] != "direct":
        return
    trace = s["trace"]
    for op, kernel in (("add", "Add"), ("mul", "Mul"), ("sub", "Sub")):
        ops = sorted((e for e in trace["traceEvents"] if e.get("name") == f"aten::{op}"), key=lambda e: e["ts"])
        # in launch order (MSPTI's correlation ids count launches): the fake device reports each kernel at its
        # launch + 1 us, overlapping the stream's earlier ones, so the lane repair may reorder their times
        ks = sorted((k for k in kernels(trace) if k["name"] == kernel), key=lambda k: k["args"]["correlation"])
        assert len(ops) == len(ks) == 20, (op, len(ops), len(ks))
        assert [k["args"].get("External id") for k in ks] == [o["args"]["External id"] for o in ops], kernel


@pytest.mark.parametrize("workload", ["phases", "mlp", "transformer"])
def test_demo_workloads_lose_no_kernel(child, workload):
    (s,) = [s for s in _sessions(child, "workloads") if s["workload"] == workload]
    assert_every_launch_arrived(s)
    if child["mode"] == "direct":  # every kernel an op launched is credited to an op; housekeeping is not
        for k in kernels(s["trace"]):
            linked = k["args"]["link"] in LINKED_STATES
            assert linked == (k["name"] != "MemSet"), k


def test_mstx_marks_and_ranges_reach_the_trace_by_message(child):
    (s,) = _sessions(child, "mstx")
    events = s["trace"]["traceEvents"]
    host = {e["name"]: e for e in events if e.get("cat") == "privateuse1_driver" and "marker id" in e.get("args", {})}
    device = {e["name"]: e for e in events if e.get("cat") == "gpu_user_annotation"}
    assert set(host) == {"host-mark", "host-range", "dom-mark", "dom-range", "stream-mark", "stream-range"}, host
    assert host["dom-mark"]["args"]["domain"] == "train" and host["host-mark"]["args"]["domain"] == "default"
    assert host["host-range"]["dur"] > 0 and host["host-mark"]["dur"] == 0
    # a stream given: MSPTI also puts the marker on the stream (aclrtProfTrace, the fake layer's TS_FW channel)
    assert set(device) == {"stream-mark", "stream-range"}, device
    # a mark on the stream's lane, a range on that stream's mstx lane
    lanes = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    assert device["stream-mark"]["tid"] == 1, device
    assert lanes[(device["stream-range"]["pid"], device["stream-range"]["tid"])] == "stream 1 mstx ranges", device
    markers = s["session"]["markers"]
    assert (markers["unpaired_starts"], markers["unpaired_ends"]) == (0, 0), markers


def test_the_session_cap_keeps_whole_launches(child):
    (s,) = _sessions(child, "cap")
    session, trace = s["session"], s["trace"]
    assert session["dropped"]["over_cap"] > 0 and "over-cap" in session["warnings"], session["dropped"]
    # MSPTI delivered every kernel; those the cap dropped are counted (README), the rest are whole
    assert session["records_by_kind"]["KERNEL"] == len(s["launched"]) == 400, session["records_by_kind"]
    kept = kernels(trace)
    assert kept and session["records_by_kind"]["KERNEL"] - session["rows"]["kernels"] == 400 - len(kept)
    by_corr = Counter(ev["args"]["correlation"] for ev in launches(trace))
    assert Counter(k["args"]["correlation"] for k in kept) == by_corr, "a kept kernel without its launch event"


def test_the_device_counts_the_launches_the_fake_layer_saw(child):
    windows = result(child["results"], "windows")
    assert len(windows) == len(child["launched"]) >= 13, (len(windows), sorted(child["launched"]))
    for i, w in enumerate(windows):
        assert w["stop"] - w["start"] == len(child["launched"][str(i)]), (i, w)


# ------------------------------------------------------------------------ settings and refusals

REFUSALS = r"""
import os, torch_mspti, torch_mspti.sim as sim
ROOT = os.environ["REAL_ROOT"]

def _error(**kw):
    try:
        sim.enable(**kw)
    except Exception as exc:
        return [type(exc).__name__, str(exc)]
    return None

def check_two_devices():
    return _error(cann_root=ROOT, device_count=2)

def check_incomplete_root():
    return _error(cann_root=os.environ["REAL_EMPTY"])

def check_plugin_set_to_the_simulator():
    torch_mspti.use_library(torch_mspti.simulator_library())
    try:
        return _error(cann_root=ROOT)
    finally:
        torch_mspti.config.library_path = ""

def check_backend_untouched():
    return torch._C._get_privateuse1_backend_name()

def check_then_it_works():
    os.environ["TORCH_MSPTI_SIM_CANN_ROOT"] = ROOT
    sim.enable()
    s = sim.settings()
    return [s["mspti"], s["cann_root"], s["device_count"], os.environ["ASCEND_HOME_PATH"]]
"""


def test_bad_arguments_and_roots_are_refused_before_the_backend_is_renamed(cann_root, tmp_path):
    empty = tmp_path / "empty_root"
    (empty / "lib64").mkdir(parents=True)
    env = clean_environment()
    env.update(REAL_ROOT=cann_root, REAL_EMPTY=str(empty), FAKECANN_LOG="3")
    r = run_checks(REFUSALS, None, env=env)
    kind, text = result(r, "two_devices")
    assert kind == "ValueError" and "device_count must be 1" in text and "one device" in text, text
    kind, text = result(r, "incomplete_root")
    assert kind == "RuntimeError" and str(empty / "lib64" / "libmspti.so") in text and "make_root.sh" in text, text
    kind, text = result(r, "plugin_set_to_the_simulator")
    assert kind == "RuntimeError" and "libmspti_sim" in text and "Fix:" in text, text
    assert result(r, "backend_untouched") == "privateuseone"
    assert result(r, "then_it_works") == ["real", cann_root, 1, cann_root]


def test_a_bad_setting_gives_its_error_and_profiling_still_works(cann_root, tmp_path):
    env = _env(0, tmp_path)
    env.update(TORCH_MSPTI_BUFFER_SIZE="12345", TORCH_MSPTI_SIM_CANN_ROOT=cann_root, FAKECANN_TRACE="0")
    code = (
        "import torch, torch_mspti, torch_mspti.sim as sim\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "sim.enable(launch_mode='direct')\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:\n"
        "    torch.ops.npu_sim.launch_kernel('K1', 0, 1000); torch.npu.synchronize()\n"
        "print('KERNELS', sum(1 for e in p.events() if e.name == 'K1' and e.device_type != torch.autograd.DeviceType.CPU))\n"
        "print('BUFFER', torch_mspti.config.buffer_size)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TORCH_MSPTI_BUFFER_SIZE" in proc.stderr + proc.stdout and "12345" in proc.stderr + proc.stdout
    assert "KERNELS 1" in proc.stdout and "BUFFER 8388608" in proc.stdout, proc.stdout


@pytest.mark.parametrize("how", ["option", "environment"])
def test_the_demo_runs_over_the_real_mspti(cann_root, tmp_path, how):
    env = _env(0, tmp_path)
    env["FAKECANN_TRACE"] = "0"
    argv = ["demo", "--workload", "mlp", "--size", "64", "--out", str(tmp_path / "t.json")]
    if how == "option":
        argv += ["--cann-root", cann_root]
    else:
        env["TORCH_MSPTI_SIM_CANN_ROOT"] = cann_root
    proc = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", *argv], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert f"the real MSPTI {cann_root}/lib64/libmspti.so" in proc.stdout, proc.stdout
    trace = json.loads((tmp_path / "t.json").read_text())
    rows = kernels(trace)
    assert rows and check_trace(trace).ok
    # the only unlinked rows are the allocator's MemSets, which no op launches (the README's note)
    unlinked = [k for k in rows if k["args"]["link"] not in LINKED_STATES]
    assert all(k["name"] == "MemSet" and k["args"]["link"] == "no_op_on_thread" for k in unlinked), unlinked[:3]
    proc = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "demo", "--workload", "ddp", "--cann-root", cann_root],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2 and "collectives" in proc.stderr, proc.stderr


def test_stop_returns_before_msptis_unsubscribe_and_the_next_mspti_user_gets_the_subscriber(child):
    background, at_stop, after = _sessions(child, "release")
    # stop() left MSPTI's Unsubscribe to the release thread (usually still running when stop()
    # returned; the real call sometimes ends within a millisecond, so in_flight is not asserted) ...
    released = background["release_after_stop"]
    assert released["releases"] >= 1 and (released["in_flight"] or released["last_result"] == 0), released
    # ... and another consumer got the subscriber after it
    assert background["peer_subscribe"] == 0 and background["peer_unsubscribe"] == 0, background
    # unsubscribe_at_stop: nothing in flight after stop(), the consumer is never refused
    assert at_stop["release_after_stop"]["in_flight"] is False, at_stop["release_after_stop"]
    assert at_stop["release_after_stop"]["releases"] == released["releases"], at_stop["release_after_stop"]
    assert at_stop["peer_subscribe"] == 0 and at_stop["peer_refused"] == 0, at_stop
    for s in (background, at_stop, after):
        assert_every_launch_arrived(s)
        assert s["session"]["errors"] == [], s["session"]["errors"]


def test_a_profile_started_during_the_release_waits_for_it_and_loses_nothing(child):
    first, second = _sessions(child, "back_to_back")
    assert second["session"]["timings"]["release_wait_ms"] > 0, second["session"]["timings"]
    for s in (first, second):
        assert_every_launch_arrived(s)
        assert s["session"]["state"] == "processed" and s["session"]["errors"] == [], s["session"]
