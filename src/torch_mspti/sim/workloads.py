"""Demo workloads for an NPU, simulated (torch_mspti.sim) or real (torch_npu).

They use only public torch APIs and ``device="npu"``, so the same code profiles either device:

* ``phases``: the reference trace-view script. N x N ``randn`` on the npu, five each of
  ``torch.matmul``, ``torch.add`` and ``torch.sum`` under ``record_function("matmul"|"add"|"sum")``,
  a warm-up, ``torch.npu.synchronize()``, ``profile(activities=[CPU, PrivateUse1])`` and
  ``export_chrome_trace``.
* ``mlp``: a 2-layer MLP training step (forward, backward, optimizer step).
* ``transformer``: a ``torch.nn.TransformerEncoderLayer`` training step.
* ``ddp``: the 2-layer MLP under ``DistributedDataParallel`` on this rank's device (backend ``hccl``), one
  process per rank (:mod:`torch_mspti.sim.multirank` starts them); one trace per rank.

``copies=True`` (``torch-mspti demo --memcpy``) adds host<->device copies: phases gets a fourth
phase ``copy`` (an N x N host tensor copied to the npu, a sum read back with ``.item()``), and the
training workloads take each batch from host memory (``.to(device)``) and read the loss back with
``.item()`` after every step.

``steps`` is the number of profiled steps, >= 1, for every workload. ``mlp`` and ``transformer``
run one warm-up step and then ``steps`` active steps under ``torch.profiler.schedule(wait=0,
warmup=1, active=steps, repeat=1)`` with ``on_trace_ready=tensorboard_trace_handler(...)``: one
cycle, whose trace (``ProfilerStep#1`` ... ``ProfilerStep#<steps>``) is written to ``out`` and to
the TensorBoard directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

__all__ = ["WORKLOADS", "DEFAULTS", "phases", "mlp", "transformer", "train_step"]

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
#: workload -> (size, profiled steps) when the caller gives none; phases' reference size is 4096,
#: the demo uses less. The torch-free command line shows a copy in ``torch-mspti demo --help``
#: (torch_mspti_cli.cmd_demo.WORKLOAD_DEFAULTS, checked equal by tests/test_layering.py).
DEFAULTS: dict[str, tuple[int, int]] = {
    "phases": (1024, 1),
    "mlp": (256, 3),
    "transformer": (128, 3),
    "ddp": (256, 2),
}


def _sync() -> None:
    torch.npu.synchronize()


def phases(size: int = 4096, out: str = "trace.json", steps: int = 1, device: str = "npu", copies: bool = False) -> str:
    """The reference trace-view script; ``steps`` (>= 1) repeats the three phases inside the
    profile; ``copies`` adds the ``copy`` phase (HtoD of an N x N host tensor, DtoH of a sum)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    host = torch.randn(size, size)

    def run_phases() -> None:
        with record_function("matmul"):
            for _ in range(5):
                torch.matmul(a, b)
        with record_function("add"):
            for _ in range(5):
                torch.add(a, b)
        with record_function("sum"):
            for _ in range(5):
                torch.sum(a)
        if copies:
            with record_function("copy"):
                host.to(device)
                torch.sum(a).item()

    run_phases()  # warm-up
    _sync()
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(steps):
            run_phases()
    prof.export_chrome_trace(out)
    return out


def _cycle_handler(trace_dir: str | None, out: str, worker_name: str | None = None) -> Callable:
    """tensorboard_trace_handler(trace_dir, worker_name), then a copy of the cycle's trace to ``out`` (a
    kineto trace can be saved only once)."""
    if not trace_dir:
        return lambda prof: prof.export_chrome_trace(out)
    tb = tensorboard_trace_handler(trace_dir, worker_name=worker_name)

    # Only this worker's files: other ranks write into the same directory at the same time.
    pattern = f"{worker_name}.*.json" if worker_name else "*.json"

    def handler(prof) -> None:
        before = set(Path(trace_dir).glob(pattern)) if Path(trace_dir).is_dir() else set()
        tb(prof)
        written = sorted(set(Path(trace_dir).glob(pattern)) - before, key=lambda p: p.stat().st_mtime)
        if written:
            shutil.copyfile(written[-1], out)

    return handler


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, make_batch: Callable) -> torch.Tensor:
    """One training step of the workloads: a batch from ``make_batch()`` (input, target), then the
    ``forward`` (MSE loss), ``backward`` and ``optimizer`` ranges. Returns the loss (on the device)."""
    x, target = make_batch()
    with record_function("forward"):
        loss = torch.nn.functional.mse_loss(model(x), target)
    with record_function("backward"):
        opt.zero_grad(set_to_none=True)
        loss.backward()
    with record_function("optimizer"):
        opt.step()
    return loss


def _train(
    model: torch.nn.Module,
    make_batch: Callable,
    steps: int,
    out: str,
    trace_dir: str | None,
    lr: float,
    worker_name: str | None = None,
    copies: bool = False,
) -> str:
    """One warm-up step, then ``steps`` profiled steps in one schedule cycle; the trace goes to ``out``
    and, with ``trace_dir``, to ``tensorboard_trace_handler(trace_dir, worker_name)``. ``copies``:
    the loss is read back (``.item()``) after each step."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
    handler = _cycle_handler(trace_dir, out, worker_name)
    with profile(activities=ACTIVITIES, schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(1 + steps):
            loss = train_step(model, opt, make_batch)
            if copies:
                loss.item()
            prof.step()
    _sync()
    return out


def _mlp_model(size: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(size, 4 * size), torch.nn.ReLU(), torch.nn.Linear(4 * size, size))


def _random_batches(batch: int, size: int, device: str, copies: bool = False) -> Callable:
    """Random (input, target) batches made on ``device``, or with ``copies`` made in host memory and
    copied to it."""
    if copies:
        return lambda: (torch.randn(batch, size).to(device), torch.randn(batch, size).to(device))
    return lambda: (torch.randn(batch, size, device=device), torch.randn(batch, size, device=device))


def mlp(
    size: int = 256,
    out: str = "trace.json",
    steps: int = DEFAULTS["mlp"][1],
    device: str = "npu",
    trace_dir: str | None = None,
    batch: int = 64,
    copies: bool = False,
) -> str:
    """2-layer MLP training steps (Linear-ReLU-Linear, AdamW): ``steps`` profiled after one warm-up."""
    torch.manual_seed(0)
    model = _mlp_model(size).to(device)
    batches = _random_batches(batch, size, device, copies)
    return _train(model, batches, steps, out, trace_dir, lr=1e-3, copies=copies)


def ddp(
    size: int = 256,
    out: str = "trace.json",
    steps: int = 2,
    device: str = "npu",
    trace_dir: str | None = None,
    batch: int = 32,
    copies: bool = False,
) -> str:
    """This rank's DDP training steps of the 2-layer MLP: one warm-up step, then ``steps`` profiled
    steps in one schedule() cycle, with ``tensorboard_trace_handler(trace_dir,
    worker_name=f"rank{r}")``, so that ``trace_dir`` gets one trace per rank, each with torch's
    ``distributedInfo`` (backend, rank, world size). Uses the initialized default process group (one
    process per rank, each on its own device); without one it runs as a world of one rank (an
    in-memory store, no port). Each rank draws its own batches (seed 1000 + rank)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    own_group = not dist.is_initialized()
    if own_group:  # a world of one rank needs no rendezvous: an in-memory store
        dist.init_process_group("hccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        rank = dist.get_rank()
        torch.manual_seed(0)
        model = _mlp_model(size).to(device)
        index = torch.device(device).index
        index = torch.npu.current_device() if index is None else index
        wrapped = DistributedDataParallel(model, device_ids=[index])
        torch.manual_seed(1000 + rank)
        batches = _random_batches(batch, size, device, copies)
        return _train(wrapped, batches, steps, out, trace_dir, lr=1e-3, worker_name=f"rank{rank}", copies=copies)
    finally:
        if own_group:
            dist.destroy_process_group()


def transformer(
    size: int = 128,
    out: str = "trace.json",
    steps: int = DEFAULTS["transformer"][1],
    device: str = "npu",
    trace_dir: str | None = None,
    batch: int = 8,
    seq: int = 32,
    copies: bool = False,
) -> str:
    """nn.TransformerEncoderLayer training steps (d_model=size, 4 heads): ``steps`` profiled after
    one warm-up."""
    torch.manual_seed(0)
    heads = 4 if size % 4 == 0 else 1
    model = torch.nn.TransformerEncoderLayer(
        d_model=size, nhead=heads, dim_feedforward=4 * size, dropout=0.1, batch_first=True
    ).to(device)
    model.train()

    def make_batch():
        if copies:
            return torch.randn(batch, seq, size).to(device), torch.randn(batch, seq, size).to(device)
        x = torch.randn(batch, seq, size, device=device)
        return x, torch.randn(batch, seq, size, device=device)

    return _train(model, make_batch, steps, out, trace_dir, lr=1e-4, copies=copies)


WORKLOADS = {"phases": phases, "mlp": mlp, "transformer": transformer, "ddp": ddp}


def run(
    workload: str,
    size: int | None = None,
    steps: int | None = None,
    out: str = "trace.json",
    trace_dir: str | None = None,
    copies: bool = False,
) -> str:
    """Run one workload by name; returns the path of the chrome trace written. ``copies``: see the
    module docstring. Raises ValueError for an unknown workload, or a size or steps below 1."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; choose from {sorted(WORKLOADS)}")
    d_size, d_steps = DEFAULTS[workload]
    size = d_size if size is None else int(size)
    steps = d_steps if steps is None else int(steps)
    for name, value in (("size", size), ("steps", steps)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    if workload == "phases":
        return phases(size=size, out=out, steps=steps, copies=copies)
    if trace_dir is None:
        trace_dir = os.fspath(Path(out).with_suffix("")) + "_tb"
    return WORKLOADS[workload](size=size, out=out, steps=steps, trace_dir=trace_dir, copies=copies)
