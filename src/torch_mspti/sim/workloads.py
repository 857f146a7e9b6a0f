"""Demo workloads for an NPU, simulated (torch_mspti.sim) or real (torch_npu).

They use only public torch APIs and ``device="npu"``, so the same code profiles either device:

* ``phases``: the reference trace-view script. N x N ``randn`` on the npu, five each of
  ``torch.matmul``, ``torch.add`` and ``torch.sum`` under ``record_function("matmul"|"add"|"sum")``,
  a warm-up, ``torch.npu.synchronize()``, ``profile(activities=[CPU, PrivateUse1])`` and
  ``export_chrome_trace``.
* ``mlp``: a 2-layer MLP training step (forward, backward, optimizer step).
* ``transformer``: a ``torch.nn.TransformerEncoderLayer`` training step.

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

from torch_mspti_cli.cmd_demo import WORKLOAD_DEFAULTS

__all__ = ["WORKLOADS", "DEFAULTS", "phases", "mlp", "transformer"]

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _sync() -> None:
    torch.npu.synchronize()


def phases(size: int = 4096, out: str = "trace.json", steps: int = 1, device: str = "npu") -> str:
    """The reference trace-view script; ``steps`` (>= 1) repeats the three phases inside the profile."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)

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

    run_phases()  # warm-up
    _sync()
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(steps):
            run_phases()
    prof.export_chrome_trace(out)
    return out


def _cycle_handler(trace_dir: str | None, out: str) -> Callable:
    """tensorboard_trace_handler(trace_dir), then a copy of the cycle's trace to ``out`` (a kineto
    trace can be saved only once)."""
    if not trace_dir:
        return lambda prof: prof.export_chrome_trace(out)
    tb = tensorboard_trace_handler(trace_dir)

    def handler(prof) -> None:
        before = set(Path(trace_dir).glob("*.json")) if Path(trace_dir).is_dir() else set()
        tb(prof)
        written = sorted(set(Path(trace_dir).glob("*.json")) - before, key=lambda p: p.stat().st_mtime)
        if written:
            shutil.copyfile(written[-1], out)

    return handler


def _train(model: torch.nn.Module, make_batch: Callable, steps: int, out: str, trace_dir: str | None, lr: float) -> str:
    """One warm-up step, then ``steps`` profiled steps in one schedule cycle."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
    with profile(activities=ACTIVITIES, schedule=sched, on_trace_ready=_cycle_handler(trace_dir, out)) as prof:
        for _ in range(1 + steps):
            x, target = make_batch()
            with record_function("forward"):
                loss = torch.nn.functional.mse_loss(model(x), target)
            with record_function("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with record_function("optimizer"):
                opt.step()
            prof.step()
    _sync()
    return out


def mlp(
    size: int = 256,
    out: str = "trace.json",
    steps: int = WORKLOAD_DEFAULTS["mlp"][1],
    device: str = "npu",
    trace_dir: str | None = None,
    batch: int = 64,
) -> str:
    """2-layer MLP training steps (Linear-ReLU-Linear, AdamW): ``steps`` profiled after one warm-up."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(size, 4 * size), torch.nn.ReLU(), torch.nn.Linear(4 * size, size)).to(
        device
    )

    def make_batch():
        return torch.randn(batch, size, device=device), torch.randn(batch, size, device=device)

    return _train(model, make_batch, steps, out, trace_dir, lr=1e-3)


def transformer(
    size: int = 128,
    out: str = "trace.json",
    steps: int = WORKLOAD_DEFAULTS["transformer"][1],
    device: str = "npu",
    trace_dir: str | None = None,
    batch: int = 8,
    seq: int = 32,
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
        x = torch.randn(batch, seq, size, device=device)
        return x, torch.randn(batch, seq, size, device=device)

    return _train(model, make_batch, steps, out, trace_dir, lr=1e-4)


WORKLOADS = {"phases": phases, "mlp": mlp, "transformer": transformer}
# (size, profiled steps) when the caller gives none (shared with the CLI's --help); phases'
# reference size is 4096, the demo uses less.
DEFAULTS = WORKLOAD_DEFAULTS


def run(
    workload: str,
    size: int | None = None,
    steps: int | None = None,
    out: str = "trace.json",
    trace_dir: str | None = None,
) -> str:
    """Run one workload by name; returns the path of the chrome trace written. Raises ValueError
    for an unknown workload, or a size or steps below 1."""
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
        return phases(size=size, out=out, steps=steps)
    if trace_dir is None:
        trace_dir = os.fspath(Path(out).with_suffix("")) + "_tb"
    return WORKLOADS[workload](size=size, out=out, steps=steps, trace_dir=trace_dir)
