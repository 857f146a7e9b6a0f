"""Link correctness on the simulator, as a table: for each threaded scenario of the link tests,
how many kernels there are, how many are linked, how many are linked to the wrong op instance,
and the plugin's link states. Not a test (pytest does not collect it); run it from the repo root:

    python tests/link_report.py

Each scenario is a fresh child process (tests/simrun.py), so it takes about a minute.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from link_workloads import ALL_THREADS, INTERLEAVE, INTERLEAVE_OPS, thread_ops, threads_workload
from op_links import audit

NO_API = {"enable_api_records": False}


def main() -> int:
    scenarios = [("two-thread interleave", INTERLEAVE, INTERLEAVE_OPS)]
    scenarios += [(f"{n} threads at random", threads_workload(n), thread_ops(n)) for n in (2, 3, 8)]
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, workload, ops) in enumerate(scenarios):
            for api, config in (("API records", {}), ("no API records", NO_API)):
                run = simrun.run(
                    workload,
                    Path(tmp) / f"{i}-{len(config)}",
                    experimental_config=ALL_THREADS,
                    record_shapes=True,
                    config=config,
                    timeout=300,
                )
                print(f"{label:24s} {api:15s} {audit(run.trace, ops).summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
