#!/usr/bin/env bash
# Format and lint checks: clang-format for C and C++ (style in .clang-format), ruff for Python
# (formatter and linter, settings in pyproject.toml [tool.ruff]). Changes nothing; fails listing
# the files that differ. To fix locally: the same tools, without --check / --dry-run:
#   clang-format -i $(git ls-files '*.cpp' '*.h' '*.c');  ruff format . && ruff check --fix .
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Pinned so that every machine formats alike (both come as wheels from PyPI).
python -m pip install --progress-bar off --quiet "clang-format==23.1.5" "ruff==0.17.6"

status=0
mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.c' ':!:tests/fuzz/corpus/*')
echo "clang-format $(clang-format --version | sed 's/.*version //') on ${#sources[@]} files"
if ! clang-format --dry-run --Werror "${sources[@]}"; then
  echo "ERROR: C/C++ files are not formatted (run clang-format -i on them)" >&2
  status=1
fi
echo "ruff $(ruff --version | cut -d' ' -f2)"
if ! ruff format --check .; then
  echo "ERROR: Python files are not formatted (run ruff format .)" >&2
  status=1
fi
if ! ruff check .; then
  echo "ERROR: ruff lint findings (run ruff check --fix . and fix the rest by hand)" >&2
  status=1
fi
exit "$status"
