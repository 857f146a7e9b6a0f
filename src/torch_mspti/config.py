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

import difflib
import os
from typing import Any

from . import _C

#: TORCH_MSPTI_* variables that are not settings but are read by the package, its simulator or its
#: test suite (README "Settings"); any other TORCH_MSPTI_* name is reported as unknown.
OTHER_VARIABLES = frozenset(
    {
        "TORCH_MSPTI_DISABLE",  # no autoload (_torch_mspti_autoload)
        "TORCH_MSPTI_SIM_LIBRARY",  # development override of the simulated MSPTI (_paths.py)
        "TORCH_MSPTI_NPU_SIM_LIBRARY",  # development override of the simulated device (_paths.py)
        "TORCH_MSPTI_SIM_CANN_ROOT",  # the simulated NPU over the real MSPTI (torch_mspti.sim.enable)
        "TORCH_MSPTI_REALMSPTI_DIR",  # the test suite's real-MSPTI fixture (tests/test_real_mspti.py)
        "TORCH_MSPTI_REQUIRE_REALMSPTI",  # 1: that fixture missing fails the tier instead of skipping (CI)
        "TORCH_MSPTI_PRELOAD_RESTARTED",  # set by `torch-mspti demo --memcpy` when it restarts itself
        "TORCH_MSPTI_TEST_DEVICES",  # the test suite's hardware tier (tests/conftest.py)
        "TORCH_MSPTI_TEST_DDP_DEVICES",
        "TORCH_MSPTI_TEST_CACHE",
        "TORCH_MSPTI_REQUIRE_HTA",
        "TORCH_MSPTI_FUZZ_EXPECT_VALID",
    }
)


def _unknown_variables(environ: Any = None) -> list[str]:
    """One message per TORCH_MSPTI_* name in ``environ`` (default: ``os.environ``) that is neither a
    setting nor one of :data:`OTHER_VARIABLES`, naming the closest known name (typos such as
    ``TORCH_MSPTI_BUFER_SIZE``). Such a variable has no effect."""
    environ = os.environ if environ is None else environ
    settings = [s.env for s in _C.config_settings()]
    known = set(settings) | OTHER_VARIABLES
    candidates = sorted(known)
    messages = []
    for name in sorted(environ):
        if not name.startswith("TORCH_MSPTI_") or name in known:
            continue
        # A name cut short (TORCH_MSPTI_ENABLE_MEMCPY for ..._MEMCPY_MEMSET) is the prefix of the
        # names meant (all of them when several begin so); otherwise the closest spelling among the
        # settings and the other variables alike (TORCH_MSPTI_BUFER_SIZE, TORCH_MSPTI_DISBALE).
        # Case is ignored in the comparison: every variable is upper case.
        upper = name.upper()
        close = [c for c in candidates if c.startswith(upper + "_")] or difflib.get_close_matches(
            upper, candidates, n=1, cutoff=0.6
        )
        hint = f"did you mean {' or '.join(close)}?" if close else "torch_mspti.config.settings() lists the variables"
        messages.append(f"{name} is not a torch-mspti variable and is ignored ({hint})")
    return messages


_unknown = _unknown_variables()


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
        """Problems found in TORCH_MSPTI_* variables when they were read (at import, or at the last
        :meth:`reset`): invalid values (each ignored, default kept) and unknown names (ignored;
        the message names the closest setting)."""
        return list(_C.config_environment_errors()) + list(_unknown)

    def reset(self) -> None:
        """Restore the defaults and re-read the environment (a loaded library's path stays)."""
        global _unknown
        _C.config_reset()
        _unknown = _unknown_variables()

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"torch_mspti.config({body})"


def _settings_table() -> str:
    rows = [("setting", "variable", "type", "default", "meaning")]
    for s in _C.config_settings():
        default = s.default if s.type not in ("path", "domains") else (s.default or '""')
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
