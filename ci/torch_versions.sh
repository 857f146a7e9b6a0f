#!/usr/bin/env bash
# The build and the core tier on the other torch minors CI checks (the full tier runs on 2.13 in
# build_and_test): for each torch below, a venv of its own with PyPI's wheel (x86_64 wheels other
# than 2.13.0+cpu are CUDA builds: their nvidia packages come along and everything runs on the
# CPU), the README's install + main command (`pip install --no-build-isolation .` then
# `torch-mspti demo`), and the core tests: the support-table row (test_torch_compat, which also
# loads the paired torch_npu release's real libtorch_npu.so), trace, links, drain, MSPTI
# generations, the tests behind the support table's collectives and copies cells, and kineto's
# on-demand trace of a running job.
#
# Time: each torch is a download of several GB (2.7.1) or a copy from this machine's disk (2.14.1).
# `--prefetch` only downloads the wheels into build/torch_versions/wheels, holding
# build/torch_versions/prefetch.lock meanwhile: .ci/run starts it in the background right after
# its install stage, so the downloads overlap the 2.13 build and tests, and this stage waits for
# the lock, then installs from those wheels. Within the stage, the next torch's venv is installed
# in the background while the current one builds and tests. The report gives each phase's seconds.
#
# Usage: bash ci/torch_versions.sh [--prefetch] [torch-version ...]   (default: 2.14.1 2.7.1)
# Each torch builds in build/torch-<version>, so the 2.13 build tree is left alone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PREFETCH=0
if [ "${1:-}" = "--prefetch" ]; then
  PREFETCH=1
  shift
fi
VERSIONS=("$@")
if [ ${#VERSIONS[@]} -eq 0 ]; then VERSIONS=(2.14.1 2.7.1); fi
BUILD_DEPS=("scikit-build-core>=1.0" "nanobind>=2.4" "ninja>=1.10")
WHEELS=build/torch_versions/wheels
LOCK=build/torch_versions/prefetch.lock
CORE_TESTS=(
  tests/test_torch_compat.py tests/test_plugin_trace.py tests/test_links_sim_device.py tests/test_plugin_drain.py
  tests/test_versions.py
  # the collectives cell: one 2-rank torchrun run, its rows on the communication stream, linked
  "tests/test_sim_hccl.py::test_collectives_on_npu_equal_gloo_on_cpu[torchrun_direct]"
  "tests/test_sim_hccl.py::test_collectives_are_rows_on_the_devices_communication_stream[torchrun_direct]"
  "tests/test_sim_hccl.py::test_communication_rows_are_linked_to_the_ops_that_launched_them"
  # the copies cell: one preloaded copy-heavy step, each copy a row on its lane, linked to its op
  "tests/test_copy_rows.py::test_every_copy_is_one_row_on_its_stream_lane_with_bytes_kind_and_bandwidth[direct]"
  "tests/test_copy_rows.py::test_copies_are_linked_to_the_op_instance_that_issued_them[direct]"
  # kineto's on-demand (daemon) path: each torch's own kineto speaks the protocol (README "Tracing a running job")
  tests/test_on_demand.py
)
ROOT=$(pwd)
export TORCH_DEVICE_BACKEND_AUTOLOAD=0  # no torch.backends plugin inside the installs' probes
mkdir -p build/torch_versions "$WHEELS"

if [ "$PREFETCH" -eq 1 ]; then
  exec 9> "$LOCK"
  flock 9
  for version in "${VERSIONS[@]}"; do
    t0=$(date +%s)
    python -m pip download --progress-bar off -q --dest "$WHEELS" "torch==${version}" "${BUILD_DEPS[@]}" \
      || echo "prefetch: torch ${version} not downloaded; the stage installs it from the index" >&2
    echo "prefetch: torch ${version} in $(($(date +%s) - t0)) s"
  done
  exit 0
fi

REPORT=build/torch_versions/report.txt
: > "$REPORT"
# A prefetch still running (.ci/run's background one): wait for it to let go of the lock.
t_wait=$(date +%s)
if [ -e "$LOCK" ]; then flock "$LOCK" true; fi
echo "waited $(($(date +%s) - t_wait)) s for the prefetch" | tee -a "$REPORT"

venv_of() { echo "build/torch_versions/venv-$1"; }

# Creates the venv of torch $1 with its build dependencies; its seconds go to build/torch_versions/install-$1.
install_venv() {
  local version=$1 venv t0
  venv=$(venv_of "$version")
  t0=$(date +%s)
  rm -rf "$venv"
  python -m venv "$venv"
  # --find-links: the prefetched wheels; anything missing there comes from the index as usual.
  "$ROOT/$venv/bin/python" -m pip install --progress-bar off -q --find-links "$ROOT/$WHEELS" "torch==${version}" \
    "${BUILD_DEPS[@]}"
  echo $(($(date +%s) - t0)) > "build/torch_versions/install-${version}"
}

start_install() {  # in the background; its output goes to build/torch_versions/install-$1.log
  install_venv "$1" > "build/torch_versions/install-$1.log" 2>&1 &
  INSTALL_PID[$1]=$!
}

declare -A INSTALL_PID
start_install "${VERSIONS[0]}"
for i in "${!VERSIONS[@]}"; do
  version=${VERSIONS[$i]}
  echo "=== torch ${version}"
  t0=$(date +%s)
  if ! wait "${INSTALL_PID[$version]}"; then
    cat "build/torch_versions/install-${version}.log" >&2
    echo "ERROR: installing torch ${version} failed (log above)" >&2
    exit 1
  fi
  t1=$(date +%s)
  next=$((i + 1))
  if [ "$next" -lt ${#VERSIONS[@]} ]; then start_install "${VERSIONS[$next]}"; fi
  venv=$(venv_of "$version")
  py="$ROOT/$venv/bin/python"
  # The README's main command, with this torch: install, then the demo (trace.json, linked kernels).
  (cd "$venv" && "$py" -m pip install --progress-bar off -q --no-build-isolation \
    -C "build-dir=$ROOT/build/torch-${version}" "$ROOT[test]")
  t2=$(date +%s)
  (cd "$venv" && unset TORCH_DEVICE_BACKEND_AUTOLOAD && "$ROOT/$venv/bin/torch-mspti" demo --out trace.json)
  t3=$(date +%s)
  (cd "$venv" && unset TORCH_DEVICE_BACKEND_AUTOLOAD && "$py" -m pytest -n 2 -q -p no:cacheprovider \
    "${CORE_TESTS[@]/#/$ROOT/}")
  t4=$(date +%s)
  line=$(printf 'torch %-8s install %4ss (%4ss waited for)  build %4ss  demo %4ss  core tests %4ss' \
    "$version" "$(cat "build/torch_versions/install-${version}")" $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t4 - t3)))
  echo "$line" | tee -a "$REPORT"
  # The venv (several GB of CUDA libraries) is not needed once its tier passed.
  rm -rf "$venv"
done
echo "=== torch versions"
cat "$REPORT"
