"""Local dynamic-metadata provider: the runtime torch pin, derived from the build torch.

libtorch has no stable C++ ABI across minor versions, so a wheel compiled against torch X.Y
must only be installed next to torch X.Y. This provider runs inside the build environment
(isolated or ``--no-build-isolation``), imports the same torch that CMake compiles against,
and adds ``torch>=X.Y,<X.(Y+1)`` to ``[project] dependencies``. No local version (``+cpu``)
is pinned, so both ``2.13.0`` and ``2.13.0+cpu`` satisfy it.

Hooked up in pyproject.toml as
``[[tool.dynamic-metadata]] provider = { path = "_build_support", module = "torch_pin" }``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

_AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"

# Set by scikit-build-core through the optional build_state hook before dynamic_metadata.
_state = "metadata_wheel"


def torch_requirement(torch_version: str) -> str:
    """``"2.13.0+cpu"`` -> ``"torch>=2.13,<2.14"``."""
    match = re.match(r"^(\d+)\.(\d+)", str(torch_version))
    if match is None:
        raise ValueError(f"torch-mspti: cannot read major.minor from torch version {torch_version!r}")
    major, minor = int(match.group(1)), int(match.group(2))
    return f"torch>={major}.{minor},<{major}.{minor + 1}"


def _build_torch_version() -> str | None:
    """The version of the torch this interpreter imports, or None when torch is absent.

    ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` keeps torch.backends plugins (an installed copy of
    this project, torch_npu) from running inside the build; the previous value is restored.
    """
    previous = os.environ.get(_AUTOLOAD_ENV)
    os.environ[_AUTOLOAD_ENV] = "0"
    try:
        import torch
    except ImportError:
        return None
    finally:
        if previous is None:
            os.environ.pop(_AUTOLOAD_ENV, None)
        else:
            os.environ[_AUTOLOAD_ENV] = previous
    return str(torch.__version__)


def build_state(state: str) -> None:
    global _state
    _state = state


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    del settings, project
    version = _build_torch_version()
    if version is None:
        if _state == "sdist":
            # An sdist may be made without torch; the wheel built from it gets the pin.
            return {"dependencies": []}
        raise RuntimeError(
            "torch-mspti: building a wheel needs torch in the build environment; "
            'install it first (pip install "torch==2.13.*") or allow build isolation'
        )
    return {"dependencies": [torch_requirement(version)]}


def dynamic_wheel(settings: Mapping[str, Any]) -> dict[str, bool]:
    """The pin depends on the torch present when the wheel is built: Dynamic in the sdist."""
    del settings
    return {"dependencies": True}
