#!/usr/bin/env bash
# Builds and installs the package, then runs the test suite: the README's test command,
# verbatim. Keep TEST_COMMAND identical to the command in README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The README's test command, taken from the README itself so the two can never drift: the first
# line of the code block after the marker comment `<!-- ci:test-command ... -->`.
TEST_COMMAND=$(bash ci/readme_test_command.sh)

# The real-MSPTI tier (tests/test_real_mspti.py) runs from ../shared/realmspti; on CI it must not
# skip: a missing fixture fails its collection instead.
if [ "${CI:-}" = "true" ]; then export TORCH_MSPTI_REQUIRE_REALMSPTI=1; fi

echo "+ ${TEST_COMMAND}"
rc=0
bash -o pipefail -c "$TEST_COMMAND" || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "ERROR: pytest collected no tests (exit 5); CI treats that as a failure." >&2
fi
exit "$rc"
