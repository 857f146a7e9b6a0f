#!/usr/bin/env bash
# Prints the README's test command: the first line of the code block after the marker comment
# `<!-- ci:test-command ... -->` (build_and_test.sh and torch_versions.sh run it, so the README and
# CI can never drift). Exits 2, saying so, when the README has none.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command=$(awk '/<!-- ci:test-command/ {found=1; next} found && /^```/ {if (inblock) exit; inblock=1; next} found && inblock {print; exit}' README.md)
if [ -z "$command" ]; then
  echo "ERROR: no test command found after '<!-- ci:test-command' in README.md" >&2
  exit 2
fi
printf '%s\n' "$command"
