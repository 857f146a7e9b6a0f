"""``torch.npu`` of the simulated NPU (registered by :func:`torch_mspti.sim.enable`).

The surface unmodified NPU scripts and torch itself use: device selection, synchronize, streams and
events, and the hooks torch's profiler, autograd and RNG seeding look for on a device module.
Streams and events are torch's generic ``torch.Stream`` / ``torch.Event`` running on the simulated
device's DeviceGuardImpl; stream ids start at 1 (1 is each device's default stream).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .mstx import mstx

__all__ = [
    "is_available",
    "is_initialized",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "synchronize",
    "Stream",
    "Event",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "initial_seed",
    "get_device_properties",
    "get_device_name",
    "empty_cache",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "memory_stats",
    "mstx",
]

_DeviceLike = int | str | torch.device | None
_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


def _ops():
    return torch.ops.npu_sim


def _index(dev: _DeviceLike) -> int:
    """Device index of an int / 'npu' / 'npu:1' / torch.device; None means the current device."""
    if dev is None:
        return current_device()
    if isinstance(dev, int):
        return dev
    d = torch.device(dev) if isinstance(dev, str) else dev
    if d.type != "npu":
        raise ValueError(f"expected an npu device, got {d}")
    return current_device() if d.index is None else d.index


def is_available() -> bool:
    return bool(_ops().is_configured())


def is_initialized() -> bool:
    return is_available()


def _lazy_init() -> None:
    """Nothing to initialise lazily: enable() configured the device."""


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return int(_ops().device_count())


def current_device() -> int:
    return int(_ops().current_device())


def set_device(dev: _DeviceLike) -> None:
    _ops().set_device(_index(dev))


class device:
    """Context manager that makes ``dev`` the current npu device of this thread."""

    def __init__(self, dev: _DeviceLike):
        self.idx = _index(dev)
        self.prev = -1

    def __enter__(self) -> None:
        self.prev = current_device()
        if self.idx != self.prev:
            set_device(self.idx)

    def __exit__(self, *exc: Any) -> None:
        if self.prev != self.idx:
            set_device(self.prev)


def synchronize(dev: _DeviceLike = None) -> None:
    """Wait until every kernel launched so far on ``dev`` has run on the simulated timeline.

    Queued launches are drained first. ``torch.profiler`` calls this when a profile ends.
    """
    _ops().synchronize(_index(dev))


class Stream(torch.Stream):
    """A stream of the simulated NPU (ids 2, 3, ... for new streams; 1 is the default stream)."""

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any) -> Stream:
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("npu", _index(device)), priority=priority)

    def __repr__(self) -> str:
        return f"<torch.npu.Stream device=npu:{self.device_index} stream_id={self.stream_id}>"


def _stream_object(dev_index: int, stream_id: int) -> Stream:
    return Stream(stream_id=stream_id, device_index=dev_index, device_type=_PRIVATEUSE1)


def current_stream(dev: _DeviceLike = None) -> Stream:
    idx = _index(dev)
    return _stream_object(idx, int(_ops().current_stream(idx)))


def default_stream(dev: _DeviceLike = None) -> Stream:
    return _stream_object(_index(dev), 1)


def set_stream(s: torch.Stream) -> None:
    _ops().set_stream(int(s.device_index), int(s.stream_id))


@contextlib.contextmanager
def stream(s: torch.Stream | None) -> Iterator[torch.Stream | None]:
    """Run the block with ``s`` as the current stream of its device (and its device current)."""
    if s is None:
        yield s
        return
    prev_dev = current_device()
    prev = current_stream(s.device_index)
    set_device(s.device_index)
    set_stream(s)
    try:
        yield s
    finally:
        set_stream(prev)
        set_device(prev_dev)


class Event(torch.Event):
    """An event of the simulated NPU; ``elapsed_time`` is measured on the simulated timeline (ms).

    A ``torch.Event`` subclass, as torch_npu's is (docs/torch_npu.md 2), so torch's generic device
    code (``torch.Stream.wait_event``, FSDP2) takes it. Created on the current npu device;
    ``record``/``wait`` default to the current stream of that device.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> Event:
        return super().__new__(
            cls,
            device=torch.device("npu", current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        pass  # torch.Event.__new__ did the work

    def record(self, stream: torch.Stream | None = None) -> None:
        super().record(stream if stream is not None else current_stream(self.device.index))

    def wait(self, stream: torch.Stream | None = None) -> None:
        super().wait(stream if stream is not None else current_stream())

    def query(self) -> bool:
        return bool(super().query())

    def elapsed_time(self, end_event: torch.Event) -> float:
        """ms from this event to ``end_event`` (a torch.npu.Event or torch.Event of the simulated NPU) on
        the simulated timeline; RuntimeError unless both were recorded. torch.Event.elapsed_time takes only
        an exact torch.Event as its peer, hence the device's own op."""
        if not isinstance(end_event, torch.Event) or end_event.device.type != "npu":
            raise TypeError(f"elapsed_time needs an npu event, got {end_event!r}")
        return float(_ops().event_elapsed_ms(int(self.event_id), int(end_event.event_id)))

    def __repr__(self) -> str:
        return f"<torch.npu.Event device={self.device} event_id={self.event_id}>"


class _NPUDeviceProperties:
    """What a simulated NPU reports about itself, with the fields of torch_npu's
    ``_NPUDeviceProperties`` (torch_npu/csrc/npu/Module.cpp): ``name``, ``total_memory`` (bytes),
    ``cube_core_num``, ``vector_core_num``, ``L2_cache_size`` (bytes). Every simulated device is
    modelled on an Ascend 910B3; its name says "(simulated)". Read-only.
    """

    __slots__ = ("name", "total_memory", "cube_core_num", "vector_core_num", "L2_cache_size")

    def __init__(self, name: str, total_memory: int, cube_core_num: int, vector_core_num: int, l2: int):
        for key, value in zip(self.__slots__, (name, total_memory, cube_core_num, vector_core_num, l2), strict=True):
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"_NPUDeviceProperties.{key} is read-only")

    def __repr__(self) -> str:
        return (
            f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"cube_core_num={self.cube_core_num}, vector_core_num={self.vector_core_num}, "
            f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)"
        )


def get_device_properties(dev: _DeviceLike = None) -> _NPUDeviceProperties:
    """Properties of a simulated NPU (int, 'npu', 'npu:1', torch.device or None = current).

    Raises RuntimeError for an index outside [0, device_count()).
    """
    return _NPUDeviceProperties(*_ops().device_properties(_index(dev)))


def get_device_name(dev: _DeviceLike = None) -> str:
    """Name of a simulated NPU, e.g. 'Ascend910B3 (simulated)'."""
    return get_device_properties(dev).name


def empty_cache() -> None:
    """Give the simulated caching allocator's unused reserved memory back (reports aclrtFree)."""
    _ops().empty_cache()


def _memory(dev: _DeviceLike) -> list[int]:
    return [int(v) for v in _ops().memory_stats(_index(dev))]


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes of live blocks of the simulated caching allocator on ``device`` (torch_npu's name).

    A block of an allocation of n bytes is n + 32 rounded up to a multiple of 512 (at least 512),
    as torch_npu's caching allocator sizes it (docs/torch_npu.md 1). Counts the memory npu ops
    allocate while running, including results and temporaries of their CPU implementation.
    """
    return _memory(device)[0]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """Peak of :func:`memory_allocated` since start or :func:`reset_peak_memory_stats` (bytes)."""
    return _memory(device)[2]


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes of segments the simulated allocator holds (grown in 2 MiB steps, kept until
    :func:`empty_cache`)."""
    return _memory(device)[1]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    """Peak of :func:`memory_reserved` since start or :func:`reset_peak_memory_stats` (bytes)."""
    return _memory(device)[3]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Peaks start again from the current values."""
    _ops().reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    reset_peak_memory_stats(device)


def memory_stats(device: _DeviceLike = None) -> dict[str, int]:
    """The subset of torch_npu's ``memory_stats`` keys the simulator keeps (bytes, counts)."""
    allocated, reserved, peak_allocated, peak_reserved, allocs, frees = _memory(device)
    return {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": peak_allocated,
        "reserved_bytes.all.current": reserved,
        "reserved_bytes.all.peak": peak_reserved,
        "allocation.all.allocated": allocs,
        "allocation.all.freed": frees,
        "allocation.all.current": allocs - frees,
    }


# RNG: npu tensors draw from torch's CPU generator (the device runs CPU kernels), so seeding the
# CPU generator, which torch.manual_seed already does, is all there is to do.
def manual_seed(seed: int) -> None:
    torch.random.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    torch.random.default_generator.seed()


def initial_seed() -> int:
    return int(torch.random.default_generator.initial_seed())


def get_rng_state(dev: _DeviceLike = None) -> torch.Tensor:
    return torch.random.get_rng_state()


def set_rng_state(new_state: torch.Tensor, dev: _DeviceLike = None) -> None:
    torch.random.set_rng_state(new_state)


def get_amp_supported_dtype() -> list:
    return [torch.float16, torch.bfloat16]


def _simulated() -> bool:
    """Marks this torch.npu as the simulator's (real torch_npu has no such attribute)."""
    return True
