"""One rank of an FSDP2 (``fully_shard``) training step on the simulated NPU, for test_sim_fsdp2.py.

``spawn_main(rank, world, port, out)`` (``torch.multiprocessing.spawn``): rank r enables the simulated NPU
(direct launches), uses ``npu:r`` and the simulated ``hccl`` backend, shards a 2-layer model with ``fully_shard`` over
a 1-d npu device mesh, trains 3 SGD steps against a CPU reference that trains on every rank's batch
(``max_diff``), profiles a 4th step (CPU + PrivateUse1) into ``trace_rank<r>.json`` and writes
``result_rank<r>.json`` with the checks' inputs, or ``error`` (a traceback).
"""

from __future__ import annotations

import datetime
import json
import os
import traceback

import torch


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _batch(step: int, rank: int) -> torch.Tensor:
    return torch.randn(5, 8, generator=torch.Generator().manual_seed(100 * step + rank))


def main(rank: int, world: int, out: str, init_method: str) -> None:
    from torch_mspti import sim

    sim.enable(device_count=max(2, world), launch_mode="direct")  # launches inside their ops: linkable
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.profiler import ProfilerActivity, profile

    torch.npu.set_device(rank)
    timeout = datetime.timedelta(seconds=120)
    dist.init_process_group("hccl", rank=rank, world_size=world, init_method=init_method, timeout=timeout)
    result: dict = {"rank": rank, "device": rank, "event_is_torch_event": isinstance(torch.npu.Event(), torch.Event)}
    try:
        mesh = init_device_mesh("npu", (world,))
        ref, model = _model(), _model().to(f"npu:{rank}")
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)

        def step(i: int) -> None:
            xs = [_batch(i, r) for r in range(world)]
            opt.zero_grad()
            model(xs[rank].to(f"npu:{rank}")).pow(2).sum().backward()
            opt.step()
            ref_opt.zero_grad()
            (sum(ref(x).pow(2).sum() for x in xs) / world).backward()
            ref_opt.step()

        for i in range(3):
            step(i)
        torch.npu.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            step(3)
            torch.npu.synchronize()
        trace = os.path.join(out, f"trace_rank{rank}.json")
        prof.export_chrome_trace(trace)
        full = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
        result["max_diff"] = max(float((full[k] - v).abs().max()) for k, v in ref.state_dict().items())
        result["trace"] = trace
        result["comm_stream"] = int(torch.ops.npu_sim.communication_stream(rank))
        result["pinned"] = [torch.zeros(4).pin_memory().is_pinned(), torch.zeros(4).is_pinned()]
        result["offload_max_diff"] = _offloaded_steps(rank, world, mesh)
    except Exception:
        result["error"] = traceback.format_exc()
    finally:
        with open(os.path.join(out, f"result_rank{rank}.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, default=str)
        dist.destroy_process_group()


def _offloaded_steps(rank: int, world: int, mesh) -> float:
    """3 Adam steps of the model sharded with CPUOffloadPolicy (parameter shards in pinned host memory,
    gradients copied back non-blocking) against the CPU reference: the largest difference between this
    rank's shards and the same rows of the reference's parameters (FSDP2 shards dim 0 as torch.chunk)."""
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    ref, model = _model(), _model().to(f"npu:{rank}")
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh, offload_policy=CPUOffloadPolicy())
    fully_shard(model, mesh=mesh, offload_policy=CPUOffloadPolicy())
    opt, ref_opt = torch.optim.Adam(model.parameters(), lr=0.01), torch.optim.Adam(ref.parameters(), lr=0.01)
    for i in range(3):
        xs = [_batch(i, r) for r in range(world)]
        opt.zero_grad()
        model(xs[rank].to(f"npu:{rank}")).pow(2).sum().backward()
        opt.step()
        ref_opt.zero_grad()
        (sum(ref(x).pow(2).sum() for x in xs) / world).backward()
        ref_opt.step()
    torch.npu.synchronize()
    local = {k: v.to_local() for k, v in model.state_dict().items()}
    return max(
        float((local[k] - v.chunk(world, dim=0)[rank]).abs().max()) if local[k].numel() else 0.0
        for k, v in ref.state_dict().items()
    )


def spawn_main(rank: int, world: int, port: int, out: str) -> None:
    main(rank, world, out, f"tcp://127.0.0.1:{port}")
