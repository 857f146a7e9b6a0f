"""``torch_mspti.check``: validate an exported Chrome trace (see :mod:`torch_mspti_cli.check`).

The checker is pure Python and lives in the torch-free ``torch_mspti_cli`` package, so that
``torch-mspti check`` starts without importing torch; this module re-exports it.
"""

from torch_mspti_cli.check import (
    RULES,
    WARNINGS,
    CheckReport,
    CheckStats,
    Problem,
    TraceFileError,
    check_trace,
    load_trace,
)

__all__ = ["RULES", "WARNINGS", "CheckReport", "CheckStats", "Problem", "TraceFileError", "check_trace", "load_trace"]
