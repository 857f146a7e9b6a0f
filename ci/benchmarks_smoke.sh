#!/usr/bin/env bash
# Keeps the benchmarks working: `python benchmarks/run.py --smoke` (tiny sizes, every benchmark
# still checks that every launched kernel was collected). Not a timed test: the figures of a smoke
# run mean nothing and no target is enforced. Reuses the C++ tree of the cpp_tests stage
# (build/cpp) when it exists, so only the benchmark targets are compiled here; needs the package
# installed (the install stage) for the Python benchmarks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=build/bench
if [ -f build/cpp/CMakeCache.txt ]; then build_dir=build/cpp; fi
python benchmarks/run.py --smoke --build-dir "$build_dir" --json build/benchmarks_smoke.json
