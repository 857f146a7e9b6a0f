#!/usr/bin/env bash
# Sanitizer runs over our own code (core, simulator, bindings, C++ tests). Any finding fails the stage.
#
#  1. ASan + UBSan: the package built with TORCH_MSPTI_SANITIZE="address;undefined" and the C++
#     tests switched on in the same build (build/san-asan), installed into a throw-away venv that
#     sees the system site-packages (torch). Then
#     a. ctest in that build: the C++ core, the simulator and their GoogleTest suites;
#     b. a small pytest subset run by the venv's python with libasan preloaded: CPython and
#        libtorch are not instrumented (sanitising them gives noise, not findings); our extension
#        and the simulator are. The system environment is never touched: later stages see the
#        normal build.
#  2. TSan: a plain CMake build of the core, the simulator and the C++ tests (build/san-tsan),
#     ctest.
# One build serves both ASan runs (a separate C++-only ASan build would cost as much again).
# Sanitizer builds use -O1 -g, the usual compromise between build time, speed and useful stacks.
#
# Only our code is instrumented (TORCH_MSPTI_SANITIZE applies to the core, the simulator, the
# bindings and the tests; libtorch_cpu and CPython are prebuilt).
#
# Options that are not defaults, and why:
#  * LSAN_OPTIONS=use_tls=0 for the C++ tests: GCC 12's LeakSanitizer crashes in its own tracer
#    at exit ("Tracer caught signal 11", then "LeakSanitizer has encountered a fatal error") while
#    scanning the dynamic TLS of threads still alive that touched a thread_local of a dlopen'ed
#    library: the simulator is dlopen'ed (as libmspti is) and its threads live until exit, so
#    every test that loads it was hit, at random. use_tls=0 stops LSan from reading thread-local
#    storage as roots: leak checking stays on for every C++ test, and the only cost is that a
#    block reachable from a thread_local alone would be reported (a false report, never a missed
#    leak). The sim.ProcessExit.* tests keep the detect_leaks=0 that tests/cpp/CMakeLists.txt
#    gives them (they exit with work in flight on purpose).
#  * detect_leaks=0 for the pytest subset: CPython and libtorch keep allocations until exit by
#    design, so LeakSanitizer would report theirs; our leaks are covered by the C++ runs above and
#    by test_load's buffer and RSS checks.
#  * halt_on_error=1 everywhere (ASan, UBSan, TSan): the first finding fails the run.
#
# Timings are printed per step. Environment: CMAKE_BUILD_PARALLEL_LEVEL (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JOBS=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
PYTHON=$(command -v python)
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

TIMES=()
step() {
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s)
  echo
  echo "--- sanitizers: ${name}"
  "$@"
  t1=$(date +%s)
  TIMES+=("$(printf '%-34s %5d s' "$name" $((t1 - t0)))")
}

COMMON_ASAN="halt_on_error=1:abort_on_error=1:print_summary=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1"

SAN_BUILD_TYPE=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g" "-DCMAKE_C_FLAGS_DEBUG=-O1 -g")

tsan_build() {
  cmake -S . -B build/san-tsan "${generator[@]}" "${SAN_BUILD_TYPE[@]}" \
    -DPython_EXECUTABLE="$PYTHON" \
    -DTORCH_MSPTI_PYTHON=OFF \
    -DTORCH_MSPTI_CPP_TESTS=ON \
    -DTORCH_MSPTI_SIM_DEVICE=OFF \
    -DTORCH_MSPTI_SANITIZE=thread >/dev/null
  cmake --build build/san-tsan --parallel "$JOBS"
}

asan_tests() {
  ASAN_OPTIONS="${COMMON_ASAN}:detect_leaks=1" LSAN_OPTIONS="use_tls=0" \
    ctest --test-dir build/san-asan --output-on-failure --no-tests=error --parallel "$JOBS"
}

tsan_tests() {
  TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:print_summary=1" \
    ctest --test-dir build/san-tsan --output-on-failure --no-tests=error --parallel "$JOBS"
}

LIBASAN=$(gcc -print-file-name=libasan.so)
VENV=build/san-venv

asan_build() {
  rm -rf "$VENV"
  "$PYTHON" -m venv --system-site-packages "$VENV"
  # The venv's pip sees the system's torch, nanobind and scikit-build-core (no download); the
  # package lands in the venv only, shadowing the system's installed copy there. The C++ tests
  # are built by the same CMake run (not installed).
  CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$VENV/bin/python" -m pip install --no-build-isolation --no-deps --progress-bar off -q . \
    -Ccmake.build-type=Debug \
    -Ccmake.define.CMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
    -Ccmake.define.CMAKE_C_FLAGS_DEBUG="-O1 -g" \
    -Ccmake.define.TORCH_MSPTI_SANITIZE="address;undefined" \
    -Ccmake.define.TORCH_MSPTI_CPP_TESTS=ON \
    -Ccmake.define.TORCH_MSPTI_SIM_DEVICE=OFF \
    -Cbuild-dir=build/san-asan
  LD_PRELOAD="$LIBASAN" ASAN_OPTIONS=detect_leaks=0 "$VENV/bin/python" - <<'PY'
import os
import torch_mspti
assert os.path.realpath(torch_mspti.__file__).startswith(os.path.realpath("build/san-venv")), torch_mspti.__file__
print("asan package:", torch_mspti.__file__)
PY
}

# The subset: trace building and linking, sessions, the drain, and the load scenarios that stress
# threads, fork and stop-in-flight (the 1,000-session and 100k-kernel ones add time, not paths).
PYTEST_SUBSET=(
  tests/test_plugin_trace.py
  tests/test_plugin_sessions.py
  tests/test_plugin_drain.py
  "tests/test_load.py::test_eight_threads_launching_concurrently_with_profile_all_threads"
  "tests/test_load.py::test_fork_during_and_after_a_session_child_exits_and_refuses_profiling"
  "tests/test_load.py::test_dataloader_fork_workers_during_a_session"
  "tests/test_load.py::test_stop_with_kernels_still_running_is_bounded_and_reports_the_launches_lost"
)

asan_pytest() {
  LD_PRELOAD="$LIBASAN" \
  ASAN_OPTIONS="${COMMON_ASAN}:detect_leaks=0" \
    "$VENV/bin/python" -m pytest -q -n "$JOBS" -p no:cacheprovider "${PYTEST_SUBSET[@]}"
}

step "asan+ubsan build (package + C++ tests)" asan_build
step "asan+ubsan ctest" asan_tests
step "asan+ubsan pytest subset" asan_pytest
step "tsan build (C++)" tsan_build
step "tsan ctest" tsan_tests
rm -rf "$VENV"

echo
echo "--- sanitizers: timings"
printf '%s\n' "${TIMES[@]}"
echo "sanitizers: zero findings"
