#!/usr/bin/env bash
# THE test command (CI runs exactly this): build or reuse the environment, then run the whole suite.
#   bash scripts/test.sh                 # everything under tests/
#   bash scripts/test.sh tests/unit -k cache   # extra arguments go to pytest
# Exits with pytest's exit code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/env.sh
# Nothing written into the clone: no bytecode caches, no .pytest_cache.
export PYTHONDONTWRITEBYTECODE=1
# Per-test limit (a hung server or browser fails that test, not the whole run), and a session limit that ends
# the run with a report before CI's own 90-minute limit would kill it silently.
args=(-p no:cacheprovider --timeout="${BA_TEST_TIMEOUT:-600}" --session-timeout="${BA_SESSION_TIMEOUT:-4500}" -ra)
if [ $# -eq 0 ]; then
  set -- tests
fi
start=$SECONDS
set +e
"$BA_PYTHON" -m pytest "${args[@]}" "$@"
rc=$?
set -e
echo "[test] pytest exited $rc after $((SECONDS - start)) s" >&2
exit $rc
