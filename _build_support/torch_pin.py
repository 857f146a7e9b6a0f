"""Local dynamic-metadata provider: the version and the runtime torch pin, from the build torch.

libtorch has no stable C++ ABI across minor versions, so a wheel compiled against torch X.Y
must only be installed next to torch X.Y. This provider runs inside the build environment
(isolated or ``--no-build-isolation``), imports the same torch that CMake compiles against,
and

* adds ``torch>=X.Y,<X.(Y+1)`` to ``[project] dependencies``. No local version (``+cpu``) is
  pinned, so both ``2.13.0`` and ``2.13.0+cpu`` satisfy it;
* sets the version to ``BASE_VERSION+torchX.Y`` (a PEP 440 local version label), so that the
  wheel's file name says which torch it is for: ``torch_mspti-0.1.0+torch2.7-cp311-...whl``.
  An sdist, made without torch, has the plain ``BASE_VERSION``.

Hooked up in pyproject.toml as
``[[tool.dynamic-metadata]] provider = { path = "_build_support", module = "torch_pin" }``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

_AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"

# The release version, without the torch label. recipe/recipe.yaml states the same number
# (tests/test_packaging.py checks that they agree).
BASE_VERSION = "0.1.0"

# Set by scikit-build-core through the optional build_state hook before dynamic_metadata.
_state = "metadata_wheel"


def torch_requirement(torch_version: str) -> str:
    """``"2.13.0+cpu"`` -> ``"torch>=2.13,<2.14"``."""
    match = re.match(r"^(\d+)\.(\d+)", str(torch_version))
    if match is None:
        raise ValueError(f"torch-mspti: cannot read major.minor from torch version {torch_version!r}")
    major, minor = int(match.group(1)), int(match.group(2))
    return f"torch>={major}.{minor},<{major}.{minor + 1}"


def torch_local_version(torch_version: str) -> str:
    """``"2.7.1+cu126"`` -> ``"0.1.0+torch2.7"``: this project's version for a build against that torch."""
    requirement = torch_requirement(torch_version)  # validates the version
    major_minor = requirement.split(">=", 1)[1].split(",", 1)[0]
    return f"{BASE_VERSION}+torch{major_minor}"


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
    if _state == "sdist":
        # An sdist is the same whatever torch is installed: plain version, no pin; the wheel
        # built from it gets both.
        return {"dependencies": [], "version": BASE_VERSION}
    version = _build_torch_version()
    if version is None:
        raise RuntimeError(
            "torch-mspti: building a wheel needs torch in the build environment; "
            'install it first (pip install "torch==2.13.*") or allow build isolation'
        )
    return {"dependencies": [torch_requirement(version)], "version": torch_local_version(version)}


def dynamic_wheel(settings: Mapping[str, Any]) -> dict[str, bool]:
    """The pin depends on the torch present when the wheel is built: Dynamic in the sdist. The
    version may not be (PEP 643): the sdist has BASE_VERSION, a wheel BASE_VERSION+torchX.Y."""
    del settings
    return {"dependencies": True}
