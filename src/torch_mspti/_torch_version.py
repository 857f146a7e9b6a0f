"""The torch major.minor guard, run before the extension is imported.

libtorch has no stable C++ ABI across minor versions: an extension compiled against torch X.Y
fails on X.Z with ``undefined symbol: _ZN5torch...``. Comparing the versions first turns that
into a message naming both versions and the fix. Pure functions: nothing here imports torch.
"""

from __future__ import annotations

import re

__all__ = ["check_torch_version", "major_minor"]


def major_minor(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; also accepts ``"2.13"`` and pre-releases (``"2.14.0a0+git1"``)."""
    match = re.match(r"^\s*(\d+)\.(\d+)", str(version))
    if match is None:
        raise ValueError(f"not a torch version: {version!r}")
    return int(match.group(1)), int(match.group(2))


def check_torch_version(built: str, running: str) -> None:
    """Raise ImportError when ``running`` torch differs in major.minor from the ``built`` one.

    ``built`` is the torch version the extension was compiled against (``_build_info``),
    ``running`` is ``torch.__version__`` of this process.
    """
    try:
        built_mm = major_minor(built)
        running_mm = major_minor(running)
    except ValueError as exc:
        raise ImportError(
            f"torch-mspti: cannot compare torch versions (built against {built!r}, running {running!r}): {exc}"
        ) from None
    if built_mm == running_mm:
        return
    pin = "{}.{}".format(*built_mm)
    raise ImportError(
        f"torch-mspti was built against torch {built} but this process runs torch {running}; "
        f"its C++ extension only works with torch {pin}.x (libtorch has no stable ABI across minor versions). "
        f'Fix: pip install "torch=={pin}.*", or rebuild torch-mspti against your torch '
        f"(in a source checkout: pip install --no-build-isolation --no-deps --force-reinstall .)."
    )
