"""What the simulated NPU reports to MSPTI besides kernels: copies (MEMCPY records, only with a
process-start LD_PRELOAD), runtime calls (API records sharing the thread's current correlation
id), collectives (npu_sim.launch_communication), plus cpu_alias, fork in queued mode and the
device properties. Each check runs in a child process (sim_support) that reads the simulator's
records directly through the MSPTI C API (ctypes), without the profiler plugin.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks, simulator_library_path

# A minimal MSPTI consumer for the child: subscribe, enable kinds, collect buffers, decode records.
RECORDER = r"""
import ctypes, os, struct, threading, time
import torch_mspti.sim as sim

KIND = {"KERNEL": 2, "API": 3, "MEMSET": 6, "MEMCPY": 7, "EXTERNAL_CORRELATION": 8, "COMMUNICATION": 9,
        "RUNTIME_API": 12}
_SIZE = {2: 56, 3: 48, 6: 56, 7: 56, 8: 24, 9: 72, 12: 48}
_BUFFER = 1 << 20
_REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                        ctypes.POINTER(ctypes.c_size_t))
_COMP = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)

def _text(ptr):
    return ctypes.string_at(ptr).decode() if ptr else None

class Recorder:
    def __init__(self):
        self.lib = ctypes.CDLL(sim.settings()["simulator_library"], mode=os.RTLD_LOCAL)
        self.lib.msptiSimGetCounter.restype = ctypes.c_uint64
        self.lib.msptiSimGetCounter.argtypes = [ctypes.c_char_p]
        self._lock = threading.Lock()
        self._buffers, self._chunks = {}, []
        self._req, self._comp = _REQ(self._request), _COMP(self._complete)  # kept alive: never unregistered
        assert self.lib.msptiActivityRegisterCallbacks(self._req, self._comp) == 0
        self.kinds = []

    def _request(self, buf, size, max_records):
        b = ctypes.create_string_buffer(_BUFFER)
        with self._lock:
            self._buffers[ctypes.addressof(b)] = b
        buf[0], size[0], max_records[0] = ctypes.addressof(b), _BUFFER, 0

    def _complete(self, buf, size, valid):
        if buf:
            with self._lock:
                self._chunks.append(ctypes.string_at(buf, valid))
                self._buffers.pop(buf, None)

    def counter(self, name):
        return int(self.lib.msptiSimGetCounter(name.encode()))

    def start(self, *kinds):
        self._chunks.clear()
        self.handle = ctypes.c_void_p()
        assert self.lib.msptiSubscribe(ctypes.byref(self.handle), None, None) == 0
        self.kinds = [KIND[k] for k in kinds]
        return [self.lib.msptiActivityEnable(k) for k in self.kinds]

    def stop(self):
        torch.npu.synchronize()
        deadline = time.time() + 10
        while sim.simulator_stats()["records_pending"] and time.time() < deadline:
            time.sleep(0.01)  # copies are not pulled by Disable: let the driver reader deliver them
        for k in self.kinds:
            self.lib.msptiActivityDisable(k)  # 26.1: pulls the device records of ended tasks
        self.lib.msptiUnsubscribe(self.handle)
        self.lib.msptiActivityFlushAll(1)
        out = {"kernels": [], "apis": [], "memcpys": [], "memsets": [], "comms": [], "externals": []}
        for data in self._chunks:
            off = 0
            while off < len(data):
                kind = struct.unpack_from("<i", data, off)[0]
                if kind == 2:
                    _, s, e, dev, st, cid, typ, name = struct.unpack_from("<iQQIIQQQ", data, off)
                    out["kernels"].append(dict(name=_text(name), start=s, end=e, device=dev, stream=st, id=cid))
                elif kind in (3, 12):
                    _, s, e, pid, tid, cid, name = struct.unpack_from("<iQQIIQQ", data, off)
                    out["apis"].append(dict(name=_text(name), start=s, end=e, tid=tid, id=cid))
                elif kind in (6, 7):
                    _, what, nbytes, s, e, dev, st, cid, is_async = struct.unpack_from("<iIQQQIIQB", data, off)
                    out["memcpys" if kind == 7 else "memsets"].append(
                        dict(kind=what, bytes=nbytes, start=s, end=e, device=dev, stream=st, id=cid,
                             is_async=is_async))
                elif kind == 9:
                    _, dt, count, dev, st, s, e, alg, name, comm, cid = struct.unpack_from("<iIQIIQQQQQQ", data, off)
                    out["comms"].append(dict(name=_text(name), alg=_text(alg), comm=_text(comm), dtype=dt,
                                             count=count, device=dev, stream=st, start=s, end=e, id=cid))
                elif kind == 8:
                    _, ek, eid, cid = struct.unpack_from("<iiQQ", data, off)
                    out["externals"].append(dict(kind=ek, external=eid, id=cid))
                else:
                    raise AssertionError(f"unexpected record kind {kind}")
                off += _SIZE[kind]
        return out

REC = Recorder()
"""

CHECKS = (
    RECORDER
    + r"""
def _warm():
    # The first allocation on each device launches a housekeeping MemSet kernel: get it over with.
    for d in range(torch.npu.device_count()):
        torch.empty(1, device=f"npu:{d}")
    torch.npu.synchronize()

def check_copies_are_dma_tasks_not_kernels():
    _warm()
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    kernels, tasks = sim.simulator_stats()["kernels_launched"], REC.counter("device_tasks")
    a = x.to("npu")              # HtoD
    b = torch.empty_like(a)
    b.copy_(a)                   # plain DtoD
    c = a.to("npu:1")            # DtoD to the other device
    back = c.cpu()               # DtoH
    value = a[1, 2].item()       # DtoH of one element
    torch.npu.synchronize()
    return {"kernels": sim.simulator_stats()["kernels_launched"] - kernels,
            "tasks": REC.counter("device_tasks") - tasks,
            "exact": bool(torch.equal(back, x)), "value": value}

def check_computing_copies_stay_kernels():
    _warm()
    x = torch.randn(8, 6)
    kernels = sim.simulator_stats()["kernels_launched"]
    a = x.to("npu", dtype=torch.float16)   # HtoD + Cast
    t = a.t().contiguous()                  # TransData
    h = a.float().cpu()                     # Cast, then DtoH
    torch.npu.synchronize()
    return {"kernels": sim.simulator_stats()["kernels_launched"] - kernels,
            "close": bool(torch.allclose(h, x.half().float()))}

def check_memcpy_records():
    _warm()
    enabled = REC.start("MEMCPY", "RUNTIME_API")
    x = torch.ones(256, 16, dtype=torch.float32)     # 16384 bytes
    a = x.to("npu")
    b = a.to("npu:1")
    h = b.half().cpu()                               # Cast on npu:1, then 8192 bytes DtoH
    v = a[0, 0].item()
    records = REC.stop()
    return {"enabled": enabled, "memcpys": records["memcpys"], "apis": records["apis"],
            "caller": threading.get_native_id()}

def check_no_memcpy_records_without_preload():
    _warm()
    enabled = REC.start("MEMCPY", "RUNTIME_API")
    torch.ones(64).to("npu").cpu()
    records = REC.stop()
    return {"enabled": enabled, "memcpys": len(records["memcpys"]),
            "copy_apis": [a["name"] for a in records["apis"] if a["name"].startswith("aclrtMemcpy")]}

def check_communication():
    _warm()
    REC.start("KERNEL", "COMMUNICATION", "RUNTIME_API")
    stream = torch.ops.npu_sim.communication_stream(0)
    x = torch.ones(4, device="npu")
    y = x * 2                                       # a kernel on the compute stream
    cid = torch.ops.npu_sim.launch_communication("hcom_allReduce__7_0_1", "RING", "hccl_world_group", 4, 1024, 0,
                                                 stream, 50000, "")
    torch.ops.npu_sim.launch_communication("hcom_broadcast__8_0_1", "RING", "hccl_world_group", 4, 16, 0, stream,
                                           1000, "HcclBroadcast")
    records = REC.stop()
    return {"stream": stream, "returned": cid, "comms": records["comms"], "apis": records["apis"],
            "kernels": records["kernels"], "caller": threading.get_native_id(),
            "pool": [torch.npu.Stream().stream_id for _ in range(8)]}

def check_runtime_calls():
    _warm()
    REC.start("KERNEL", "RUNTIME_API")
    x = torch.randn(64, 64, device="npu")
    for _ in range(20):
        x = x * 1.0001
    ev = torch.npu.Event()
    ev.record()
    ev.synchronize()
    torch.npu.current_stream().synchronize()
    big = torch.empty(8 << 20, dtype=torch.uint8, device="npu")     # 8 MiB: the pool grows
    small = torch.empty(16, device="npu")                           # fits: no runtime call
    del big
    torch.npu.empty_cache()
    torch.npu.synchronize()
    records = REC.stop()
    return {"apis": records["apis"], "kernels": records["kernels"], "caller": threading.get_native_id()}

def check_cpu_alias():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6).npu()
    view = base[1:, ::2]
    alias = torch.ops.npu_sim.cpu_alias(view)
    same = [str(alias.device), alias.data_ptr() == view.data_ptr(), list(alias.shape) == list(view.shape),
            alias.stride() == view.stride(), alias.storage_offset() == view.storage_offset(), alias.dtype == view.dtype]
    alias.mul_(-1)                                   # in place, through host memory
    flipped = bool(torch.equal(base.cpu()[1:, ::2], -torch.arange(24.0).reshape(4, 6)[1:, ::2]))
    keep = torch.ops.npu_sim.cpu_alias(torch.full((1000,), 7.0, device="npu"))
    [torch.empty(1000, device="npu").fill_(1.0) for _ in range(4)]   # reuse freed memory, if it were freed
    return {"same": same, "flipped": flipped, "kept": bool((keep == 7.0).all()),
            "cpu_passthrough": torch.ops.npu_sim.cpu_alias(torch.ones(2)).device.type}

def check_fork_in_queued_mode():
    import os, signal
    x = torch.randn(32, 32, device="npu")
    for _ in range(50):                              # the worker is busy when we fork
        x = x + 1
    pid = os.fork()
    if pid == 0:
        try:
            y = torch.ones(8, device="npu") * 3
            y = y + 1
            torch.npu.synchronize()
            ok = bool((y.cpu() == 4).all())
            ev = torch.npu.Event(); ev.record(); ev.synchronize()
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            torch.npu.synchronize()
            return {"exit": os.waitstatus_to_exitcode(status), "mode": torch.ops.npu_sim.launch_mode()}
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return {"exit": "hung", "mode": torch.ops.npu_sim.launch_mode()}

def check_device_properties():
    props = [torch.npu.get_device_properties(i) for i in range(torch.npu.device_count())]
    try:
        torch.npu.get_device_properties(torch.npu.device_count())
        error = None
    except RuntimeError as e:
        error = str(e)
    p = props[1]
    return {"names": [q.name for q in props], "name_of": torch.npu.get_device_name("npu:1"),
            "fields": [p.total_memory, p.cube_core_num, p.vector_core_num, p.L2_cache_size],
            "repr": repr(p), "error": error, "current": torch.npu.get_device_name()}
"""
)


@pytest.fixture(scope="module")
def preloaded():
    require_simulator()
    return run_checks(
        CHECKS, {"device_count": 2, "launch_mode": "queued"}, env={"LD_PRELOAD": simulator_library_path()}
    )


@pytest.fixture(scope="module")
def plain_queued():
    require_simulator()
    return run_checks(CHECKS, {"device_count": 2, "launch_mode": "queued", "housekeeping_every": 0})


@pytest.fixture(scope="module")
def plain_direct():
    require_simulator()
    return run_checks(CHECKS, {"device_count": 2, "launch_mode": "direct", "housekeeping_every": 0})


@pytest.mark.parametrize("mode", ["plain_queued", "plain_direct"])
def test_plain_copies_launch_no_kernel_but_run_as_dma_tasks(mode, request):
    v = result(request.getfixturevalue(mode), "copies_are_dma_tasks_not_kernels")
    assert v["kernels"] == 0, v
    assert v["tasks"] == 5, v  # HtoD, DtoD, DtoD (to npu:1), DtoH, DtoH (.item())
    assert v["exact"] and v["value"] == 6.0


def test_copies_that_compute_stay_kernels(plain_queued):
    v = result(plain_queued, "computing_copies_stay_kernels")
    assert v["kernels"] == 3, v  # Cast after the HtoD, TransData, Cast before the DtoH
    assert v["close"]


def test_with_the_preload_copies_are_memcpy_records_with_their_bytes(preloaded):
    v = result(preloaded, "memcpy_records")
    assert v["enabled"] == [0, 0], v["enabled"]
    got = [(m["kind"], m["bytes"], m["device"]) for m in v["memcpys"]]
    htod, dtod, dtoh = 2, 4, 3
    assert got == [(htod, 16384, 0), (dtod, 16384, 1), (dtoh, 8192, 1), (dtoh, 4, 0)], got
    assert all(m["is_async"] == 1 and m["end"] > m["start"] and m["id"] > 0 for m in v["memcpys"])
    # Each copy's API record carries its id; queued mode: the launch worker made the call.
    copies = [a for a in v["apis"] if a["name"] == "aclrtMemcpyAsync"]
    assert [a["id"] for a in copies] == [m["id"] for m in v["memcpys"]]
    assert {a["tid"] for a in copies} != {v["caller"]}
    # Blocking copies synchronize their stream from the calling thread.
    syncs = [a for a in v["apis"] if a["name"] == "aclrtSynchronizeStream"]
    assert syncs and {a["tid"] for a in syncs} == {v["caller"]}


def test_without_the_preload_there_are_no_memcpy_records(plain_queued):
    v = result(plain_queued, "no_memcpy_records_without_preload")
    assert v["enabled"] == [6, 0], v  # 26.1: Enable(MEMCPY) answers MSPTI_ERROR_WITHOUT_LD_PRELOAD
    assert v["memcpys"] == 0
    assert v["copy_apis"] == ["aclrtMemcpyAsync", "aclrtMemcpyAsync"], v


@pytest.mark.parametrize("mode", ["plain_queued", "plain_direct"])
def test_communication_launch(mode, request):
    v = result(request.getfixturevalue(mode), "communication")
    assert v["stream"] == 6
    assert 6 not in v["pool"], v["pool"]  # new streams never get the communication stream's id
    comms = v["comms"]
    assert [(c["name"], c["alg"], c["comm"], c["dtype"], c["count"], c["stream"]) for c in comms] == [
        ("hcom_allReduce__7_0_1", "RING", "hccl_world_group", 4, 1024, 6),
        ("hcom_broadcast__8_0_1", "RING", "hccl_world_group", 4, 16, 6),
    ]
    assert comms[0]["end"] - comms[0]["start"] == 50000
    apis = {a["name"]: a for a in v["apis"]}
    assert apis["HcclAllReduce"]["id"] == comms[0]["id"]
    assert apis["HcclBroadcast"]["id"] == comms[1]["id"]
    kernel_tid = apis["LaunchKernelV2"]["tid"]
    if mode == "plain_direct":
        assert v["returned"] == comms[0]["id"]
        assert apis["HcclAllReduce"]["tid"] == v["caller"]
    else:  # launched later by the worker thread, like the kernels
        assert v["returned"] == 0
        assert apis["HcclAllReduce"]["tid"] == kernel_tid != v["caller"]
    assert all(k["stream"] != 6 for k in v["kernels"])


@pytest.mark.parametrize("mode", ["plain_queued", "plain_direct"])
def test_runtime_calls_report_api_records_sharing_the_current_id(mode, request):
    v = result(request.getfixturevalue(mode), "runtime_calls")
    apis, caller = v["apis"], v["caller"]
    names = [a["name"] for a in apis]
    launches = [a for a in apis if a["name"] == "LaunchKernelV2"]
    launcher = launches[0]["tid"]
    assert (launcher == caller) == (mode == "plain_direct")
    # The event record is made by the launching thread when it reaches it; synchronize calls by
    # the caller, carrying the caller's current id (the last launch on that thread, or 0).
    record = [a for a in apis if a["name"] == "aclrtRecordEvent"]
    assert len(record) == 1 and record[0]["tid"] == launcher
    assert record[0]["id"] == max(a["id"] for a in launches if a["tid"] == launcher and a["end"] <= record[0]["start"])
    caller_ids = {a["id"] for a in launches if a["tid"] == caller}
    for name in ("aclrtSynchronizeEvent", "aclrtSynchronizeStream", "aclrtSynchronizeDevice"):
        calls = [a for a in apis if a["name"] == name]
        assert calls and all(a["tid"] == caller for a in calls), (name, calls)
        assert all(a["id"] in caller_ids | {0} for a in calls), (name, calls)
        if mode == "plain_direct":
            assert all(a["id"] == max(i for i in caller_ids) for a in calls if a["start"] > launches[-1]["end"])
    # The caching allocator: aclrtMalloc when the 8 MiB tensor outgrows the pool (not per tensor),
    # aclrtFree for each device whose pool empty_cache() shrinks.
    assert 1 <= names.count("aclrtMalloc") <= 2 and 1 <= names.count("aclrtFree") <= 2, names
    # Realistic volume: a few API records per launch, not one per tensor.
    assert len(apis) <= 2 * len(launches) + 10, names


def test_cpu_alias_shares_host_memory_and_keeps_it_alive(plain_queued):
    v = result(plain_queued, "cpu_alias")
    assert v["same"] == ["cpu", True, True, True, True, True]
    assert v["flipped"] and v["kept"] and v["cpu_passthrough"] == "cpu"


def test_forked_child_launches_and_synchronizes_in_queued_mode(plain_queued):
    v = result(plain_queued, "fork_in_queued_mode")
    assert v == {"exit": 0, "mode": "queued"}


def test_device_properties(plain_queued):
    v = result(plain_queued, "device_properties")
    assert v["names"] == ["Ascend910B3 (simulated)"] * 2
    assert v["name_of"] == v["current"] == "Ascend910B3 (simulated)"
    assert v["fields"] == [64 << 30, 20, 40, 192 << 20]
    assert "cube_core_num=20" in v["repr"]
    assert v["error"] and "invalid device index 2" in v["error"]
    assert "torch_mspti.sim.enable(device_count=N)" in v["error"], v["error"]  # the fix, not only the fault
