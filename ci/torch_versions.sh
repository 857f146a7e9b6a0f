#!/usr/bin/env bash
# The build and the core tier on the other torch minors CI checks (the full tier runs on 2.13 in
# build_and_test): for each torch below, a venv of its own with PyPI's wheel (x86_64 wheels other
# than 2.13.0+cpu are CUDA builds: their nvidia packages come along and everything runs on the
# CPU), the README's install + main command (`pip install --no-build-isolation .` then
# `torch-mspti demo`), and the core tests: the support-table row (test_torch_compat), trace, links,
# drain, MSPTI generations, copies and collectives.
#
# Usage: bash ci/torch_versions.sh [torch-version ...]   (default: 2.14.1 2.7.1)
# Each torch builds in build/torch-<version>, so the 2.13 build tree is left alone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VERSIONS=("$@")
if [ ${#VERSIONS[@]} -eq 0 ]; then VERSIONS=(2.14.1 2.7.1); fi
CORE_TESTS=(tests/test_torch_compat.py tests/test_plugin_trace.py tests/test_links_sim_device.py tests/test_plugin_drain.py
  tests/test_versions.py tests/test_copy_rows.py tests/test_sim_hccl.py)
ROOT=$(pwd)
export TORCH_DEVICE_BACKEND_AUTOLOAD=0  # no torch.backends plugin inside the installs' probes
REPORT=build/torch_versions/report.txt
mkdir -p build/torch_versions
: > "$REPORT"

for version in "${VERSIONS[@]}"; do
  echo "=== torch ${version}"
  venv="build/torch_versions/venv-${version}"
  t0=$(date +%s)
  rm -rf "$venv"
  python -m venv "$venv"
  py="$ROOT/$venv/bin/python"
  "$py" -m pip install --progress-bar off -q "torch==${version}" \
    "scikit-build-core>=1.0" "nanobind>=2.4" "ninja>=1.10"
  t1=$(date +%s)
  # The README's main command, with this torch: install, then the demo (trace.json, linked kernels).
  (cd "$venv" && "$py" -m pip install --progress-bar off -q --no-build-isolation \
    -C "build-dir=$ROOT/build/torch-${version}" "$ROOT[test]")
  t2=$(date +%s)
  (cd "$venv" && unset TORCH_DEVICE_BACKEND_AUTOLOAD && "$ROOT/$venv/bin/torch-mspti" demo --out trace.json)
  t3=$(date +%s)
  (cd "$venv" && unset TORCH_DEVICE_BACKEND_AUTOLOAD && "$py" -m pytest -n 2 -q -p no:cacheprovider \
    "${CORE_TESTS[@]/#/$ROOT/}")
  t4=$(date +%s)
  line=$(printf 'torch %-8s install %4ss  build %4ss  demo %4ss  core tests %4ss' \
    "$version" $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t4 - t3)))
  echo "$line" | tee -a "$REPORT"
  # The venv (several GB of CUDA libraries) is not needed once its tier passed.
  rm -rf "$venv"
done
echo "=== torch versions"
cat "$REPORT"
