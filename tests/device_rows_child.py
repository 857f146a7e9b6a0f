"""Child-side helpers for the device-row tests (test_copy_rows.py, test_device_lanes.py).

``CHILD`` is source text that sim_support.run_checks() puts in front of a test module's checks (the
simulated NPU is enabled first). ``finish(prof)`` turns one finished torch.profiler session into
plain data that the parent asserts on:

* ``rows``: the trace's device rows (cat kernel, gpu_memcpy, gpu_memset) and ``spans`` (cat
  gpu_user_annotation), each {name, cat, pid, tid, ts, dur, end, args};
* ``ops``: the host slices (cpu_op, user_annotation) by ``External id``: {name, cat, ts, end, tid};
* ``meta``: process_name / process_sort_index / thread_name metadata, ``device_properties``,
  ``distributed_info`` and the trace's own keys;
* ``events``: ``prof.events()`` device events {name, device_index, dur, self_device,
  is_user_annotation} and, per host op instance id, {name, self_device, device_total, kernels}
  (kernels as (name, device, duration));
* ``averages``: ``prof.key_averages()`` rows {key, device_type, is_user_annotation, self_device},
  and ``table_total``: the "Self NPU time total" (µs) torch prints under key_averages().table(),
  ``table_tol`` its rounding (µs);
* ``session``: ``torch_mspti.diagnostics()``'s last session, ``library``: capabilities and notes.
"""

CHILD = r"""
import ctypes, json, os, re, tempfile, threading, time
import torch_mspti
from torch.profiler import profile, ProfilerActivity, record_function
ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LIB = ctypes.CDLL(sim.settings()["simulator_library"], mode=os.RTLD_LOCAL)
_LIB.msptiSimSetOption.argtypes = [ctypes.c_char_p, ctypes.c_int64]

def set_sim_option(name, value):
    assert _LIB.msptiSimSetOption(name.encode(), int(value)) == 0, name

def _slice(e):
    return {"name": e["name"], "cat": e["cat"], "pid": e["pid"], "tid": e["tid"], "ts": e["ts"],
            "dur": e["dur"], "end": e["ts"] + e["dur"], "args": e.get("args", {})}

def trace_of(data):
    ev = data["traceEvents"]
    xs = [e for e in ev if e.get("ph") == "X"]
    meta = [{"name": e["name"], "pid": e["pid"], "tid": e.get("tid"), "args": e["args"]}
            for e in ev if e.get("ph") == "M" and e["name"] in ("process_name", "process_sort_index", "thread_name")]
    ops = {}
    for e in xs:
        if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {}):
            ops[e["args"]["External id"]] = {"name": e["name"], "cat": e["cat"], "ts": e["ts"],
                                             "end": e["ts"] + e["dur"], "tid": e["tid"], "pid": e["pid"]}
    return {
        "rows": [_slice(e) for e in xs if e.get("cat") in DEVICE_CATS],
        "spans": [_slice(e) for e in xs if e.get("cat") == "gpu_user_annotation"],
        "ops": ops,
        "meta": meta,
        "device_properties": data.get("deviceProperties"),
        "distributed_info": data.get("distributedInfo"),
        "keys": sorted(data),
    }

def _events(prof):
    device, host = [], {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            device.append({"name": e.name, "device_index": e.device_index, "dur": e.time_range.elapsed_us(),
                           "self_device": e.self_device_time_total, "is_user_annotation": bool(e.is_user_annotation)})
        else:
            host[e.id] = {"name": e.name, "self_device": e.self_device_time_total,
                          "device_total": e.device_time_total,
                          "kernels": [(k.name, k.device, k.duration) for k in e.kernels]}
    return device, host

def finish(prof, path=None):
    if path is None:
        path = tempfile.mktemp(suffix=".json")
        prof.export_chrome_trace(path)
    with open(path) as f:
        out = trace_of(json.load(f))
    out["events"], out["host_events"] = _events(prof)
    out["averages"] = [{"key": a.key, "device_type": str(a.device_type),
                        "is_user_annotation": bool(a.is_user_annotation), "self_device": a.self_device_time_total}
                       for a in prof.key_averages()]
    m = re.search(r"Self NPU time total: ([0-9.]+)(us|ms|s)", prof.key_averages().table(row_limit=1))
    scale = {"us": 1, "ms": 1e3, "s": 1e6}[m[2]] if m else None
    out["table_total"] = float(m[1]) * scale if m else None
    out["table_tol"] = 0.0006 * scale if m else None  # torch prints 3 decimals of its unit
    d = torch_mspti.diagnostics(load_library=False).to_dict()
    out["session"] = d["last_session"]
    out["library"] = {"capabilities": d["library"]["capabilities"], "notes": d["library"]["capability_notes"]}
    return out
"""
