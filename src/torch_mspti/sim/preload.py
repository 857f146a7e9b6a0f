"""Restarting a process with an MSPTI library in ``LD_PRELOAD``, for ``torch-mspti demo --memcpy``.

MSPTI reports memory copies and memsets (MEMCPY, MEMSET) only when ``libmspti.so`` was in
``LD_PRELOAD`` when the process started: its ACL memory hooks interpose the runtime's calls, and a
later ``dlopen`` cannot replace them; MSPTI 26.x refuses to enable those kinds otherwise (mspti.md
5.5). torch-mspti's simulated MSPTI applies the same rule and also accepts its own file name
(``libmspti_sim.so``) as the preload. A running interpreter therefore cannot turn copies on: it
has to start again with the variable set, which :func:`restart` does with ``os.execve`` (same
process id, same standard streams).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

__all__ = ["MARK", "is_preloaded", "environment_with", "restart"]

#: Set in the restarted process, so that a library that is still not seen as preloaded is an
#: error instead of another restart.
MARK = "TORCH_MSPTI_PRELOAD_RESTARTED"


def _entries(value: str) -> list[str]:
    # ld.so separates LD_PRELOAD entries by colons or spaces.
    return [e for e in value.replace(" ", ":").split(":") if e]


def is_preloaded(library: str, environ: Mapping[str, str] = os.environ) -> bool:
    """True when ``LD_PRELOAD`` in ``environ`` has an entry with the file name of ``library``
    (an absolute path or a bare file name both count, as they do for MSPTI's own check)."""
    name = os.path.basename(library)
    return any(os.path.basename(e) == name for e in _entries(environ.get("LD_PRELOAD", "")))


def environment_with(library: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """A copy of ``environ`` whose ``LD_PRELOAD`` starts with ``library`` (other entries kept, in
    their order, after it) and that carries :data:`MARK`."""
    env = dict(environ)
    env["LD_PRELOAD"] = ":".join([library, *_entries(environ.get("LD_PRELOAD", ""))])
    env[MARK] = "1"
    return env


def restart(library: str, argv: Sequence[str]) -> None:
    """Replace this process by ``argv`` (``argv[0]`` is the executable) with ``library``
    preloaded. Does not return; raises OSError when the executable cannot be run and
    RuntimeError when this process was itself restarted for the preload (:data:`MARK` set) and
    still lacks it, which would otherwise restart forever."""
    if os.environ.get(MARK):
        raise RuntimeError(
            f"this process was restarted with LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r} but "
            f"{os.path.basename(library)} is not in it; set LD_PRELOAD={library} yourself"
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], list(argv), environment_with(library))
