"""The PrivateUse1 kernels of torch's c10d ops for the simulated ``hccl`` backend (see :mod:`.hccl`,
which registers them; the communicators they run on are :mod:`.hccl_comms`).

Each kernel has the schema of its c10d op (``torch.ops.c10d.<op>``): it opens the collective's host range,
launches the device record (:func:`_launch`), starts the gloo transfer on CPU aliases of the npu tensors
and returns a boxed Work. Defaults of trailing arguments are omitted by the dispatcher, hence the
keyword defaults.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist

from . import hccl_model
from .hccl_comms import Communicator, communicators, link_model
from .hccl_model import COLLECTIVES, Collective

__all__ = ["KERNELS", "UNSUPPORTED"]


def _communicator(pg_obj) -> Communicator:
    pg = dist.ProcessGroup.unbox(pg_obj)
    try:
        return communicators()[pg.group_name]
    except KeyError:
        raise RuntimeError(
            f"process group {pg.group_name!r} has npu tensors but was not created by the simulated hccl "
            "backend; create it with backend='hccl' (or 'cpu:gloo,npu:hccl')"
        ) from None


def _cpu_alias(t: torch.Tensor) -> torch.Tensor:
    return torch.ops.npu_sim.cpu_alias(t)  # a CPU tensor over the npu tensor's host memory


def _device(tensors: Sequence[torch.Tensor]) -> torch.device:
    devices = {t.device for t in tensors}
    if len(devices) != 1 or next(iter(devices)).type != "npu":
        raise RuntimeError(
            f"the simulated hccl backend needs all tensors of a collective on one npu device, got {sorted(map(str, devices))}"
        )
    return next(iter(devices))


def _single(tensors: Sequence[torch.Tensor], what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise RuntimeError(
            f"the simulated hccl backend takes one tensor per {what} (one device per process), got {len(tensors)}"
        )
    return tensors[0]


# gloo has no int16, unsigned types beyond uint8 nor float8; moving their bytes as a supported type of the
# same size is exact (gloo copies those bytes; only reductions compute on them).
_SAME_SIZE = {1: torch.uint8, 2: torch.float16, 4: torch.int32, 8: torch.int64}
_GLOO_TYPES = {
    torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
    torch.float64, torch.bool,
}  # fmt: skip


def _wire(t: torch.Tensor, reduces: bool) -> torch.Tensor:
    """CPU alias of ``t`` in a dtype gloo can move (same bytes); reductions need gloo's own dtype."""
    a = _cpu_alias(t)
    if t.dtype not in _GLOO_TYPES:
        if reduces:
            raise RuntimeError(
                f"the simulated hccl backend cannot reduce {t.dtype} tensors (gloo, which moves its data, has no "
                "such type); reduce a wider dtype (e.g. int32, float32)"
            )
        a = a.view(_SAME_SIZE[t.element_size()])
    return a


def _reduce_op(op_obj, dtype: torch.dtype) -> dist.ReduceOp:
    # op_obj is a TorchScript c10d.ReduceOp; torch 2.7's has no op() method, so the device reads it.
    value = int(torch.ops.npu_sim.reduce_op_value(op_obj))
    red = dist.ReduceOp.RedOpType(value)
    if red == dist.ReduceOp.RedOpType.PREMUL_SUM:
        raise RuntimeError(
            "the simulated hccl backend does not support ReduceOp.PREMUL_SUM (its factor is not visible to it); "
            "scale the tensor and use SUM"
        )
    if red == dist.ReduceOp.RedOpType.SUM and dtype == torch.bool:
        red = dist.ReduceOp.RedOpType.MAX  # HCCL: bool SUM is a logical or
    return dist.ReduceOp(red)


def _timeout(opts, timeout_ms: int):
    if timeout_ms is not None and timeout_ms >= 0:
        opts.timeout = datetime.timedelta(milliseconds=timeout_ms)
    return opts


def _launch(comm: Communicator, coll: Collective, t: torch.Tensor, count: int, peer: int | None = None) -> None:
    """The device side of one collective: a COMMUNICATION record on the device's communication stream, inside
    the ``"communication"`` mstx range torch_npu opens around its HCCL call (docs/torch_npu.md 5). ``peer``:
    the other rank of a send or receive, in the group."""
    device = t.device.index if t.device.index is not None else torch.npu.current_device()
    name = hccl_model.op_name(coll, comm.comm_name, comm.next_index())
    duration = link_model().duration_ns(coll, count, t.element_size(), comm.size)
    ops = torch.ops.npu_sim
    stream = int(ops.communication_stream(device))
    message = hccl_model.mstx_message(
        coll, comm.comm_name, t.dtype, comm.size if coll.pattern == "spread" else count, stream,
        src_rank=peer if coll.c10d_name == "recv" else None, dst_rank=peer if coll.c10d_name == "send" else None,
    )  # fmt: skip
    ops.launch_communication(
        name, hccl_model.ALG_TYPE, comm.comm_name, hccl_model.data_type(t.dtype), int(count), device, stream,
        duration, coll.api, message,
    )  # fmt: skip


def _host_range(coll: Collective):
    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)  # an op-scope range, as RECORD_FUNCTION
    return fast(coll.host_op) if fast is not None else torch.autograd.profiler.record_function(coll.host_op)


def _future_of(gloo_work) -> torch.futures.Future:
    try:
        return gloo_work.get_future()
    except RuntimeError:  # some gloo works (reduce_scatter_tensor, send, ...) have no future: wait on a thread
        fut = torch.futures.Future()

        def wait_then_complete() -> None:
            try:
                gloo_work.wait()
            except Exception as exc:
                fut.set_exception(exc)
                return
            fut.set_result(None)

        threading.Thread(target=wait_then_complete, name=_WAIT_THREAD, daemon=True).start()
        return fut


# Works whose completion (a Python callback, run on gloo's thread) has not finished yet. Such a callback
# must not start while the interpreter finalises: the thread would need the GIL then, and CPython ends a
# thread that asks for it at that point, which in gloo's C++ thread is std::terminate (SIGABRT at exit).
# So the interpreter's exit waits for them first (wait_for_pending_works, registered with atexit).
_pending_lock = threading.Lock()
_pending: set[int] = set()
_WAIT_THREAD = "hccl-sim-wait"  # a thread that waits for one gloo Work and completes its future
_EXIT_GRACE_S = 0.05
_EXIT_WAIT_S = 10.0  # a transfer whose peer is gone never completes: exit anyway after this long


def wait_for_pending_works(timeout_s: float = _EXIT_WAIT_S) -> int:
    """Wait until every started collective has completed (its Work's callbacks included), at most
    ``timeout_s`` seconds; returns how many are still pending. Registered with atexit by :func:`hccl.register`."""
    deadline = time.monotonic() + timeout_s
    while True:
        with _pending_lock:
            left = len(_pending)
        if left == 0 or time.monotonic() >= deadline:
            break
        time.sleep(0.002)
    # A Work's last callback may have run on one of our waiting threads, which is still returning
    # through C++ (set_result) and takes the GIL once more: a daemon thread that asks for it while
    # the interpreter finalises is ended by pthread_exit inside C++ frames, and that is
    # std::terminate too. So the waiting threads are joined as well.
    for thread in threading.enumerate():
        if thread.name == _WAIT_THREAD and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    # gloo's own threads, after a callback returned, still drop their reference to it, which takes
    # the GIL: a short grace lets them do so before finalisation begins (CI saw one such abort in
    # a test run on a loaded 2-core machine).
    if left == 0:
        time.sleep(_EXIT_GRACE_S)
    return left


def _work(gloo_works: list, value: list[torch.Tensor], device: torch.device, after=None):
    """A c10d Work that completes (value = the npu tensors) when all gloo transfers have finished."""
    fut = torch.futures.Future(devices=[device])
    key = id(fut)
    with _pending_lock:
        _pending.add(key)

    def done(all_done) -> None:
        try:
            for f in all_done.value():
                f.value()
            if after is not None:
                after()
        except Exception as exc:  # a transfer failed: the Work's wait() raises it
            fut.set_exception(exc)
            return
        else:
            fut.set_result(value)
        finally:
            with _pending_lock:
                _pending.discard(key)

    torch.futures.collect_all([_future_of(w) for w in gloo_works]).add_done_callback(done)
    return torch._C._distributed_c10d._create_work_from_future(fut).boxed()


def _run(comm, coll: Collective, parts, value: list[torch.Tensor], after=None, peer: int | None = None):
    """For each (tensor, count, start) part: launch its device record inside the collective's host range,
    then start its gloo transfer. One Work covers all parts; ``after()`` runs once they are done. ``peer``:
    the other rank of a send or receive."""
    comm.note_call()  # one c10d call, however many HCCL calls it makes (ProcessGroupHCCL's seq_)
    works = []
    for t, count, start in parts:
        with _host_range(coll):
            _launch(comm, coll, t, count, peer)
            works.append(start())
    return _work(works, value, parts[0][0].device, after)


# ------------------------------------------------------------------------------------------ kernels


def allreduce_(tensors, process_group, reduce_op, sparse_indices=None, async_op=True, timeout=-1):
    if sparse_indices is not None:
        raise RuntimeError("the simulated hccl backend does not support sparse all_reduce")
    comm, t = _communicator(process_group), _single(tensors, "all_reduce")
    _device(tensors)
    opts = _timeout(dist.AllreduceOptions(), timeout)
    opts.reduceOp = _reduce_op(reduce_op, t.dtype)
    wire = _wire(t, reduces=True)
    after = None
    if opts.reduceOp == dist.ReduceOp.AVG:
        # A sum, then a division of the host alias (no npu op): the same as gloo's own AVG, and
        # available on torch 2.7, whose gloo has no AVG.
        opts.reduceOp = dist.ReduceOp.SUM
        size = comm.size

        def after() -> None:
            wire.div_(size)

    start = lambda: comm.gloo.allreduce([wire], opts)  # noqa: E731
    return tensors, _run(comm, COLLECTIVES["allreduce"], [(t, t.numel(), start)], list(tensors), after)


def broadcast_(tensors, process_group, root_rank, root_tensor=0, async_op=True, timeout=-1):
    comm, t = _communicator(process_group), _single(tensors, "broadcast")
    _device(tensors)
    opts = _timeout(dist.BroadcastOptions(), timeout)
    opts.rootRank, opts.rootTensor = int(root_rank), int(root_tensor)
    start = lambda: comm.gloo.broadcast([_wire(t, reduces=False)], opts)  # noqa: E731
    return tensors, _run(comm, COLLECTIVES["broadcast"], [(t, t.numel(), start)], list(tensors))


def reduce_(tensors, process_group, reduce_op, root_rank, root_tensor=0, async_op=True, timeout=-1):
    comm, t = _communicator(process_group), _single(tensors, "reduce")
    _device(tensors)
    opts = _timeout(dist.ReduceOptions(), timeout)
    opts.reduceOp = _reduce_op(reduce_op, t.dtype)
    opts.rootRank, opts.rootTensor = int(root_rank), int(root_tensor)
    start = lambda: comm.gloo.reduce([_wire(t, reduces=True)], opts)  # noqa: E731
    return _run(comm, COLLECTIVES["reduce"], [(t, t.numel(), start)], list(tensors))


def allgather_(output_tensors, input_tensors, process_group, async_op=True, timeout=-1):
    comm, t = _communicator(process_group), _single(input_tensors, "all_gather")
    outs = _single(output_tensors, "all_gather output list")
    _device([t, *outs])
    opts = _timeout(dist.distributed_c10d.AllgatherOptions(), timeout)
    start = lambda: comm.gloo.allgather([[_wire(o, False) for o in outs]], [_wire(t, False)], opts)  # noqa: E731
    return output_tensors, _run(comm, COLLECTIVES["allgather"], [(t, t.numel(), start)], list(outs))


def _allgather_base_(output_tensor, input_tensor, process_group, async_op=True, timeout=-1):
    comm, t = _communicator(process_group), input_tensor
    _device([t, output_tensor])
    opts = _timeout(dist.distributed_c10d.AllgatherOptions(), timeout)
    start = lambda: comm.gloo._allgather_base(_wire(output_tensor, False), _wire(t, False), opts)  # noqa: E731
    return output_tensor, _run(comm, COLLECTIVES["_allgather_base"], [(t, t.numel(), start)], [output_tensor])


def reduce_scatter_(output_tensors, input_tensors, process_group, reduce_op, async_op=True, timeout=-1):
    comm, out = _communicator(process_group), _single(output_tensors, "reduce_scatter")
    ins = _single(input_tensors, "reduce_scatter input list")
    _device([out, *ins])
    opts = _timeout(dist.ReduceScatterOptions(), timeout)
    opts.reduceOp = _reduce_op(reduce_op, out.dtype)
    start = lambda: comm.gloo.reduce_scatter([_wire(out, True)], [[_wire(i, True) for i in ins]], opts)  # noqa: E731
    return output_tensors, _run(comm, COLLECTIVES["reduce_scatter"], [(out, out.numel(), start)], [out])


def _reduce_scatter_base_(output_tensor, input_tensor, process_group, reduce_op, async_op=True, timeout=-1):
    comm, out = _communicator(process_group), output_tensor
    _device([out, input_tensor])
    opts = _timeout(dist.ReduceScatterOptions(), timeout)
    opts.reduceOp = _reduce_op(reduce_op, out.dtype)
    start = lambda: comm.gloo._reduce_scatter_base(_wire(out, True), _wire(input_tensor, True), opts)  # noqa: E731
    return output_tensor, _run(comm, COLLECTIVES["_reduce_scatter_base"], [(out, out.numel(), start)], [out])


def alltoall_(output_tensors, input_tensors, process_group, async_op=True, timeout=-1):
    comm = _communicator(process_group)
    _device([*output_tensors, *input_tensors])
    opts = _timeout(dist.AllToAllOptions(), timeout)
    even = len({i.numel() for i in input_tensors} | {o.numel() for o in output_tensors}) == 1
    coll = COLLECTIVES["all_to_all" if even else "all_to_allv"]
    count = input_tensors[0].numel() if even else sum(i.numel() for i in input_tensors)
    outs = [_wire(o, False) for o in output_tensors]
    start = lambda: comm.gloo.alltoall(outs, [_wire(i, False) for i in input_tensors], opts)  # noqa: E731
    return output_tensors, _run(comm, coll, [(input_tensors[0], count, start)], list(output_tensors))


def alltoall_base_(output, input, process_group, output_split_sizes, input_split_sizes, async_op=True, timeout=-1):
    comm = _communicator(process_group)
    _device([output, input])
    opts = _timeout(dist.AllToAllOptions(), timeout)
    even = not output_split_sizes and not input_split_sizes
    coll = COLLECTIVES["all_to_all" if even else "all_to_allv"]
    count = input.numel() // max(comm.size, 1) if even else input.numel()
    outs, ins = list(output_split_sizes), list(input_split_sizes)
    start = lambda: comm.gloo.alltoall_base(_wire(output, False), _wire(input, False), outs, ins, opts)  # noqa: E731
    return _run(comm, coll, [(input, count, start)], [output])


def allgather_into_tensor_coalesced_(outputs, inputs, process_group, async_op=True):
    # One all-gather per pair, as torch_npu launches them inside one HCCL group; one Work for all.
    comm = _communicator(process_group)
    _device([*outputs, *inputs])
    opts = dist.distributed_c10d.AllgatherOptions()
    parts = [
        (i, i.numel(), lambda o=o, i=i: comm.gloo._allgather_base(_wire(o, False), _wire(i, False), opts))
        for o, i in zip(outputs, inputs, strict=True)
    ]
    return _run(comm, COLLECTIVES["_allgather_base"], parts, list(outputs))


def reduce_scatter_tensor_coalesced_(outputs, inputs, process_group, reduce_op, async_op=True, timeout=-1):
    comm = _communicator(process_group)
    _device([*outputs, *inputs])
    opts = _timeout(dist.ReduceScatterOptions(), timeout)
    opts.reduceOp = _reduce_op(reduce_op, outputs[0].dtype)
    parts = [
        (o, o.numel(), lambda o=o, i=i: comm.gloo._reduce_scatter_base(_wire(o, True), _wire(i, True), opts))
        for o, i in zip(outputs, inputs, strict=True)
    ]
    return _run(comm, COLLECTIVES["_reduce_scatter_base"], parts, list(outputs))


def barrier(tensor, process_group, device_ids, async_op=True, timeout=-1):
    # torch_npu's barrier is an all-reduce of one float on the device: so is its device record.
    comm = _communicator(process_group)
    _device([tensor])
    opts = _timeout(dist.BarrierOptions(), timeout)
    token = torch.ones(1, dtype=torch.float32, device=tensor.device)
    return _run(comm, COLLECTIVES["allreduce"], [(token, 1, lambda: comm.gloo.barrier(opts))], [token])


def send(tensors, process_group, dst, tag):
    comm, t = _communicator(process_group), _single(tensors, "send")
    _device(tensors)
    start = lambda: comm.gloo.send([_wire(t, False)], int(dst), int(tag))  # noqa: E731
    return _run(comm, COLLECTIVES["send"], [(t, t.numel(), start)], list(tensors), peer=int(dst))


def recv_(tensors, process_group, src, tag):
    comm, t = _communicator(process_group), _single(tensors, "recv")
    _device(tensors)
    start = lambda: comm.gloo.recv([_wire(t, False)], int(src), int(tag))  # noqa: E731
    return _run(comm, COLLECTIVES["recv"], [(t, t.numel(), start)], list(tensors), peer=int(src))


KERNELS = {
    f.__name__: f
    for f in (
        allreduce_,
        broadcast_,
        reduce_,
        allgather_,
        _allgather_base_,
        reduce_scatter_,
        _reduce_scatter_base_,
        alltoall_,
        alltoall_base_,
        allgather_into_tensor_coalesced_,
        reduce_scatter_tensor_coalesced_,
        barrier,
        send,
        recv_,
    )
}

# c10d ops the backend rejects, with what to use instead.
UNSUPPORTED = {
    "allreduce_coalesced_": "all_reduce each tensor",
    "allgather_coalesced_": "all_gather each tensor",
    "gather_": "all_gather",
    "scatter_": "broadcast or all_to_all",
    "recv_any_source_": "recv with an explicit src",
}


def unsupported(op: str):
    def kernel(*args, **kwargs):
        raise RuntimeError(f"the simulated hccl backend does not support c10d::{op}; use {UNSUPPORTED[op]}")

    return kernel
