"""``torch_mspti.cli``: the ``torch-mspti`` command line, which lives in the torch-free
``torch_mspti_cli`` package (so that ``--help``, ``--version`` and ``check`` start without
importing torch). ``python -m torch_mspti`` runs it too."""

from torch_mspti_cli import build_parser, main

__all__ = ["build_parser", "main"]
