"""A small on-demand tracing daemon for tests: it speaks the side of kineto's IPC protocol that a
dynolog daemon speaks, enough to register a traced process and hand it one trace request.

Written from kineto's sources (pytorch/kineto ``libkineto/src/IpcFabricConfigClient.{h,cpp}``,
``libkineto/src/ConfigLoader.cpp``, ``libkineto/src/Config.cpp`` and the vendored dynolog headers
``libkineto/third_party/dynolog_headers/dynolog/src/ipcfabric/{FabricManager,Endpoint,Utils}.h``);
the layouts below hold for the kineto in torch 2.7.1, 2.13.0 and 2.14.1 (checked by the messages
those torches send, tests/test_on_demand.py).

Protocol facts
==============

* Transport (Endpoint.h): ``AF_UNIX`` ``SOCK_DGRAM``, one message per datagram, non-blocking on
  kineto's side. The daemon's endpoint is named ``dynolog`` (IpcFabricConfigClient.cpp,
  ``kDynoIpcName``; Utils.h); each traced process binds its own endpoint,
  ``dynoconfigclient<uuid4>``, and the daemon answers to it.
* Addresses (Endpoint.h ``setAddress_``): by default a name is an abstract socket address whose
  bytes are a NUL, the name, and one more NUL, which kineto counts in the address length: the
  daemon must bind ``b"\\0dynolog\\0"``, not ``b"\\0dynolog"``. When the traced process has
  ``KINETO_IPC_SOCKET_DIR`` set, every name is instead a socket file ``<dir>/<name>`` (the daemon's
  is ``<dir>/dynolog``), so each test can have a daemon of its own. kineto checks only the name's
  length, not the directory's: ``<dir>/dynoconfigclient<uuid4>`` and its NUL must fit in
  ``sun_path`` (108 bytes), so the directory may have at most 54 bytes (:class:`KinetoDaemon`
  checks).
  The name ``dynolog`` itself is fixed: kineto has no setting for it.
* A message (FabricManager.h ``Message``/``Metadata``) is a 40-byte header, then ``size`` bytes of
  payload: ``size_t size`` (native, 8 bytes on LP64) and ``char type[32]``, a NUL-terminated tag.
* ``"ctxt"`` (registration; Utils.h ``LibkinetoContext``, 16 bytes): ``int32 gpu``, ``int32 pid``,
  ``int64 jobid``. The answer is a ``"ctxt"`` message whose payload is one ``int32`` (kineto reads
  ``*(int*)buf``; here: how many processes registered that device). kineto sends it
  (``registerInstance``) only from its CUDA event profiler (EventProfilerController.cpp, in older
  kineto; newer kineto has no caller): a CPU-only process never sends it, it only asks for configs.
* ``"req"`` (config request; Utils.h ``LibkinetoRequest``, 16 + 4 n bytes): ``int32 type`` (bit
  mask, IpcFabricConfigClient.h ``LibkinetoConfigType``: 1 events, 2 activities; measured: torch
  2.7.1 and 2.13.0 send 3, torch 2.14.1 sends 2, its kineto having dropped the events kind; the
  activities bit is clear while a trace is under way), ``int32 n``, ``int64 jobid``
  (``SLURM_JOB_ID`` or 0), then ``n`` ``int32`` pids: the process first, then its ancestors. The
  answer is a ``"req"`` message whose payload is the config text, not NUL-terminated (kineto
  builds ``std::string(buf, size)``); an empty payload means nothing to do.
* Timing (IpcFabricConfigClient.cpp ``poll_recv(maxIpcRetries, kSleepUs)``): kineto waits for the
  answer 5 (older kineto) or 9 polls 10 ms apart, so an answer must leave within 50 ms; a later one
  stays queued at the process and is taken as the answer to its next request. The process asks
  every ``ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS`` (Config.cpp; 5 s by default), a key of the base
  config file that ``KINETO_CONFIG`` names (ConfigLoader.cpp).
* The config text (Config.cpp) is ``KEY=VALUE`` lines: ``ACTIVITIES_LOG_FILE`` (the trace file;
  kineto writes ``<stem>_<pid>.json`` for ``<stem>.json``, and newer kineto ignores an on-demand
  path outside ``KINETO_ONDEMAND_TRACE_DIR``, ``/tmp/`` by default), ``ACTIVITY_TYPES``
  (comma-separated kineto activity names, e.g. ``kernel,privateuse1_runtime``),
  ``ACTIVITIES_DURATION_MSECS``, or ``PROFILE_START_ITERATION`` with ``ACTIVITIES_ITERATIONS``
  (iterations are optimizer steps when ``KINETO_USE_DAEMON`` is set, torch/profiler/__init__.py).

Units: pids and device ids are ints, timeouts seconds. Thread-safety: :meth:`KinetoDaemon.start`
runs one serving thread; every public method may be called from any thread (one lock guards the
state). The daemon answers each request at once from that thread; it never blocks on the test.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

ENDPOINT = "dynolog"
CLIENT_PREFIX = "dynoconfigclient"  # + a 36-character uuid4
SOCKET_DIR_ENV = "KINETO_IPC_SOCKET_DIR"
HEADER = struct.Struct("@N32s")  # Metadata: size_t size; char type[32]
CONTEXT = struct.Struct("@iiq")  # LibkinetoContext: gpu, pid, jobid
REQUEST = struct.Struct("@iiq")  # LibkinetoRequest without its pids: type, n, jobid
ACTIVITIES = 0x2  # LibkinetoConfigType::ACTIVITIES
_SUN_PATH = 108
_MAX_DATAGRAM = 1 << 16


@dataclass
class Request:
    """One ``"req"`` message: ``pids[0]`` is the asking process, the rest its ancestors."""

    type: int
    jobid: int
    pids: list[int]
    answered: str  # the config text sent back ("" for none)


@dataclass
class _Pending:
    config: str
    pid: int | None
    served_to: int | None = None
    served: threading.Event = field(default_factory=threading.Event)


class KinetoDaemon:
    """Serves kineto's ``"ctxt"`` and ``"req"`` messages on the ``dynolog`` endpoint.

    ``socket_dir=None`` binds the abstract name (what a real dynolog does, one per network
    namespace: a second daemon gets ``OSError`` EADDRINUSE); with a directory the endpoint is
    ``<socket_dir>/dynolog`` and the traced process needs ``KINETO_IPC_SOCKET_DIR=<socket_dir>``
    (:meth:`client_env`). Use as a context manager, or :meth:`start` and :meth:`stop`.
    """

    def __init__(self, socket_dir: str | None = None) -> None:
        if socket_dir is not None:
            longest = _SUN_PATH - 1 - (1 + len(CLIENT_PREFIX) + 36)  # a client's path and its NUL
            if len(os.fsencode(socket_dir)) > longest:
                raise ValueError(
                    f"socket_dir {socket_dir!r} is longer than {longest} bytes: kineto's endpoints in it "
                    f"would not fit in sun_path ({_SUN_PATH} bytes)"
                )
        self.socket_dir = socket_dir
        self._lock = threading.Lock()
        self._registered: dict[int, int] = {}  # pid -> device, from "ctxt"
        self._requests: list[Request] = []
        self._pending: _Pending | None = None
        self._malformed = 0
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str | bytes:
        """The bound address: the socket file's path, or the abstract name's bytes."""
        if self.socket_dir is None:
            return b"\0" + ENDPOINT.encode() + b"\0"
        return os.path.join(self.socket_dir, ENDPOINT)

    def client_env(self) -> dict[str, str]:
        """What the traced process's environment needs, set before torch is imported."""
        env = {"KINETO_USE_DAEMON": "1"}
        if self.socket_dir is not None:
            env[SOCKET_DIR_ENV] = self.socket_dir
        return env

    def start(self) -> KinetoDaemon:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            if self.socket_dir is not None and os.path.exists(self.address):
                os.unlink(self.address)
            sock.bind(self.address)
        except OSError:
            sock.close()
            raise
        sock.settimeout(0.05)  # how often the serving thread looks at the stop flag
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="kineto-daemon", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()
        if self.socket_dir is not None and os.path.exists(self.address):
            os.unlink(self.address)

    def __enter__(self) -> KinetoDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the test asks -------------------------------------------------------------------

    def registered_pids(self) -> set[int]:
        """The processes the daemon knows: those that sent ``"ctxt"`` and those that asked for a
        config (``"req"``, its first pid), as a CPU-only process only asks."""
        with self._lock:
            return set(self._registered) | {r.pids[0] for r in self._requests if r.pids}

    def devices(self) -> dict[int, int]:
        """pid -> device id, of the processes that sent ``"ctxt"``."""
        with self._lock:
            return dict(self._registered)

    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    @property
    def malformed(self) -> int:
        """Datagrams dropped as not kineto's (short, truncated, unknown type)."""
        with self._lock:
            return self._malformed

    def wait_for_request(self, pid: int, timeout: float) -> bool:
        """True once ``pid`` (as the asking process or an ancestor) sent a ``"req"``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if any(pid in r.pids for r in self._requests):
                    return True
            time.sleep(0.05)
        return False

    def serve_config(self, config: str, pid: int | None = None) -> None:
        """Hand ``config`` to the next activity request from ``pid`` (or from any process): once,
        as dynolog hands out a ``dyno gputrace`` request. Replaces a config not yet taken."""
        with self._lock:
            self._pending = _Pending(config, pid)

    def wait_served(self, timeout: float) -> int | None:
        """The pid the config of :meth:`serve_config` went to, or None if not taken in time."""
        with self._lock:
            pending = self._pending
        if pending is None or not pending.served.wait(timeout):
            return None
        return pending.served_to

    # -- serving thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                data, _, flags, sender = self._sock.recvmsg(_MAX_DATAGRAM)
            except TimeoutError:
                continue
            except OSError:
                return
            answer = self._answer(data, flags)
            if answer is not None and sender:
                try:
                    self._sock.sendto(answer, sender)
                except OSError:
                    pass  # the process went away; kineto retries on its next poll

    def _answer(self, data: bytes, flags: int) -> bytes | None:
        if flags & socket.MSG_TRUNC or len(data) < HEADER.size:
            return self._drop()
        size, raw_type = HEADER.unpack_from(data)
        payload = data[HEADER.size :]
        kind = raw_type.split(b"\0", 1)[0].decode("ascii", "replace")
        if size != len(payload):
            return self._drop()
        if kind == "ctxt" and size == CONTEXT.size:
            device, pid, _jobid = CONTEXT.unpack(payload)
            with self._lock:
                self._registered[pid] = device
                count = sum(1 for d in self._registered.values() if d == device)
            return _message("ctxt", struct.pack("@i", count))
        if kind == "req" and size >= REQUEST.size:
            req_type, n, jobid = REQUEST.unpack_from(payload)
            if n < 0 or size != REQUEST.size + 4 * n:
                return self._drop()
            pids = list(struct.unpack_from(f"@{n}i", payload, REQUEST.size))
            config = ""
            with self._lock:
                pending = self._pending
                if (
                    pending is not None
                    and not pending.served.is_set()
                    and req_type & ACTIVITIES
                    and (pending.pid is None or pending.pid in pids)
                ):
                    config = pending.config
                    pending.served_to = pids[0] if pids else None
                    pending.served.set()
                self._requests.append(Request(req_type, jobid, pids, config))
            return _message("req", config.encode())
        return self._drop()

    def _drop(self) -> None:
        with self._lock:
            self._malformed += 1
        return None


def _message(kind: str, payload: bytes) -> bytes:
    return HEADER.pack(len(payload), kind.encode()) + payload
