#!/usr/bin/env bash
# Installs everything CI needs on a clean machine: Debian packages for the C++ tests, and the
# build + test dependencies for `pip install --no-build-isolation .`.
#
# torch is pinned exactly (torch==2.13.0): an unpinned or newer torch would make pip fetch a
# multi-GB CUDA build. The wheel is built without build isolation, against this torch, so the
# isolated env's own resolution of `torch==2.13.*` never happens.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# cmake (>= 3.18) and g++ are usually present already; listing them is a no-op then.
# libfmt-dev: torch 2.7's wheel ships no fmt headers (ci/torch_versions.sh builds against it).
$SUDO apt-get install -y -qq --no-install-recommends cmake g++ ninja-build libgtest-dev libfmt-dev

python -m pip install --progress-bar off \
  "torch==2.13.0" \
  "scikit-build-core>=1.0" "nanobind>=2.4" "ninja>=1.10" \
  "py-rattler-build==0.73.0" \
  "pytest>=8" "pytest-xdist>=3" "rich>=13"

python - <<'PY'
import os
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
import importlib.metadata as md
import torch
for dist in ("scikit-build-core", "nanobind", "py-rattler-build", "pytest", "pytest-xdist"):
    print(f"{dist} {md.version(dist)}")
print(f"torch {torch.__version__}")
PY
cmake --version | head -n 1
