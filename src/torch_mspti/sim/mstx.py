"""``torch.npu.mstx`` of the simulated NPU: torch_npu's mstx marker API (docs/torch_npu.md 4).

``mark(message, stream=None, domain="default")``, ``range_start(message, stream=None,
domain="default") -> int`` and ``range_end(range_id, domain="default")`` have torch_npu's
parameters and answers: a bad argument warns and does nothing (``range_start`` then returns 0),
never raises. Each call goes to the simulated MSPTI's mstx entry points (``mstxMarkA``,
``mstxRangeStartA``, ``mstxRangeEnd`` and, for a domain other than ``"default"``, the
``mstxDomain*`` forms with the handle of ``mstxDomainCreateA``), which write MARKER records while
MARKER is enabled (docs/mspti.md 5.9). A call naming a stream, and every range end (its start may
have named one), first waits for the launch queue, so that the marker lands on the stream after
the work queued before it.

Real-MSPTI mode (``torch_mspti.sim.enable(cann_root=...)``): the same calls go to the mstx front end
of the fake CANN layer (``libfakecann.so``), which dispatches them to the real MSPTI's handlers. A
stream is passed as the fake runtime's handle for it, ``0x1000 + stream id`` (its
``aclrtStreamGetId`` maps handle h to stream id h - 0x1000).
Thread-safety: the calls may come from any thread (domain handles are created under a lock).
"""

from __future__ import annotations

import ctypes
import threading
import warnings

import torch

__all__ = ["mstx"]

_lock = threading.Lock()
_path: str | None = None  # the simulated MSPTI (or fake CANN layer) torch_mspti.sim.enable() bound
_cann = False  # _path is the fake CANN layer of the real-MSPTI mode
_lib: ctypes.CDLL | None = None
_domains: dict[str, int] = {}
# The fake CANN runtime's stream handles: aclrtStreamGetId(h) is h - 0x1000 (fakecann.c).
_CANN_STREAM_BASE = 0x1000


def _bind(library: str, cann: bool = False) -> None:
    """Called by torch_mspti.sim.enable() with the simulator it loaded, or (``cann``) the fake CANN
    layer whose mstx front end reaches the real MSPTI."""
    global _path, _cann
    _path = library
    _cann = cann


def _library() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is None:
            if not _path:
                raise RuntimeError("torch.npu.mstx: the simulated NPU is not enabled (torch_mspti.sim.enable())")
            # the library the plugin and the device already loaded (the fake CANN layer: RTLD_GLOBAL, as the device)
            lib = ctypes.CDLL(_path, mode=ctypes.RTLD_GLOBAL) if _cann else ctypes.CDLL(_path)
            if not _cann:
                lib.msptiSimStreamHandle.argtypes = [ctypes.c_uint32, ctypes.c_uint32]
                lib.msptiSimStreamHandle.restype = ctypes.c_void_p
            lib.mstxMarkA.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            lib.mstxRangeStartA.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            lib.mstxRangeStartA.restype = ctypes.c_uint64
            lib.mstxRangeEnd.argtypes = [ctypes.c_uint64]
            lib.mstxDomainCreateA.argtypes = [ctypes.c_char_p]
            lib.mstxDomainCreateA.restype = ctypes.c_void_p
            lib.mstxDomainMarkA.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
            lib.mstxDomainRangeStartA.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
            lib.mstxDomainRangeStartA.restype = ctypes.c_uint64
            lib.mstxDomainRangeEnd.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
            _lib = lib
        return _lib


def _domain(lib: ctypes.CDLL, name: str) -> int | None:
    """The handle of domain `name`; None for the default domain."""
    if name == "default":
        return None
    with _lock:
        if name not in _domains:
            _domains[name] = lib.mstxDomainCreateA(name.encode())
        return _domains[name]


def _stream_handle(lib: ctypes.CDLL, stream) -> int | None:
    """The simulator's (or fake CANN runtime's) aclrtStream for a torch stream of the simulated NPU;
    None for no stream."""
    if stream is None:
        return None
    torch.ops.npu_sim.drain()  # queued launches reach the stream before the marker
    if _cann:
        return _CANN_STREAM_BASE + int(stream.stream_id)
    return lib.msptiSimStreamHandle(int(stream.device_index), int(stream.stream_id))


def _valid(what: str, message, stream, domain) -> bool:
    if not message or not isinstance(message, str):
        warnings.warn(f"torch.npu.mstx.{what}: message must be a non-empty str, not {message!r}", stacklevel=3)
        return False
    if not domain or not isinstance(domain, str):
        warnings.warn(f"torch.npu.mstx.{what}: domain must be a non-empty str, not {domain!r}", stacklevel=3)
        return False
    if stream is not None and not (isinstance(stream, torch.Stream) and stream.device_type == 20):
        warnings.warn(f"torch.npu.mstx.{what}: stream must be a torch.npu.Stream, not {stream!r}", stacklevel=3)
        return False
    return True


class mstx:  # torch_npu's lower-case name
    """torch_npu's ``torch.npu.mstx`` marker API on the simulated NPU."""

    @staticmethod
    def mark(message: str, stream=None, domain: str = "default") -> None:
        """An instant marker `message` on the calling thread (and on `stream`'s lane when given)."""
        if not _valid("mark", message, stream, domain):
            return
        lib = _library()
        handle = _domain(lib, domain)
        s = _stream_handle(lib, stream)
        if handle is None:
            lib.mstxMarkA(message.encode(), s)
        else:
            lib.mstxDomainMarkA(handle, message.encode(), s)

    @staticmethod
    def range_start(message: str, stream=None, domain: str = "default") -> int:
        """Starts range `message`; returns its id for :meth:`range_end` (0 when refused)."""
        if not _valid("range_start", message, stream, domain):
            return 0
        lib = _library()
        handle = _domain(lib, domain)
        s = _stream_handle(lib, stream)
        if handle is None:
            return int(lib.mstxRangeStartA(message.encode(), s))
        return int(lib.mstxDomainRangeStartA(handle, message.encode(), s))

    @staticmethod
    def range_end(range_id: int, domain: str = "default") -> None:
        """Ends the range `range_id` that :meth:`range_start` returned."""
        if not isinstance(range_id, int):
            warnings.warn(
                f"torch.npu.mstx.range_end: range_id must be the int range_start returned, not {range_id!r}",
                stacklevel=2,
            )
            return
        if not domain or not isinstance(domain, str):
            warnings.warn(f"torch.npu.mstx.range_end: domain must be a non-empty str, not {domain!r}", stacklevel=2)
            return
        lib = _library()
        handle = _domain(lib, domain)
        torch.ops.npu_sim.drain()  # the range may have a stream: its end follows the queued work
        if handle is None:
            lib.mstxRangeEnd(range_id)
        else:
            lib.mstxDomainRangeEnd(handle, range_id)
