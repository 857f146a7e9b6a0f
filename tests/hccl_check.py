"""One rank of the hccl backend check, on the simulated NPU or on real Ascend devices.

Run under torchrun (``python -m torch.distributed.run --standalone --nproc-per-node 2 hccl_check.py
--out DIR [--device sim|real] [--launch-mode direct|queued]``) or through ``spawn_main`` with
``torch.multiprocessing.spawn``. Rank r uses ``npu:r`` (torchrun: ``npu:LOCAL_RANK``) and writes
``DIR/result_rank<r>.json``; tests/test_sim_hccl.py asserts on those files and on the traces.

What each rank does:
1. every supported collective on npu tensors (backend ``hccl``) and the same on CPU tensors through a
   gloo group: the results must be equal (``collectives``: name -> "ok" or the mismatch);
2. DDP and FSDP (FSDP1, ``use_orig_params=True``) training steps of a 2-layer model against a CPU model
   trained on all ranks' batches (``ddp_max_diff``, ``fsdp_max_diff``);
3. the ``ddp`` demo workload, profiled: one trace per rank in ``DIR/tb`` (``trace``, ``trace_dir``);
4. on the simulator, one profiled window with a collective of each kind on two groups (``kinds_trace``)
   and what each of its collective rows must carry (``kinds_expect``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import traceback

import torch


def _setup(device_kind: str, launch_mode: str, world: int) -> None:
    if device_kind == "real":
        import torch_npu  # noqa: F401
    else:
        from torch_mspti import sim

        sim.enable(device_count=max(2, world), launch_mode=launch_mode)


def _same(a: torch.Tensor, b: torch.Tensor, exact: bool) -> bool:
    a, b = a.cpu(), b.cpu()
    if exact:
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-3, atol=1e-3)


GLOO_LACKS = r"does not support|Cannot use ReduceOp"


def _collectives(rank: int, world: int, cpu_group, exact: bool) -> dict[str, str]:
    """name -> "ok" | why not. Inputs differ per rank and per case; the CPU side runs through gloo."""
    import torch.distributed as dist

    R = dist.ReduceOp
    g = torch.Generator().manual_seed(7 + rank)
    results: dict[str, str] = {}
    gloo_gaps: list[str] = []

    def rnd(n, dtype=torch.float32):
        if dtype.is_floating_point:
            return torch.randn(n, generator=g).to(dtype)
        if dtype == torch.bool:
            return torch.randint(0, 2, (n,), generator=g).bool()
        return torch.randint(-50, 50, (n,), generator=g).to(dtype)

    def case(name, run, reference=None):
        """run(device, group) -> tensor or list of tensors (the collective's results). reference():
        the same result on CPU from collectives this torch's gloo has, for the ones it lacks (torch
        2.7's gloo has no ReduceOp.AVG, reduce_scatter or alltoall)."""
        try:
            try:
                on_npu = run("npu", None)
            except RuntimeError as exc:
                # The simulated backend moves data through gloo: what this torch's gloo lacks (torch
                # 2.7: the list forms of reduce_scatter and all_to_all), it lacks too. Accepted only
                # when gloo itself refuses the same call on CPU.
                if not re.search(GLOO_LACKS, str(exc)):
                    raise
                try:
                    run("cpu", cpu_group)
                except RuntimeError as cpu_exc:
                    if re.search(GLOO_LACKS, str(cpu_exc)):
                        results[name] = "ok"
                        gloo_gaps.append(name)
                        return
                raise
            try:
                on_cpu = run("cpu", cpu_group)
            except RuntimeError as exc:
                if reference is None or not re.search(GLOO_LACKS, str(exc)):
                    raise
                on_cpu = reference()
            npu_list = on_npu if isinstance(on_npu, list) else [on_npu]
            cpu_list = on_cpu if isinstance(on_cpu, list) else [on_cpu]
            bad = [i for i, (a, b) in enumerate(zip(npu_list, cpu_list, strict=True)) if not _same(a, b, exact)]
            results[name] = "ok" if not bad else f"mismatch at {bad}: npu {npu_list[bad[0]]} cpu {cpu_list[bad[0]]}"
        except Exception:
            results[name] = traceback.format_exc(limit=4)

    def all_reduce(x, op, async_op=False):
        def run(dev, group):
            t = x.clone().to(dev)
            work = dist.all_reduce(t, op=op, group=group, async_op=async_op)
            if async_op:
                work.wait()
            return t

        return run

    def summed(t):
        t = t.clone()
        dist.all_reduce(t, op=R.SUM, group=cpu_group)
        return t

    for op in (R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX):
        x = rnd(37)
        case(f"all_reduce_{op}", all_reduce(x, op), (lambda x=x: summed(x) / world) if op == R.AVG else None)
    for op in (R.BAND, R.BOR, R.BXOR):
        case(f"all_reduce_{op}_int32", all_reduce(rnd(9, torch.int32), op))
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int8):
        case(f"all_reduce_sum_{dtype}", all_reduce(rnd(11, dtype), R.SUM))
    case("all_reduce_async", all_reduce(rnd(1000), R.SUM, async_op=True))

    sub = dist.new_group(ranks=list(range(world)))  # a second hccl communicator
    x = rnd(21)
    case("all_reduce_subgroup", lambda dev, group: _all_reduce_in(x.clone().to(dev), group or sub))
    mixed = dist.new_group(backend="cpu:gloo,npu:hccl")  # CPU tensors through gloo, npu ones through hccl
    case("all_reduce_mixed_group", lambda dev, group: _all_reduce_in(x.clone().to(dev), mixed))

    x = rnd(13)
    case("broadcast", lambda dev, group: _broadcast(x.clone().to(dev), world - 1, group))
    u = (torch.arange(5) + 100 * rank).to(torch.uint16)  # gloo has no uint16: on CPU, move it as float16 bits
    case("broadcast_uint16", lambda dev, group: _broadcast(u.clone().to(dev).view(torch.float16) if dev == "cpu" else u.clone().to(dev), 0, group).view(torch.float16))  # fmt: skip

    x = rnd(6)
    case("all_gather", lambda dev, group: _all_gather(x.to(dev), world, group))
    case("all_gather_into_tensor", lambda dev, group: _all_gather_into(x.to(dev), world, group))
    x = rnd(4 * world)
    for op in (R.SUM, R.AVG, R.MAX):
        case(f"reduce_scatter_tensor_{op}", lambda dev, group, op=op: _reduce_scatter_into(x.to(dev), world, op, group))
    xs = [rnd(3) for _ in range(world)]
    case("reduce_scatter", lambda dev, group: _reduce_scatter(xs, dev, group), lambda: summed(torch.stack(xs))[rank])
    x = rnd(2 * world)
    case("all_to_all_single", lambda dev, group: _all_to_all_single(x.to(dev), group, None))
    uneven = [r + 1 for r in range(world)]  # rank r sends r+1 elements to everyone... as split sizes
    xu = rnd(sum(uneven))
    case("all_to_all_single_uneven", lambda dev, group: _all_to_all_single(xu.to(dev), group, uneven))
    xs = [rnd(2) for _ in range(world)]
    case(
        "all_to_all",
        lambda dev, group: _all_to_all([t.to(dev) for t in xs], group),
        lambda: [g[rank] for g in _all_gather(torch.stack(xs), world, cpu_group)],
    )
    x = rnd(5)
    case("reduce", lambda dev, group: _reduce(x.clone().to(dev), group))
    case("send_recv", lambda dev, group: _send_recv(rank, world, dev, group))
    case("all_gather_object", lambda dev, group: _all_gather_object({"rank": rank, "x": [rank] * 3}, world, group))
    case("barrier", lambda dev, group: (dist.barrier(group=group), torch.ones(1))[1])
    case("future_value_on_npu", lambda dev, group: _future_value(dev, group))
    if exact:  # the simulated backend's limits (torch_npu supports these)
        rejected = {
            "premul_sum_is_rejected": lambda: dist.all_reduce(torch.ones(2, device="npu"), op=dist._make_nccl_premul_sum(2.0)),
            "gather_is_rejected": lambda: dist.gather(torch.ones(2, device="npu"), [torch.ones(2, device="npu")] * world if rank == 0 else None),
        }  # fmt: skip
        for name, call in rejected.items():
            try:
                call()
                results[name] = "no error raised"
            except RuntimeError as exc:
                results[name] = "ok" if "simulated hccl backend" in str(exc) else str(exc)
    return results


def _all_reduce_in(t, group):
    import torch.distributed as dist

    dist.all_reduce(t, group=group)
    return t


def _broadcast(t, src, group):
    import torch.distributed as dist

    dist.broadcast(t, src=src, group=group)
    return t


def _all_gather(x, world, group):
    import torch.distributed as dist

    out = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(out, x, group=group)
    return out


def _all_gather_into(x, world, group):
    import torch.distributed as dist

    out = torch.empty(world * x.numel(), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x, group=group)
    return out


def _reduce_scatter_into(x, world, op, group):
    import torch.distributed as dist

    out = torch.empty(x.numel() // world, dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x, op=op, group=group)
    return out


def _reduce_scatter(xs, dev, group):
    import torch.distributed as dist

    out = torch.empty_like(xs[0], device=dev)
    dist.reduce_scatter(out, [t.to(dev) for t in xs], group=group)
    return out


def _all_to_all_single(x, group, splits):
    import torch.distributed as dist

    if splits is None:
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x, group=group)
        return out
    rank = dist.get_rank()
    out = torch.empty(len(splits) * splits[rank], dtype=x.dtype, device=x.device)
    dist.all_to_all_single(out, x, [splits[rank]] * len(splits), splits, group=group)
    return out


def _all_to_all(xs, group):
    import torch.distributed as dist

    out = [torch.empty_like(t) for t in xs]
    dist.all_to_all(out, xs, group=group)
    return out


def _reduce(t, group):
    import torch.distributed as dist

    dist.reduce(t, dst=0, group=group)
    return t if dist.get_rank() == 0 else torch.zeros(0)


def _all_gather_object(obj, world, group):
    import torch.distributed as dist

    out = [None] * world
    dist.all_gather_object(out, obj, group=group)  # pickles through a uint8 all-gather on the group's device
    return torch.tensor([o["rank"] for o in out] + [v for o in out for v in o["x"]])


def _send_recv(rank, world, dev, group):
    import torch.distributed as dist

    t = torch.arange(4.0, device=dev) + 10 * rank
    peer = (rank + 1) % world
    got = torch.empty(4, device=dev)
    if rank % 2 == 0:
        dist.send(t, dst=peer, group=group)
        dist.recv(got, src=(rank - 1) % world, group=group)
    else:
        dist.recv(got, src=(rank - 1) % world, group=group)
        dist.send(t, dst=peer, group=group)
    return got


def _future_value(dev, group):
    import torch.distributed as dist

    t = torch.ones(3, device=dev)
    work = dist.all_reduce(t, group=group, async_op=True)
    value = work.get_future().wait()
    if dev == "npu" and not (isinstance(value, list) and value[0].device.type == "npu"):
        raise AssertionError(f"the Work's future holds {value!r}, not the npu tensor")
    return t


def _communication_records(rank: int, world: int) -> dict:
    """A few collectives while a bare MSPTI consumer (test_sim_runtime_calls.RECORDER, through the C API,
    without the profiler plugin) records COMMUNICATION and RUNTIME_API: the records, what each collective
    should have produced ((HCCL op type, count, msptiCommunicationDataType, device ns, HCCL API), in issue
    order)
    and the issuing thread."""
    import threading

    import torch.distributed as dist
    from test_sim_runtime_calls import RECORDER

    from torch_mspti.sim import hccl, hccl_model

    scope = {"torch": torch}
    exec(RECORDER, scope)  # the recorder source of the runtime-call tests
    recorder = scope["REC"]
    dev = torch.device("npu", torch.npu.current_device())
    model, expected = hccl.link_model(), []

    def expect(c10d_name, count, dtype):
        coll = hccl_model.COLLECTIVES[c10d_name]
        elem = torch.empty(0, dtype=dtype).element_size()
        duration = model.duration_ns(coll, count, elem, world)
        expected.append((coll.kind, count, hccl_model.data_type(dtype), duration, coll.api))

    recorder.start("COMMUNICATION", "RUNTIME_API")
    dist.all_reduce(torch.ones(37, device=dev))
    expect("allreduce", 37, torch.float32)
    dist.broadcast(torch.arange(5, device=dev), src=0)
    expect("broadcast", 5, torch.int64)
    dist.all_gather_into_tensor(torch.empty(3 * world, dtype=torch.bfloat16, device=dev), torch.ones(3, dtype=torch.bfloat16, device=dev))  # fmt: skip
    expect("_allgather_base", 3, torch.bfloat16)
    dist.reduce_scatter_tensor(torch.empty(4, device=dev), torch.ones(4 * world, device=dev))
    expect("_reduce_scatter_base", 4, torch.float32)
    dist.all_to_all_single(torch.empty(2 * world, dtype=torch.int32, device=dev), torch.ones(2 * world, dtype=torch.int32, device=dev))  # fmt: skip
    expect("all_to_all", 2, torch.int32)
    dist.barrier()
    expect("allreduce", 1, torch.float32)
    records = recorder.stop()
    apis = [a for a in records["apis"] if a["name"].startswith("Hccl")]
    return {"comms": records["comms"], "apis": apis, "expected": expected, "caller": threading.get_native_id()}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _train_vs_cpu(rank: int, world: int, wrap, full_state) -> float:
    """Max |param - reference| after 3 SGD steps: rank r trains on batch (step, r) through the wrapped
    model; the CPU reference trains on the mean loss over every rank's batch."""
    ref, model = _model(), _model().to(f"npu:{torch.npu.current_device()}")
    wrapped = wrap(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        xs = [torch.randn(5, 8, generator=torch.Generator().manual_seed(100 * step + r)) for r in range(world)]
        opt.zero_grad()
        wrapped(xs[rank].to(model[0].weight.device)).pow(2).sum().backward()
        opt.step()
        ref_opt.zero_grad()
        (sum(ref(x).pow(2).sum() for x in xs) / world).backward()
        ref_opt.step()
    got = full_state(wrapped)
    return max(float((got[k].cpu() - v).abs().max()) for k, v in ref.state_dict().items())


def _ddp_state(m):
    return {k.removeprefix("module."): v for k, v in m.state_dict().items()}


def _fsdp(model):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    return FSDP(model, device_id=torch.device("npu", torch.npu.current_device()), use_orig_params=True)


def _fsdp_state(m):
    import warnings

    from torch.distributed.fsdp import FullStateDictConfig, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with FSDP.state_dict_type(m, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False)):
            return {k: v.cpu() for k, v in m.state_dict().items()}


def _profile_every_kind(rank: int, world: int, out: str) -> tuple[str, list[dict]]:
    """One profiled window with a collective of each kind on the world group and one on a second group
    (``group_desc="pair"``): the trace, and what each collective row must say, in issue order (the
    collective's name, its group's pg_name, In and Out msg nelems per torch_npu.md 6, the p2p peer)."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    c10d = dist.distributed_c10d
    dev = torch.device("npu", torch.npu.current_device())
    pair = dist.new_group(ranks=list(range(world)), group_desc="pair")
    world_pg = c10d._get_process_group_name(c10d._get_default_group())
    pair_pg = c10d._get_process_group_name(pair)
    n = 6
    x = torch.ones(n * world, device=dev)
    gathered = torch.empty(n * world * world, device=dev)
    scattered = torch.empty(n, device=dev)
    swapped = torch.empty(n * world, device=dev)
    splits = [n + i for i in range(world)]  # uneven: all-to-all-v
    uneven = torch.ones(sum(splits), device=dev)
    uneven_out = torch.empty(world * splits[rank], device=dev)
    peer = 1 - rank if world == 2 else None
    p2p = torch.ones(5, device=dev)
    expect: list[dict] = []

    def want(collective, pg, nin, nout, **extra):
        expect.append({"collective": collective, "pg": pg, "in": nin, "out": nout, **extra})

    torch.npu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        dist.all_reduce(x)
        want("allreduce", world_pg, n * world, n * world)
        dist.all_gather_into_tensor(gathered, x)
        want("allgather", world_pg, n * world, n * world * world)
        dist.reduce_scatter_tensor(scattered, x)
        want("reduce_scatter", world_pg, n * world, n)
        dist.all_to_all_single(swapped, x)
        want("all_to_all", world_pg, n * world, n * world)
        dist.all_to_all_single(uneven_out, uneven, [splits[rank]] * world, splits)
        want("all_to_allv", world_pg, sum(splits), None)
        dist.broadcast(x, src=0)
        want("broadcast", world_pg, n * world, n * world)
        if peer is not None:  # rank 0 sends first, rank 1 receives first
            for step in (0, 1):
                if (rank == 0) == (step == 0):
                    dist.send(p2p, dst=peer)
                    want("send", world_pg, 5, 5, src=rank, dst=peer)
                else:
                    dist.recv(p2p, src=peer)
                    want("recv", world_pg, 5, 5, src=peer, dst=rank)
        dist.barrier()
        want("allreduce", world_pg, 1, 1)
        dist.all_reduce(x, group=pair)
        want("allreduce", pair_pg, n * world, n * world)
        torch.npu.synchronize()
    trace = os.path.join(out, f"kinds_rank{rank}.json")
    prof.export_chrome_trace(trace)
    return trace, expect


def main(rank: int, world: int, out: str, device_kind: str, launch_mode: str, init_method: str | None) -> None:
    _setup(device_kind, launch_mode, world)
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.npu.set_device(rank if init_method else int(os.environ.get("LOCAL_RANK", rank)))
    timeout = datetime.timedelta(seconds=120)  # a rank that fails alone must not hang the others forever
    dist.init_process_group("hccl", rank=rank, world_size=world, init_method=init_method, timeout=timeout)
    result: dict = {"rank": rank, "world": world, "device": torch.npu.current_device()}
    try:
        cpu_group = dist.new_group(backend="gloo", timeout=timeout)
        result["collectives"] = _collectives(rank, world, cpu_group, exact=device_kind != "real")
        result["ddp_max_diff"] = _train_vs_cpu(
            rank, world, lambda m: DDP(m, device_ids=[m[0].weight.device.index]), _ddp_state
        )
        result["fsdp_max_diff"] = _train_vs_cpu(rank, world, _fsdp, _fsdp_state)
        from torch_mspti.sim import workloads
        from torch_mspti.sim.multirank import rank_path

        trace_dir = os.path.join(out, "tb")
        trace = workloads.ddp(size=32, out=rank_path(os.path.join(out, "trace.json"), rank), steps=4, device=f"npu:{torch.npu.current_device()}", trace_dir=trace_dir)  # fmt: skip
        result.update(trace=trace, trace_dir=trace_dir, model_numel=sum(p.numel() for p in workloads._mlp_model(32).parameters()))  # fmt: skip
        if device_kind != "real":
            from torch_mspti.sim import hccl

            result["comm_stream"] = int(torch.ops.npu_sim.communication_stream(torch.npu.current_device()))
            result["comm_name"] = hccl.communicator_name()
            result["comm_names"] = sorted(c.comm_name for c in hccl.communicators().values())
            result["records"] = _communication_records(rank, world)
            result["kinds_trace"], result["kinds_expect"] = _profile_every_kind(rank, world, out)
    except Exception:
        result["error"] = traceback.format_exc()
    finally:
        with open(os.path.join(out, f"result_rank{rank}.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, default=str)
        dist.destroy_process_group()


def spawn_main(rank: int, world: int, port: int, out: str, device_kind: str, launch_mode: str) -> None:
    main(rank, world, out, device_kind, launch_mode, f"tcp://127.0.0.1:{port}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--device", choices=("sim", "real"), default="sim")
    p.add_argument("--launch-mode", choices=("direct", "queued"), default="direct")
    a = p.parse_args()
    main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a.out, a.device, a.launch_mode, None)
