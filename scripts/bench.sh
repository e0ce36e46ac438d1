#!/usr/bin/env bash
# Runs the benchmarks (ratios measured side by side in one run, printed; never pass/fail):
#   bash scripts/bench.sh                 # every benchmarks/bench_*.py
#   bash scripts/bench.sh export [args]   # one family: benchmarks/bench_export.py, extra arguments passed on
#   bash scripts/bench.sh hostpath        # benchmarks/bench_host_path.py (the renders' byte path)
#   bash scripts/bench.sh --quick         # every family with these arguments (smoke runs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/env.sh
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  family=$1
  shift
  [ "$family" = hostpath ] && family=host_path    # bench_host_path.py: MuseTalk's and Ditto's byte path
  files=("benchmarks/bench_$family.py")
  if [ ! -f "${files[0]}" ]; then
    echo "no benchmark for '$family'; there are: $(cd benchmarks && ls bench_*.py 2>/dev/null | sed 's/^bench_//; s/\.py$//' | tr '\n' ' ')" >&2
    exit 2
  fi
else
  shopt -s nullglob
  files=(benchmarks/bench_*.py)
  if [ ${#files[@]} -eq 0 ]; then
    echo "no benchmarks/bench_*.py yet" >&2
    exit 2
  fi
fi
rc=0
for f in "${files[@]}"; do
  echo "=== $f" >&2
  "$BA_PYTHON" "$f" "$@" || { echo "[bench] $f failed" >&2; rc=1; }
done
exit $rc
