"""Workload snippets (for tests/simrun.py) whose kernels name the call that launched them.

Kernel ``K<n>`` is launched inside the one op call whose last argument is ``n`` (see
tests/op_links.py), on the calling thread, with ``sim.msptiSimLaunchKernel``. Run them with
``record_shapes=True`` (the argument becomes a Concrete Input) and ``ALL_THREADS`` (torch records
the ops of threads started inside the profile).
"""

from __future__ import annotations

ALL_THREADS = {"profile_all_threads": True}

# Thread A runs a1 then a2, thread B runs b1, forced into this order with events:
#   A enters a1; B enters b1; A leaves a1 (MSPTI pops b1); A enters a2; B leaves b1 (MSPTI pops
#   a2); A launches K2 inside a2: MSPTI's stack then holds only a1, so its hint names a1.
# Each op launches one kernel: K1 in a1 (before B enters), K3 in b1, K2 in a2 (last).
INTERLEAVE = """
import threading
E = {n: threading.Event() for n in ("a1_in", "b1_in", "a1_out", "a2_in", "b1_out")}

def _k(n):
    sim.msptiSimLaunchKernel(f"K{n}".encode(), b"KERNEL_AICORE", 0, 1, 2000)

@torch.library.custom_op("links::a1", mutates_args=())
def a1(t: torch.Tensor, n: int) -> torch.Tensor:
    _k(n); E["a1_in"].set(); E["b1_in"].wait(10)
    return t.clone()

@torch.library.custom_op("links::a2", mutates_args=())
def a2(t: torch.Tensor, n: int) -> torch.Tensor:
    E["a2_in"].set(); E["b1_out"].wait(10); _k(n)
    return t.clone()

@torch.library.custom_op("links::b1", mutates_args=())
def b1(t: torch.Tensor, n: int) -> torch.Tensor:
    E["a1_in"].wait(10); _k(n); E["b1_in"].set(); E["a2_in"].wait(10)
    return t.clone()

def thread_a():
    torch.ops.links.a1(x, 1); E["a1_out"].set(); torch.ops.links.a2(x, 2)

def thread_b():
    E["a1_in"].wait(10); torch.ops.links.b1(x, 3); E["b1_out"].set()

threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out["all_events_set"] = all(e.is_set() for e in E.values())
sync()
"""
INTERLEAVE_OPS = {"links::a1", "links::a2", "links::b1"}

# N threads start together; thread w calls its own op links::op<w> with n = 1000 w + i, 30-40
# times; each call sleeps (releasing the GIL, so other threads push their ops meanwhile) and
# launches kernel K<n> on stream 1 + n % 4.
_THREADS = """
import random, threading, time
N, SEED = {n}, {seed}
start = threading.Barrier(N)

def make_op(w, rng):
    @torch.library.custom_op(f"links::op{{w}}", mutates_args=())
    def op(t: torch.Tensor, n: int) -> torch.Tensor:
        time.sleep(rng.random() * 3e-4)
        sim.msptiSimLaunchKernel(f"K{{n}}".encode(), b"KERNEL_AICORE", 0, 1 + n % 4, 2000)
        time.sleep(rng.random() * 1e-4)
        return t.clone()
    return getattr(torch.ops.links, f"op{{w}}")

def worker(w):
    rng = random.Random(SEED * 100 + w)
    op = make_op(w, rng)
    calls = rng.randint(30, 40)
    out.setdefault("calls", {{}})[w] = calls
    start.wait()
    for i in range(calls):
        time.sleep(rng.random() * 1e-4)
        op(x, 1000 * w + i)

threads = [threading.Thread(target=worker, args=(w,)) for w in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sync()
"""


def threads_workload(n: int, seed: int = 7) -> str:
    return _THREADS.format(n=n, seed=seed)


def thread_ops(n: int) -> set[str]:
    return {f"links::op{w}" for w in range(n)}


# links::enqueue(n) hands n to a launcher thread (a task queue, which runs no op) and returns; the
# launcher launches K<n> on stream 1 + n % 2 after `delay` s, timing the call with CLOCK_REALTIME
# (extra["launch_ns"]["<profile>:<n>"]). With direct=True every third call launches its kernel
# inside the op instead. Runs once per profile (calls 100 p ... 100 p + 29).
_QUEUE = """
import collections, queue, threading, time
DIRECT, DELAY, HANDOFF = {direct}, {delay}, {handoff}
tasks = queue.Queue()
times = out.setdefault("launch_ns", {{}})
first, count = 100 * profile_index, 30
opened = collections.defaultdict(threading.Event)    # op n is open on the op thread
launched = collections.defaultdict(threading.Event)  # task n was launched

def launcher():
    out.setdefault("launcher_tids", []).append(threading.get_native_id())
    while (n := tasks.get()) is not None:
        time.sleep(DELAY)
        if HANDOFF and n + 1 < first + count:
            opened[n + 1].wait(10)  # launch while the next op is open, whatever the machine's load
        t0 = time.time_ns()
        sim.msptiSimLaunchKernel(f"K{{n}}".encode(), b"KERNEL_AICORE", 0, 1 + n % 2, 2000)
        times[f"{{profile_index}}:{{n}}"] = (t0, time.time_ns())
        launched[n].set()

if profile_index == 0:
    @torch.library.custom_op("links::enqueue", mutates_args=())
    def enqueue(t: torch.Tensor, n: int) -> torch.Tensor:
        opened[n].set()
        if DIRECT and n % 3 == 0:
            sim.msptiSimLaunchKernel(f"K{{n}}".encode(), b"KERNEL_AICORE", 0, 1 + n % 2, 2000)
        else:
            tasks.put(n)
        time.sleep(1e-4)  # the launcher launches while this op, or the next, is open on this thread
        if HANDOFF and n > first:
            launched[n - 1].wait(10)  # the previous task's launch happens inside this op
        return t.clone()

worker = threading.Thread(target=launcher)
worker.start()
for n in range(first, first + count):
    torch.ops.links.enqueue(x, n)
tasks.put(None)
worker.join()
sync()
"""


def queue_workload(direct: bool = False, delay: float = 0.0, handoff: bool = False) -> str:
    """30 ops that hand their launch to a launcher thread (a task queue), one per op; ``direct``: every
    third op launches itself; ``delay``: seconds the launcher waits before each launch; ``handoff``:
    each task is launched while the next op is open on the op thread (that op waits for it), so the
    launch lies in another op than its own however loaded the machine is."""
    return _QUEUE.format(direct=direct, delay=delay, handoff=handoff)
