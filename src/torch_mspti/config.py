"""Typed, validated settings of the plugin (``torch_mspti.config``).

Each setting is an attribute: reading returns an ``int``, ``bool`` or ``str``; assigning validates
it and raises ``TypeError`` (wrong type) or ``ValueError`` (out of range), naming the setting, the
value and the allowed range. Changes apply from the next profiling session and are thread-safe.
``library_path`` is fixed once a library has been loaded, and import-only settings (``profiler``)
cannot change after import (``RuntimeError``).

Every setting can also be given as an environment variable (``TORCH_MSPTI_<NAME>``; see the
``env`` of each entry of :meth:`Config.settings`), read when the package is imported; invalid
values are reported once by a warning at import and by :meth:`Config.environment_errors`, and the
default is kept. The table below is generated from the plugin's settings table (src/core/Config.cpp),
the one place each setting is defined.
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
        return [s.name for s in _C.config_settings()]

    def settings(self) -> list[dict[str, Any]]:
        """One dict per setting: name, env (the variable), type, unit, range, default, value (the
        current one), description, import_only."""
        return [
            {
                "name": s.name,
                "env": s.env,
                "type": s.type,
                "unit": s.unit,
                "range": s.range,
                "default": _C.config_default(s.name),
                "value": _C.config_get(s.name),
                "description": s.description,
                "import_only": s.import_only,
            }
            for s in _C.config_settings()
        ]

    def to_dict(self) -> dict[str, Any]:
        """All current values, by name."""
        return {s.name: _C.config_get(s.name) for s in _C.config_settings()}

    def environment_errors(self) -> list[str]:
        """Problems found in TORCH_MSPTI_* variables (each ignored, default kept)."""
        return list(_C.config_environment_errors())

    def reset(self) -> None:
        """Restore the defaults and re-read the environment (a loaded library's path stays)."""
        _C.config_reset()

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"torch_mspti.config({body})"


def _settings_table() -> str:
    rows = [("setting", "variable", "type", "default", "meaning")]
    for s in _C.config_settings():
        default = s.default if s.type != "path" else (s.default or '""')
        unit = f" {s.unit}" if s.unit and s.type == "int" else ""
        rows.append((s.name, s.env, s.type, f"{default}{unit}", s.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    rule = " ".join("=" * w for w in widths) + " " + "=" * 20
    lines = [rule, " ".join(r.ljust(w) for r, w in zip(rows[0][:4], widths, strict=True)) + " " + rows[0][4], rule]
    for r in rows[1:]:
        lines.append(" ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + " " + r[4])
    lines.append(rule)
    return "\n".join(lines)


__doc__ = (__doc__ or "") + "\n" + _settings_table() + "\n"
Config.__doc__ = (Config.__doc__ or "") + "\n\n" + _settings_table() + "\n"

config = Config()
