#!/usr/bin/env bash
# Sanitizer runs (issue 7, item 4). Any finding fails the stage.
#
#  1. ASan + UBSan build of the C++ core, the simulator and their GoogleTest suites (build/san-asan),
#     ctest with halt_on_error=1.
#  2. TSan build of the same (build/san-tsan), ctest with halt_on_error=1.
#  3. The package built with ASan + UBSan (build/san-asan-py) into a throw-away venv that sees the
#     system site-packages (torch), and a small pytest subset run with libasan preloaded: CPython
#     and libtorch are not instrumented (sanitising them gives noise, not findings), our
#     extension and the simulator are. The system environment is never touched, so later stages
#     see the normal build.
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

configure_build() {  # <build dir> <sanitize list>
  cmake -S . -B "$1" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPython_EXECUTABLE="$PYTHON" \
    -DTORCH_MSPTI_PYTHON=OFF \
    -DTORCH_MSPTI_CPP_TESTS=ON \
    -DTORCH_MSPTI_SANITIZE="$2" >/dev/null
  cmake --build "$1" --parallel "$JOBS"
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

asan_package() {
  rm -rf "$VENV"
  "$PYTHON" -m venv --system-site-packages "$VENV"
  # The venv's pip sees the system's torch, nanobind and scikit-build-core (no download); the
  # package lands in the venv only, shadowing the system's installed copy there.
  "$VENV/bin/python" -m pip install --no-build-isolation --no-deps --progress-bar off -q . \
    -Ccmake.define.TORCH_MSPTI_SANITIZE="address;undefined" \
    -Ccmake.build-type=RelWithDebInfo \
    -Cbuild-dir=build/san-asan-py
  "$VENV/bin/python" - <<'PY'
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
  "tests/test_load.py::test_stop_with_kernels_still_running_ends_at_the_drain_timeout"
)

asan_pytest() {
  # No -n: every scenario is already its own child process, and ASan's memory overhead is best
  # not doubled on a 2-core CI machine.
  LD_PRELOAD="$LIBASAN" \
  ASAN_OPTIONS="${COMMON_ASAN}:detect_leaks=0" \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${PYTEST_SUBSET[@]}"
}

step "asan+ubsan build (C++)" configure_build build/san-asan "address;undefined"
step "asan+ubsan ctest" asan_tests
step "tsan build (C++)" configure_build build/san-tsan thread
step "tsan ctest" tsan_tests
step "asan+ubsan package build (venv)" asan_package
step "asan+ubsan pytest subset" asan_pytest
rm -rf "$VENV"

echo
echo "--- sanitizers: timings"
printf '%s\n' "${TIMES[@]}"
echo "sanitizers: zero findings"
