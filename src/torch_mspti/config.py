"""Typed, validated settings of the plugin (``torch_mspti.config``).

Each setting is an attribute: reading returns an ``int``, ``bool`` or ``str``; assigning
validates it and raises ``TypeError`` (wrong type) or ``ValueError`` (out of range), naming the
field, the value and the allowed range. Changes apply from the next profiling session and are
thread-safe. ``library_path`` is fixed once a library has been loaded (RuntimeError).

Every setting can also be given as an environment variable ``TORCH_MSPTI_<NAME>`` (upper case;
``library_path`` is ``TORCH_MSPTI_LIBRARY``), read when the package is imported; invalid values
are reported by :func:`environment_errors` and in diagnostics, and the default is kept.

========================== ====== ======= ================================================
setting                    type   unit    meaning
========================== ====== ======= ================================================
buffer_size                int    bytes   size of each MSPTI activity buffer (8 MiB)
buffer_pool_cap            int    buffers buffers outstanding at once (64); more are declined
drain_poll_interval_ms     int    ms      pause between FlushAll polls in stop() (5)
drain_quiet_flushes        int            empty flushes ending a drain with no known launch (3)
drain_timeout_ms           int    ms      upper bound of the drain (1000)
drain_order                str            auto, disable_first or poll_first
library_path               str    path    explicit libmspti.so ("" = search)
enable_kernels             bool           KERNEL records (True)
enable_external_correlation bool          EXTERNAL_CORRELATION records (True)
enable_api_records         bool           API/RUNTIME_API records (True)
enable_communication       bool           COMMUNICATION records (False)
enable_memcpy_memset       bool           MEMCPY/MEMSET records (False; needs LD_PRELOAD on 26.x)
enable_markers             bool           MARKER records (False)
========================== ====== ======= ================================================
"""

from __future__ import annotations

from typing import Any

from . import _C


class Config:
    """The process-wide settings; use the module attribute :data:`config`."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _C.config_get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        _C.config_set(name, value)

    def __dir__(self) -> list[str]:
        return [s["name"] for s in _C.config_settings()]

    def settings(self) -> list[dict[str, str]]:
        """One dict per setting: name, type, unit, allowed range, description."""
        return _C.config_settings()

    def to_dict(self) -> dict[str, Any]:
        """All current values, by name."""
        return {s["name"]: _C.config_get(s["name"]) for s in _C.config_settings()}

    def environment_errors(self) -> list[str]:
        """Problems found in TORCH_MSPTI_* variables (each ignored, default kept)."""
        return list(_C.config_environment_errors())

    def reset(self) -> None:
        """Restore the defaults and re-read the environment."""
        _C.config_reset()

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"torch_mspti.config({body})"


config = Config()
