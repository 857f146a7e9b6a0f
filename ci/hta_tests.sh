#!/usr/bin/env bash
# HolisticTraceAnalysis on NPU traces: installs the `hta` extra (HolisticTraceAnalysis==0.5.0 and
# the pandas/psutil/PyYAML it needs) and runs tests/test_hta.py and tests/test_hta_multirank.py (8
# simulated ranks under torchrun, benchmarks/multirank.py, run once and shared by the tests) with
# nothing skipped for want of HTA (TORCH_MSPTI_REQUIRE_HTA=1 turns that skip into a failure); any
# skip fails the stage.
#
# A stage of its own rather than part of the `test` extra: the extra adds ~300 MB and ~60 packages
# (HTA requires jupyterlab) and pins pandas < 3, for two test files. Measured on the 2-core CI
# machine: `pip install --no-cache-dir --no-build-isolation ".[hta]"` 21.5 s (about 10 s of it the
# incremental wheel rebuild), +301 MB; the tests ~20 s for tests/test_hta.py, 52 s with the 8-rank
# file (its run: torchrun of 8 simulated ranks ~17 s, HTA on the 8 traces ~2 s; benchmarks/README.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python -m pip install --progress-bar off --no-build-isolation ".[hta]"
mkdir -p build
rc=0
TORCH_MSPTI_REQUIRE_HTA=1 python -m pytest -n 2 -rs -p no:cacheprovider tests/test_hta.py tests/test_hta_multirank.py \
  --junitxml=build/hta_tests.xml || rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 5 ] && echo "ERROR: pytest collected no tests (exit 5)" >&2
  exit "$rc"
fi
python - <<'PY'
import sys
import xml.etree.ElementTree as ET

allowed: set[str] = set()
skips = [
    (case.get("name"), s.get("message", ""))
    for case in ET.parse("build/hta_tests.xml").iter("testcase")
    for s in case.findall("skipped")
]
bad = [(n, m) for n, m in skips if m not in allowed]
for name, message in skips:
    print(f"skipped: {name}: {message}")
if bad:
    print(f"ERROR: {len(bad)} HTA test(s) skipped", file=sys.stderr)
    sys.exit(1)
PY
