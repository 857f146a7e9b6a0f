"""mstx markers (torch.npu.mstx) in the trace, on the simulated NPU.

torch_npu's ``torch.npu.mstx.mark / range_start / range_end`` reach MSPTI as MARKER records
(docs/mspti.md 5.9). The trace keeps each one where it was made: a host mark or range on the lane
of the thread that made it, a range given a stream on that stream's lane as a
``gpu_user_annotation`` that adds no device time; message and domain as args; torch keeps the host
markers among its events without warning; ranges paired by id
across buffers, and what the window cut in half counted and kept as an instant. The health report
counts the records by domain.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks, run_child

KERNEL_NS = 200_000  # fixed_duration_ns: every kernel of the simulated NPU lasts exactly this

COMMON = r"""
import json, os, threading
from torch.profiler import profile, ProfilerActivity
ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
mstx = torch.npu.mstx

def _export(prof, name):
    path = os.path.join(OUT, name + ".json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        data = json.load(f)
    markers = [e for e in data["traceEvents"] if "marker id" in e.get("args", {})]
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    lanes = {f"{e['pid']}/{e['tid']}": e["args"]["name"] for e in data["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return {"path": path, "markers": markers, "kernels": kernels, "health": data.get("torch_mspti"), "lane_names": lanes}

def _device_totals(prof):
    # torch's own accounting: the device time key_averages gives the work (user annotations are
    # lengths, not work: torch leaves them out of its total), and the table's total line
    avg = prof.key_averages()
    work = {e.key: e.self_device_time_total for e in avg if e.self_device_time_total and not e.is_user_annotation}
    total = [l for l in avg.table().splitlines() if "NPU time total" in l]
    annotations = sorted(e.key for e in avg if e.is_user_annotation)
    return {"work": work, "total": total, "annotations": annotations}

def check_lanes():
    s = torch.npu.Stream()
    a = torch.randn(64, 64, device="npu")
    torch.npu.synchronize()
    worker = {}
    def other_thread():
        worker["tid"] = threading.get_native_id()
        r = mstx.range_start("worker-range")
        mstx.range_end(r)
    with profile(activities=ACT) as prof:
        r = mstx.range_start("host-step", domain="train")
        a + 1
        mstx.range_end(r, domain="train")
        mstx.mark("checkpoint")
        with torch.npu.stream(s):
            d = mstx.range_start("device-span", stream=s)
            a * 2
            a * 3
            mstx.range_end(d)
        t = threading.Thread(target=other_thread)
        t.start(); t.join()
        torch.npu.synchronize()
    out = _export(prof, "lanes")
    out.update(pid=os.getpid(), tid=threading.get_native_id(), worker_tid=worker["tid"], stream=s.stream_id,
               device_totals=_device_totals(prof))
    return out

def check_same_work_without_markers():
    s = torch.npu.Stream()
    a = torch.randn(64, 64, device="npu")
    torch.npu.synchronize()
    with profile(activities=ACT) as prof:
        a + 1
        with torch.npu.stream(s):
            a * 2
            a * 3
        torch.npu.synchronize()
    return {"device_totals": _device_totals(prof)}

def check_window_edges():
    a = torch.randn(8, device="npu")
    with profile(activities=ACT) as p1:
        across = mstx.range_start("spans-two-profiles")  # starts in the first window ...
        a + 1
        torch.npu.synchronize()
    first = _export(p1, "edges_first")
    with profile(activities=ACT) as p2:
        mstx.range_end(across)  # ... ends in the second
        late = mstx.range_start("ends-after")
        a + 1
        torch.npu.synchronize()
    second = _export(p2, "edges")
    mstx.range_end(late)  # MARKER is off: MSPTI writes nothing
    outside = mstx.range_start("outside")  # and answers MSTX_INVALID_ID
    return {"first": first, "second": second, "outside_id": outside, "path": second["path"]}

def check_crossing():
    # Ranges that do not nest: one started inside record_function A and ended inside B, two that
    # cross each other on the host, and a device range from inside one kernel's span to the next.
    s = torch.npu.Stream()
    a = torch.randn(64, 64, device="npu")
    torch.npu.synchronize()
    with profile(activities=ACT) as prof:
        with torch.profiler.record_function("A"):
            across = mstx.range_start("a-to-b")
            a + 1
        with torch.profiler.record_function("B"):
            a + 2
            mstx.range_end(across)
        first = mstx.range_start("first")
        second = mstx.range_start("second")
        a + 3
        mstx.range_end(first)
        a + 4
        mstx.range_end(second)
        with torch.npu.stream(s):
            d1 = mstx.range_start("dev-first", stream=s)
            a * 2
            d2 = mstx.range_start("dev-second", stream=s)
            a * 3
            mstx.range_end(d1)
            a * 4
            mstx.range_end(d2)
        torch.npu.synchronize()
    out = _export(prof, "crossing")
    out.update(tid=threading.get_native_id(), stream=s.stream_id)
    return out

def check_many_crossing():
    a = torch.randn(8, device="npu")
    with profile(activities=ACT) as prof:
        ids = []
        for i in range(12):
            ids.append(mstx.range_start(f"X{i}"))
            a + 1
        for r in ids:  # ended in the order they started: each crosses every later one
            mstx.range_end(r)
        torch.npu.synchronize()
    out = _export(prof, "many_crossing")
    out["tid"] = threading.get_native_id()
    return out

def check_many_buffers():
    a = torch.randn(8, device="npu")
    with profile(activities=ACT) as prof:
        for i in range(1500):  # 3000 records of 56 bytes: several 64 KiB buffers
            mstx.range_end(mstx.range_start(f"r{i}", domain="loop"))
        a + 1
        torch.npu.synchronize()
    return _export(prof, "buffers")
"""


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
    require_simulator()
    out = tmp_path_factory.mktemp("mstx")
    source = f"OUT = {str(out)!r}\nimport torch_mspti\ntorch_mspti.config.buffer_size = 65536\n" + COMMON
    return run_checks(source, {"launch_mode": "queued", "fixed_duration_ns": KERNEL_NS})


def lane_of(r, event):
    """The name of the lane an event is drawn on (thread_name metadata of the trace)."""
    return r["lane_names"].get(f"{event['pid']}/{event['tid']}")


def test_host_range_is_on_its_thread_lane_with_message_and_domain(marked):
    r = result(marked, "lanes")
    by_name = {e["name"]: e for e in r["markers"]}
    step = by_name["host-step"]
    assert step["ph"] == "X" and step["cat"] == "privateuse1_driver", step
    assert step["pid"] == r["pid"] and lane_of(r, step) == f"mstx ranges {r['tid']}", (step, r["lane_names"])
    assert step["dur"] > 0, step
    assert step["args"]["domain"] == "train", step
    mark = by_name["checkpoint"]
    assert (mark["ph"], mark["dur"]) == ("X", 0) and (mark["pid"], mark["tid"]) == (r["pid"], r["tid"]), mark
    assert mark["args"]["domain"] == "default", mark
    worker = by_name["worker-range"]
    assert worker["pid"] == r["pid"] and lane_of(r, worker) == f"mstx ranges {r['worker_tid']}", worker


def test_device_range_is_on_its_stream_lane_and_adds_no_device_time(marked):
    r = result(marked, "lanes")
    device = [e for e in r["markers"] if e["name"] == "device-span" and e.get("cat") == "gpu_user_annotation"]
    assert len(device) == 1, r["markers"]
    span = device[0]
    kernels_on_stream = [k for k in r["kernels"] if k["tid"] == r["stream"] and k["pid"] == span["pid"]]
    assert len(kernels_on_stream) == 2, r["kernels"]
    assert lane_of(r, span) == f"stream {r['stream']} mstx ranges", (span, r["lane_names"])
    # the span covers the two kernels launched inside it
    assert span["ts"] <= min(k["ts"] for k in kernels_on_stream) + 0.002, (span, kernels_on_stream)
    assert span["ts"] + span["dur"] >= max(k["ts"] + k["dur"] for k in kernels_on_stream) - 0.002
    # the host side of the same range is on the thread's range lane
    host = [e for e in r["markers"] if e["name"] == "device-span" and e.get("cat") == "privateuse1_driver"]
    assert len(host) == 1 and lane_of(r, host[0]) == f"mstx ranges {r['tid']}", r["markers"]
    # torch's accounting of the work is the same as for the same work without markers
    with_markers, without = r["device_totals"], result(marked, "same_work_without_markers")["device_totals"]
    assert with_markers["total"] == without["total"], (with_markers, without)
    assert with_markers["work"] == pytest.approx(without["work"], abs=1e-6), (with_markers, without)
    assert sum(with_markers["work"].values()) == pytest.approx(3 * KERNEL_NS / 1000, abs=0.01), with_markers
    assert "device-span" in with_markers["annotations"], with_markers


def test_health_report_counts_markers_by_domain(marked):
    h = result(marked, "lanes")["health"]
    # host-step in "train"; checkpoint, device-span (its host and its device side) and worker-range in
    # the default domain, whose name MSPTI writes as "default"
    assert h["markers_by_domain"] == {"train": 1, "default": 4}, h["markers_by_domain"]
    assert h["records_by_kind"]["MARKER"] == 9, h["records_by_kind"]
    assert h["markers"]["ranges"] == 4 and h["markers"]["marks"] == 1, h["markers"]
    assert h["markers"]["unpaired_starts"] == 0 and h["markers"]["unpaired_ends"] == 0, h["markers"]


def test_ranges_cut_by_the_window_are_counted_and_kept_as_instants(marked):
    r = result(marked, "window_edges")
    first, second = r["first"], r["second"]
    assert first["health"]["markers"]["unpaired_starts"] == 1, first["health"]["markers"]
    (cut,) = first["markers"]
    assert (cut["name"], cut["dur"], cut["args"]["unpaired"]) == ("spans-two-profiles", 0, "start"), cut
    h = second["health"]["markers"]
    assert h["unpaired_ends"] == 1 and h["unpaired_starts"] == 1 and h["ranges"] == 0, h
    kept = {e["args"]["unpaired"]: e for e in second["markers"]}
    assert set(kept) == {"start", "end"}, second["markers"]
    assert kept["start"]["name"] == "ends-after" and kept["start"]["dur"] == 0, kept
    # an end record has no message or domain (mspti.md 5.9)
    assert (kept["end"]["name"], kept["end"]["dur"], kept["end"]["args"]["domain"]) == ("mstx range end", 0, "unknown")
    assert second["health"]["markers_by_domain"] == {"unknown": 1, "default": 1}
    assert r["outside_id"] == 0


def test_ranges_pair_across_buffers(marked):
    r = result(marked, "many_buffers")
    h = r["health"]
    assert h["buffers"]["completed"] >= 3, h["buffers"]
    assert h["markers"]["ranges"] == 1500, h["markers"]
    assert h["markers"]["unpaired_starts"] == 0 and h["markers"]["unpaired_ends"] == 0, h["markers"]
    assert h["markers_by_domain"] == {"loop": 1500}, h["markers_by_domain"]
    spans = [e for e in r["markers"] if e["dur"] > 0]
    assert sorted(e["name"] for e in spans) == sorted(f"r{i}" for i in range(1500))


def test_torch_keeps_every_host_marker_without_a_warning(tmp_path):
    require_simulator()
    code = (
        "import torch, torch_mspti.sim as sim\nsim.enable()\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "a = torch.randn(8, device='npu')\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:\n"
        "    r = torch.npu.mstx.range_start('host-range'); a + 1; torch.npu.mstx.range_end(r)\n"
        "    torch.npu.mstx.mark('host-mark'); torch.npu.synchronize()\n"
        "names = [e.name for e in prof.events()]\n"
        "print('MARKERS', names.count('host-range'), names.count('host-mark'))\n"
    )
    proc = run_child(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # torch drops activities of its own types that it did not record, warning "Detected an event
    # which was likely passed to kineto" (docs/kineto.md 1.6): the markers must not be such
    assert "Detected an event" not in proc.stderr, proc.stderr[-3000:]
    assert "MARKERS 1 1" in proc.stdout, proc.stdout


def test_ranges_that_do_not_nest_are_drawn_whole_on_lanes_that_nest(marked):
    r = result(marked, "crossing")
    by = {(e["name"], e["cat"]): e for e in r["markers"]}
    host = r["tid"]
    # each range whole (a span, not cut), on its thread's or stream's mstx lanes
    for name in ("a-to-b", "first", "second", "dev-first", "dev-second"):
        assert any(n == name and e["dur"] > 0 for (n, _), e in by.items()), (name, r["markers"])
    assert lane_of(r, by[("a-to-b", "privateuse1_driver")]) == f"mstx ranges {host}", r["lane_names"]
    assert lane_of(r, by[("first", "privateuse1_driver")]) == f"mstx ranges {host}"
    # "second" starts inside "first" and ends after it: one lane further
    assert lane_of(r, by[("second", "privateuse1_driver")]) == f"mstx ranges {host} (2)"
    assert lane_of(r, by[("dev-first", "gpu_user_annotation")]) == f"stream {r['stream']} mstx ranges"
    assert lane_of(r, by[("dev-second", "gpu_user_annotation")]) == f"stream {r['stream']} mstx ranges (2)"


def test_many_crossing_ranges_take_as_many_lanes_as_they_need(marked):
    # Twelve ranges, each crossing every later one: twelve levels, and every lane still nests.
    r = result(marked, "many_crossing")
    levels = sorted(lane_of(r, e) for e in r["markers"] if e["name"].startswith("X"))
    assert levels == sorted([f"mstx ranges {r['tid']}"] + [f"mstx ranges {r['tid']} ({n})" for n in range(2, 13)]), (
        levels
    )


@pytest.mark.parametrize("name", ["lanes", "window_edges", "many_buffers", "crossing", "many_crossing"])
def test_torch_mspti_check_accepts_traces_with_markers(marked, name):
    path = result(marked, name)["path"]
    proc = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "check", path], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(Path(path).read_text())["torch_mspti"]["markers"]


DOMAINS = r"""
import json, os
import torch_mspti
from torch.profiler import profile, ProfilerActivity
ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
mstx = torch.npu.mstx

def _profile(setting):
    torch_mspti.config.marker_domains = setting
    a = torch.randn(8, device="npu")
    with profile(activities=ACT) as prof:
        mstx.mark("in-train", domain="train")
        mstx.mark("in-noise", domain="noise")
        mstx.mark("in-default")
        a + 1
        torch.npu.synchronize()
    path = os.path.join(OUT, f"domains{len(os.listdir(OUT))}.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        data = json.load(f)
    torch_mspti.config.marker_domains = ""
    return {"marks": sorted(e["name"] for e in data["traceEvents"] if "marker id" in e.get("args", {})),
            "health": data["torch_mspti"]}

def check_domains():
    return {"exclude": _profile("exclude: noise"), "after": _profile(""), "include": _profile("include:train,default")}
"""


def _domains_run(tmp_path_factory, generation):
    require_simulator()
    out = tmp_path_factory.mktemp(f"domains_{generation}")
    lib = subprocess.run(
        [sys.executable, "-c", f"import torch_mspti; print(torch_mspti.simulator_library({generation!r}))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()[-1]
    source = f"OUT = {str(out)!r}\n" + DOMAINS
    return result(run_checks(source, {}, env={"TORCH_MSPTI_LIBRARY": lib}), "domains")


def test_marker_domains_exclude_and_include_switch_msptis_domains(tmp_path_factory):
    r = _domains_run(tmp_path_factory, "26.1")
    exclude = r["exclude"]
    # the excluded domain was switched off in the library: MSPTI wrote no record of it
    assert exclude["marks"] == ["in-default", "in-train"], exclude["marks"]
    assert exclude["health"]["records_by_kind"]["MARKER"] == 2, exclude["health"]["records_by_kind"]
    md = exclude["health"]["marker_domains"]
    assert md["setting"] == "exclude:noise" and md["applied"] is True, md
    # switched on again at stop: the next session without the setting gets every domain
    assert r["after"]["marks"] == ["in-default", "in-noise", "in-train"], r["after"]["marks"]
    assert r["after"]["health"]["marker_domains"] == {"setting": "", "applied": True, "note": ""}
    include = r["include"]
    assert include["marks"] == ["in-default", "in-train"], include["marks"]
    assert include["health"]["markers"]["not_included"] == 1, include["health"]["markers"]
    assert include["health"]["markers_by_domain"] == {"default": 1, "train": 1}
    assert include["health"]["marker_domains"]["applied"] is True


def test_marker_domains_on_a_library_without_the_domain_functions_is_reported_not_applied(tmp_path_factory):
    r = _domains_run(tmp_path_factory, "8.2")  # MSPTI before CANN 8.3: no Enable/DisableMarkerDomain
    exclude = r["exclude"]
    md = exclude["health"]["marker_domains"]
    assert md["applied"] is False and "cannot be applied" in md["note"], md
    assert "msptiActivityDisableMarkerDomain" in md["note"], md
    assert exclude["marks"] == ["in-default", "in-noise", "in-train"], exclude["marks"]
    assert r["include"]["marks"] == ["in-default", "in-noise", "in-train"], r["include"]["marks"]
    assert r["include"]["health"]["markers"]["not_included"] == 0
