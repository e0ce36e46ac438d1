#!/usr/bin/env bash
# THE setup-and-demo command: builds (or reuses) the environment, makes the sample clip, queues
# workflows/api/demo_export.api.json headlessly through a real ComfyUI and prints the .mp4 it wrote.
#   bash scripts/demo.sh                      # extra arguments go to scripts/run_workflow.py (e.g. --url ...)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/env.sh
export PYTHONDONTWRITEBYTECODE=1
out=$("$BA_PYTHON" scripts/run_workflow.py --demo "$@")
printf '%s\n' "$out"
video=$(printf '%s\n' "$out" | grep -E '\.mp4($|\?)' | tail -n 1 || true)
if [ -z "$video" ]; then
  echo "[demo] the demo finished but wrote no .mp4" >&2
  exit 1
fi
echo "[demo] video with audio: $video" >&2
