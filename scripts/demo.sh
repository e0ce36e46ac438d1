#!/usr/bin/env bash
# THE setup-and-demo command: builds (or reuses) the environment, then
#  - when the broadcast models are present (--models-dir, else the models folder of a COMFYUI_PATH you set) and a
#    voice to clone is given: runs workflows/api/broadcast_musetalk.api.json on the sample presenter and script;
#  - otherwise names every missing model file with the command that downloads it, and runs the weight-free demo
#    (the sample clip through workflows/api/demo_export.api.json). Either way it prints the .mp4 it wrote.
#   bash scripts/demo.sh [--models-dir DIR] [--voice CLIP --transcript TEXT] [run_workflow.py arguments, e.g. --url ...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
user_comfy=${COMFYUI_PATH:-}
. scripts/env.sh
export PYTHONDONTWRITEBYTECODE=1

models_dir=""
broadcast=()
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --models-dir) models_dir=$2; rest+=("$1" "$2"); shift 2 ;;
    --voice|--transcript) broadcast+=("$1" "$2"); shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
if [ -z "$models_dir" ]; then
  if [ -n "$user_comfy" ] && [ -d "$user_comfy/models" ]; then models_dir=$user_comfy/models
  else models_dir=${BA_CACHE}/models; fi
fi

set +e
out=$("$BA_PYTHON" scripts/broadcast_demo.py --models-dir "$models_dir" "${broadcast[@]}" "${rest[@]}")
rc=$?
set -e
if [ $rc -eq 3 ]; then
  echo "[demo] running the weight-free demo instead (sample clip -> Export Video)" >&2
  out=$("$BA_PYTHON" scripts/run_workflow.py --demo "${rest[@]}")
elif [ $rc -ne 0 ]; then
  exit $rc
fi
printf '%s\n' "$out"
video=$(printf '%s\n' "$out" | grep -E '\.mp4($|\?)' | tail -n 1 || true)
if [ -z "$video" ]; then
  echo "[demo] the demo finished but wrote no .mp4" >&2
  exit 1
fi
echo "[demo] video with audio: $video" >&2
