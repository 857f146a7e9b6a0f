"""The ``torch-mspti`` console script.

A top-level module outside the torch_mspti package, so that a package that cannot be imported
(not built, a torch of another minor, a broken extension) still gives its one-line reason and
exit status 1 instead of a traceback: the package import happens inside ``main``'s ``try``.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    try:
        from torch_mspti.cli import main as cli_main
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"torch-mspti: torch_mspti cannot be imported: {first}", file=sys.stderr)
        return 1
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
