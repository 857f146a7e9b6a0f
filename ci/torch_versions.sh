#!/usr/bin/env bash
# The build and the full test tier on the other torch minors CI checks (2.13's runs in
# build_and_test): for each torch below, a venv of its own with PyPI's wheel (x86_64 wheels other
# than 2.13.0+cpu are CUDA builds: their nvidia packages come along and everything runs on the
# CPU), the README's install + main command (`pip install --no-build-isolation .` then
# `torch-mspti demo`), and the README's test command (taken from the README as build_and_test.sh
# takes it) with its torch pin set to that torch, as the README's support section says to, with
# that venv's python first on PATH. On CI the real-MSPTI tier
# must run there too (TORCH_MSPTI_REQUIRE_REALMSPTI=1), as in build_and_test.
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
# The README's test command: the first line of the code block after `<!-- ci:test-command ... -->`.
TEST_COMMAND=$(bash ci/readme_test_command.sh)
if [ "${CI:-}" = "true" ]; then export TORCH_MSPTI_REQUIRE_REALMSPTI=1; fi
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
  # The README's test command as a user of this torch runs it ("the same line with that torch"):
  # its torch pin set to this version, the venv's python first on PATH, from the checkout. The
  # build tree is this torch's (SKBUILD_BUILD_DIR, scikit-build-core's build-dir setting), so the
  # command rebuilds incrementally and never reuses the 2.13 tree of build_and_test.
  command=${TEST_COMMAND//torch==2.13.0/torch==${version}}
  if [ "$command" = "$TEST_COMMAND" ]; then
    echo "ERROR: the README's test command no longer pins torch==2.13.0; update ci/torch_versions.sh" >&2
    exit 2
  fi
  echo "+ ${command}"
  rc=0
  (unset TORCH_DEVICE_BACKEND_AUTOLOAD && PATH="$ROOT/$venv/bin:$PATH" VIRTUAL_ENV="$ROOT/$venv" \
    SKBUILD_BUILD_DIR="$ROOT/build/torch-${version}" bash -o pipefail -c "$command") || rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 5 ] && echo "ERROR: pytest collected no tests (exit 5); CI treats that as a failure." >&2
    echo "ERROR: the README's test command failed on torch ${version} (exit ${rc})" >&2
    exit "$rc"
  fi
  t4=$(date +%s)
  line=$(printf 'torch %-8s install %4ss (%4ss waited for)  build %4ss  demo %4ss  tests %4ss' \
    "$version" "$(cat "build/torch_versions/install-${version}")" $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t4 - t3)))
  echo "$line" | tee -a "$REPORT"
  # The venv (several GB of CUDA libraries) is not needed once its tier passed.
  rm -rf "$venv"
done
echo "=== torch versions"
cat "$REPORT"
