#!/usr/bin/env bash
# THE test command (CI runs exactly this): build or reuse the environments, then run the suite.
#   bash scripts/test.sh                 # CI: the whole suite on ComfyUI 0.33.0, then tests/comfy on 0.3.75
#   bash scripts/test.sh tests/unit -k cache          # extra arguments go to pytest; one core, BA_CORE (0.3.75)
#   BA_CORE=0.33.0 bash scripts/test.sh tests/comfy   # the same on the newer core
# With no arguments both supported cores are tested: every test on the newest (what most users run; the unit tests
# that pin core's MiniMax H3 classes need it), and every server, workflow and browser test (tests/comfy) on the
# oldest. BA_CORES="<full core> <server-tests core>" changes that pairing. Exits non-zero if any run failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Nothing written into the clone: no bytecode caches, no .pytest_cache.
export PYTHONDONTWRITEBYTECODE=1
# Per-test limit (a hung server or browser fails that test, not the whole run), and a session limit shared by the
# runs, that ends them with a report before CI's own 90-minute limit would kill them silently.
deadline=$((SECONDS + ${BA_SESSION_TIMEOUT:-4500}))

run_on_core() {  # run_on_core <core> <pytest args...>
  local core=$1 rc start
  shift
  BA_CORE=$core
  . scripts/env.sh || { echo "[test] ComfyUI $core: the environment could not be built" >&2; return 1; }
  start=$SECONDS
  set +e
  "$BA_PYTHON" -m pytest -p no:cacheprovider --timeout="${BA_TEST_TIMEOUT:-600}" \
      --session-timeout="$((deadline - SECONDS > 60 ? deadline - SECONDS : 60))" -ra "$@"
  rc=$?
  set -e
  echo "[test] ComfyUI $BA_CORE: pytest exited $rc after $((SECONDS - start)) s" >&2
  return $rc
}

if [ $# -gt 0 ]; then
  run_on_core "${BA_CORE:-0.3.75}" "$@"
  exit $?
fi
read -r full_core server_core <<<"${BA_CORES:-0.33.0 0.3.75}"
rc_full=0
rc_server=0
run_on_core "$full_core" tests || rc_full=$?
run_on_core "$server_core" tests/comfy || rc_server=$?
echo "[test] whole suite on ComfyUI $full_core: exit $rc_full; tests/comfy on ComfyUI $server_core: exit $rc_server" >&2
[ "$rc_full" = 0 ] && [ "$rc_server" = 0 ]
