"""torch_npu's built-in MSPTI backend as a peer in a test process, and the CANN root it finds MSPTI in.

Two peers, both a ``libtorch_npu.so`` next to a ``torch_npu/version.py`` as in the wheel, loaded with
``ctypes.CDLL(path, RTLD_GLOBAL)`` into a CPU torch process (see ``simrun.run(peer=...)``):

* :func:`standin_peer` -- tests/torch_npu_peer/standin, built with CMake against the installed torch;
* :func:`real_peer` -- the real library from the ``torch-npu`` wheel on PyPI (``pip download``), with
  generated stub libraries for the CANN libraries it needs (:func:`generate_stubs`).

:func:`fake_cann` is a CANN root whose ``lib64/libmspti.so`` is the logging shim
(tests/torch_npu_peer/mspti_trace_shim.c): torch_npu finds it through ``$ASCEND_HOME_PATH`` and a
bare-name dlopen (``LD_LIBRARY_PATH``), torch-mspti through ``TORCH_MSPTI_LIBRARY``, so both reach one
simulator instance (``MSPTI_TRACE_TARGET``), and every MSPTI call is logged with its caller.

Everything built or downloaded lives in a cache directory (``$TORCH_MSPTI_TEST_CACHE``, else
``$XDG_CACHE_HOME/torch-mspti-tests``, else ``~/.cache/torch-mspti-tests``), one entry per version or
per hash of its inputs, built into a temporary directory under a file lock and renamed into place, so
concurrent xdist workers build each entry once. Findings behind each choice: tests/torch_npu_peer/FINDINGS.md.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path

from filelock import FileLock

HERE = Path(__file__).resolve().parent
PEER_SOURCES = HERE / "torch_npu_peer"
REPO = HERE.parent
WHEEL_VERSION = "2.13.0"
# The wheel's library files that get loaded (libtorch_npu.so NEEDs the other two).
_WHEEL_LIBS = ("libtorch_npu.so", "libtensorpipe.so", "libnpu_profiler.so")
# Libraries torch_npu dlopens at run time (not NEEDED) whose absence changes its profiler's behaviour:
# without libascend_hal.so its RecordFunction callback throws after every CUSTOM0 push (FINDINGS.md).
_DLOPENED_STUBS = {
    "libascend_hal.so": "int halGetAPIVersion(int *version) { if (version) *version = 0; return 0; }\n"
    "int halGetDeviceInfo(void) { return 0; }\n"
}
_RUNTIME_SONAMES = (
    "libc.so.6",
    "libm.so.6",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
)


class PeerUnavailable(Exception):
    """The peer cannot be had here (e.g. the wheel cannot be downloaded); the message says why."""


@dataclass(frozen=True)
class Peer:
    """A loadable torch_npu MSPTI backend: ``library`` and what its process needs to load it."""

    kind: str  # "standin" | "standin-registry" | "real"
    library: Path  # .../torch_npu/lib/libtorch_npu.so
    version: str  # __version__ of .../torch_npu/version.py
    ld_library_path: tuple[str, ...] = ()  # directories with stub libraries


@dataclass(frozen=True)
class FakeCann:
    """A CANN root whose lib64/libmspti.so is the logging MSPTI shim."""

    root: Path

    @property
    def library(self) -> Path:
        return self.root / "lib64" / "libmspti.so"

    def env(self, simulator: str, log: Path, peer: Peer) -> dict[str, str]:
        """Environment of a child in which torch_npu and torch-mspti both reach ``simulator`` through the
        shim, which logs every MSPTI call to ``log``."""
        return {
            "ASCEND_HOME_PATH": str(self.root),
            "LD_LIBRARY_PATH": os.pathsep.join([str(self.library.parent), *peer.ld_library_path]),
            "TORCH_MSPTI_LIBRARY": str(self.library),
            "MSPTI_TRACE_TARGET": simulator,
            "MSPTI_TRACE_LOG": str(log),
        }


def cache_dir() -> Path:
    base = os.environ.get("TORCH_MSPTI_TEST_CACHE")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "torch-mspti-tests")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def digest(*parts: bytes | str | Path) -> str:
    """Short hash of file contents (Path) and strings: the cache key of what is built from them."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.read_bytes() if isinstance(p, Path) else p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]


def cached(name: str, build: Callable[[Path], None]) -> Path:
    """``cache_dir()/name``, built once by ``build(tmp_dir)`` under a lock (xdist-safe)."""
    target = cache_dir() / name
    if (target / ".complete").exists():
        return target
    with FileLock(str(target) + ".lock"):
        if (target / ".complete").exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=name + ".", dir=cache_dir()))
        try:
            build(tmp)
            (tmp / ".complete").write_text("")
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def read_version(library: Path) -> str:
    """``__version__`` from the version.py of the torch_npu package that holds ``library`` (read as text)."""
    text = (library.parent.parent / "version.py").read_text()
    m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    if not m:
        raise ValueError(f"no __version__ in {library.parent.parent / 'version.py'}")
    return m.group(1)


def _run(cmd: list[str], what: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what} failed (rc={proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


# ------------------------------------------------------------------------------------------ fake CANN


# Shim build flags per simulator generation (None = the default 26.1 library): the shim exports the
# same MSPTI symbols as the library it wraps, as torch-mspti picks its drain order from them.
_SHIM_FLAGS = {
    None: (),
    "26.1": (),
    "26.0": ("-DSHIM_NO_IS_ENABLED",),
    "8.2": ("-DSHIM_NO_IS_ENABLED",),
    "8.1": ("-DSHIM_NO_IS_ENABLED",),
    "8.0.RC3": ("-DSHIM_NO_IS_ENABLED", "-DSHIM_NO_EXTERNAL_CORRELATION"),
}


def fake_cann(generation: str | None = None) -> FakeCann:
    """The CANN root with the logging shim as lib64/libmspti.so, exporting the MSPTI symbols of the
    simulator ``generation`` (see ``torch_mspti.simulator_library``); built once per source and flags."""
    shim = PEER_SOURCES / "mspti_trace_shim.c"
    flags = _SHIM_FLAGS[generation]

    def build(tmp: Path) -> None:
        (tmp / "lib64").mkdir()
        out = str(tmp / "lib64" / "libmspti.so")
        _run(
            ["gcc", "-shared", "-fPIC", "-O1", *flags, "-o", out, str(shim), "-ldl", "-lpthread"], "compiling the shim"
        )
        # A CANN root has libprofapi.so beside libmspti.so (libmspti's static initialiser needs it,
        # mspti.md 6 item 7); torch-mspti refuses a libmspti it cannot find it for. An empty one
        # stands in: the shim forwards to the simulator, which needs none.
        stub = tmp / "profapi.c"
        stub.write_text("int torch_mspti_test_profapi_stub;\n")
        _run(["gcc", "-shared", "-fPIC", "-o", str(tmp / "lib64" / "libprofapi.so"), str(stub)], "compiling profapi")

    return FakeCann(cached(f"fake-cann-v2-{digest(shim, *flags)}", build))


# ------------------------------------------------------------------------------------------ stand-in


_STANDIN_VARIANTS = {
    "kineto": ("standin", "torch_npu/lib/libtorch_npu.so"),
    "registry": ("standin-registry", "torch_npu/lib/libtorch_npu.so"),
    "vendor": ("standin-vendor", "other_vendor/lib/libother_vendor_profiler.so"),
}


def standin_peer(variant: str = "kineto") -> Peer:
    """The stand-in backend (tests/torch_npu_peer/standin). ``variant``: "kineto" registers as torch_npu
    2.13.0 does (straight with libkineto from a static initialiser); "registry" through torch's
    PrivateUse1 profiler registry; "vendor" is "registry" under another name (some other vendor's
    PrivateUse1 profiler, not torch_npu's). All three variants are built at once."""
    if variant not in _STANDIN_VARIANTS:
        raise ValueError(f"variant must be one of {sorted(_STANDIN_VARIANTS)}, not {variant!r}")
    src = PEER_SOURCES / "standin"
    inputs = sorted(src.iterdir()) + [REPO / "cmake" / "FindTorchForPlugin.cmake"]
    inputs += sorted((REPO / "third_party" / "mspti" / "include" / "mspti").iterdir())
    key = digest(*inputs, sys.executable, _torch_version())

    def build(tmp: Path) -> None:
        if not shutil.which("cmake"):
            raise RuntimeError("cmake is not on PATH: it builds the torch_npu stand-in (tests/torch_npu_peer/standin)")
        env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = ["cmake", "-S", str(src), "-B", str(tmp / "build"), *gen, f"-DPython_EXECUTABLE={sys.executable}"]
        _run(configure, "configuring the stand-in", env=env)
        _run(["cmake", "--build", str(tmp / "build"), "-j", "2"], "building the stand-in", env=env)
        for v in _STANDIN_VARIANTS:
            if (tmp / "build" / v).is_dir():  # the registry variants need a torch with the registry
                shutil.copytree(tmp / "build" / v, tmp / v)
        shutil.rmtree(tmp / "build")

    kind, rel = _STANDIN_VARIANTS[variant]
    lib = cached(f"standin-{key}", build) / variant / rel
    if not lib.is_file() and variant != "kineto" and not _torch_has_profiler_registry():
        raise PeerUnavailable(
            f"torch {_torch_version()} has no PrivateUse1 profiler registry "
            "(torch/csrc/profiler/standalone/privateuse1_profiler.h, newer than torch 2.7): no profiler can "
            "register through it there, so there is none to coexist with"
        )
    if not lib.is_file():  # the build made no such library although this torch can: a failure
        raise FileNotFoundError(f"the stand-in build made no {lib}")
    return Peer(kind, lib, read_version(lib))


def _torch_version() -> str:
    return metadata.version("torch")


def _torch_has_profiler_registry() -> bool:
    """Whether the installed torch ships torch's PrivateUse1 profiler registry header (the one
    condition under which a missing registry stand-in is a skip and not a build failure)."""
    spec = util.find_spec("torch")
    root = Path(spec.origin).parent if spec and spec.origin else None
    header = "include/torch/csrc/profiler/standalone/privateuse1_profiler.h"
    return root is not None and (root / header).is_file()


# ------------------------------------------------------------------------------------------ real wheel


def real_peer(version: str = WHEEL_VERSION) -> Peer:
    """libtorch_npu.so of the torch-npu ``version`` wheel from PyPI plus its CANN stubs.

    Raises PeerUnavailable when the wheel cannot be downloaded (no network, no such wheel for this
    machine). The wheel is unpacked (only the libraries and version.py are kept) into the cache.
    Also raises it when the running torch is not the minor the wheel is built for: torch_npu pins
    one exact torch, and its library loaded into another minor aborts (std::bad_alloc under torch
    2.7.1), so the stand-in alone plays torch_npu's backend there (torch 2.7's torch_npu release has
    no MSPTI backend at all: docs/torch_npu.md 7.2.6)."""
    torch_minor = ".".join(_torch_version().split("+")[0].split(".")[:2])
    wheel_minor = ".".join(version.split(".")[:2])
    if torch_minor != wheel_minor:
        raise PeerUnavailable(
            f"torch-npu {version} is built for torch {wheel_minor} and cannot be loaded into torch "
            f"{_torch_version()} (torch_npu pins one exact torch, and the library aborts in another); the "
            "stand-in plays torch_npu's MSPTI backend here (torch 2.7's release, 2.7.1.post11, has no such "
            "backend: docs/torch_npu.md 7.2.6)"
        )
    machine = platform.machine()

    def fetch(tmp: Path) -> None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
               "--platform", f"manylinux_2_28_{machine}", "--retries", "2", "--timeout", "30",
               "-d", str(tmp / "wheel"), f"torch-npu=={version}"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        wheels = list((tmp / "wheel").glob("torch_npu-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise PeerUnavailable(f"pip download torch-npu=={version} failed: {last}")
        with zipfile.ZipFile(wheels[0]) as z:
            for name in [f"torch_npu/lib/{n}" for n in _WHEEL_LIBS] + ["torch_npu/version.py"]:
                z.extract(name, tmp)
        shutil.rmtree(tmp / "wheel")

    try:
        root = cached(f"torch_npu-{version}-{machine}", fetch)
    except subprocess.TimeoutExpired as exc:
        raise PeerUnavailable(f"pip download torch-npu=={version} timed out after {exc.timeout:.0f} s") from None
    libs = [root / "torch_npu" / "lib" / n for n in _WHEEL_LIBS]
    key = digest(*[str(p.stat().st_size) for p in libs], _torch_version(), Path(__file__))
    stubs = cached(f"torch_npu-{version}-stubs-{key}", lambda tmp: generate_stubs(libs, tmp))
    return Peer("real", libs[0], read_version(libs[0]), (str(stubs),))


def _dynamic_symbols(path: Path) -> list[tuple[str, str, str, str]]:
    """(name, type, bind, section) of every dynamic symbol of ``path`` (readelf)."""
    out = _run(["readelf", "-W", "--dyn-syms", str(path)], f"readelf {path.name}").stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":") and f[0][:-1].isdigit():
            rows.append((f[7], f[3], f[4], f[6]))
    return rows


def _needed(path: Path) -> list[str]:
    out = _run(["readelf", "-W", "-d", str(path)], f"readelf {path.name}").stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _torch_libraries() -> list[Path]:
    """torch's own shared libraries and the Python library: what a torch process has loaded."""
    spec = util.find_spec("torch")
    torch_lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    libs = [p for p in torch_lib.iterdir() if p.is_file() and ".so" in p.name]
    libpython = Path(sysconfig.get_config_var("LIBDIR") or "") / (sysconfig.get_config_var("LDLIBRARY") or "")
    return libs + ([libpython] if libpython.is_file() else [])


def generate_stubs(libraries: Iterable[Path], out: Path) -> None:
    """Stub libraries in ``out`` for every NEEDED library of ``libraries`` that neither torch, the
    C/C++ runtime nor ``libraries`` themselves provide, exporting exactly the unversioned undefined
    symbols no one provides: functions that return 0 (ACL's success code), data objects zero-filled
    (4096 bytes: an undefined reference carries no size). All symbols go into the first such library
    (the loader resolves them from the global scope; which NEEDED library defines them does not
    matter), the others are empty. Plus the libraries torch_npu dlopens at run time
    (``_DLOPENED_STUBS``). Versioned references (glibc, libstdc++) are always provided by the runtime."""
    libraries = list(libraries)
    provided: set[str] = set()
    for lib in _torch_libraries() + libraries:
        provided.update(name.split("@")[0] for name, _, _, sec in _dynamic_symbols(lib) if sec != "UND")
    runtime = []
    for soname in _RUNTIME_SONAMES:
        try:
            runtime.append(ctypes.CDLL(soname))
        except OSError:
            pass
    wanted: dict[str, str] = {}
    for lib in libraries:
        for name, typ, bind, sec in _dynamic_symbols(lib):
            if sec != "UND" or bind != "GLOBAL" or "@" in name or name in provided:
                continue
            if any(hasattr(h, name) for h in runtime):
                continue
            wanted[name] = "OBJECT" if typ in ("OBJECT", "TLS") else "FUNC"
    known = {p.name for p in _torch_libraries()} | {p.name for p in libraries}
    missing = []
    for lib in libraries:
        for soname in _needed(lib):
            if soname in known or soname in missing:
                continue
            try:
                ctypes.CDLL(soname)
            except OSError:
                missing.append(soname)
    sources = dict.fromkeys(missing, "")
    if wanted:
        if not missing:
            raise RuntimeError(f"undefined symbols but no missing library to put them in: {sorted(wanted)[:10]}")
        lines = ["/* Generated by tests/npu_peer.py: stubs for torch_npu's CANN dependencies. */"]
        for name, kind in sorted(wanted.items()):
            lines.append(
                f"char {name}[4096] __attribute__((aligned(64)));"
                if kind == "OBJECT"
                else f"long {name}(void) {{ return 0; }}"
            )
        sources[missing[0]] = "\n".join(lines) + "\n"
    sources.update(_DLOPENED_STUBS)
    for soname, text in sources.items():
        c_file = out / (soname + ".c")
        c_file.write_text(text)
        _run(
            ["gcc", "-shared", "-fPIC", "-O0", "-w", "-o", str(out / soname), str(c_file)],
            f"compiling the {soname} stub",
        )
    (out / "stubs.txt").write_text("".join(f"{kind} {name}\n" for name, kind in sorted(wanted.items())))
