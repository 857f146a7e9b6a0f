#!/usr/bin/env bash
# Configures the top-level CMake project without the Python module and with the GoogleTest
# suite (tests/cpp), builds it in build/cpp and runs ctest. ctest finding no test fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JOBS=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
PYTHON=$(command -v python)

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

cmake -S . -B build/cpp "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython_EXECUTABLE="$PYTHON" \
  -DTORCH_MSPTI_PYTHON=OFF \
  -DTORCH_MSPTI_CPP_TESTS=ON \
  -DTORCH_MSPTI_SIM_DEVICE=OFF
cmake --build build/cpp --parallel "$JOBS"
ctest --test-dir build/cpp --output-on-failure --no-tests=error --parallel "$JOBS"
