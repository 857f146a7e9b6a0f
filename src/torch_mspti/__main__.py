"""``python -m torch_mspti``: names the command line, which is not part of the library.

The ``torch-mspti`` command line is the package ``torch_mspti_cli`` (console script
``torch-mspti``, or ``python -m torch_mspti_cli``). It depends on this library; the library never
imports it (``tests/test_layering.py``), so this module only says where to go.
"""

import sys

if __name__ == "__main__":
    command = " ".join(sys.argv[1:])
    print(
        "torch_mspti is the library; its command line is `torch-mspti` (or `python -m torch_mspti_cli`)"
        + (f": run `torch-mspti {command}`" if command else ""),
        file=sys.stderr,
    )
    sys.exit(2)
