"""``python -m torch_mspti``: the same command line as ``torch-mspti``."""

import sys

from torch_mspti.cli import main

if __name__ == "__main__":
    sys.exit(main())
