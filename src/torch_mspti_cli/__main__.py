"""``python -m torch_mspti_cli``: the ``torch-mspti`` command line (torch-free entry)."""

import sys

from torch_mspti_cli import main

if __name__ == "__main__":
    sys.exit(main())
