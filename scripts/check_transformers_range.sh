#!/usr/bin/env bash
# Runs the tests of the families that use transformers at the LOWER end of their supported range (the suite runs
# at the upper end, the environment's own). Not part of CI (it downloads the old wheels); run it when a range in
# __init__.py's FAMILIES or engines/sam3/hf_video.py's SUPPORTED_TRANSFORMERS changes:
#   bash scripts/check_transformers_range.sh
# The old transformers goes into a scratch folder put first on PYTHONPATH; the shared environment is not touched.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/env.sh
export PYTHONDONTWRITEBYTECODE=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

run_at() {  # run_at <transformers version> <pytest args...>
  local version=$1 dir="$scratch/tf-$1"
  shift
  # transformers 5.x below ~5.20 wants huggingface_hub 1.x and tokenizers <= 0.23.0; hub 1.x needs httpx.
  _ba_pip "$BA_PYTHON" install -q --no-deps --target "$dir" "transformers==$version" "huggingface_hub>=1.5,<2" \
      "tokenizers==0.22.2" httpx httpcore h11 anyio
  PYTHONPATH="$dir" "$BA_PYTHON" -c "import transformers; assert transformers.__version__ == '$version'"
  echo "[range] transformers $version: $*" >&2
  PYTHONPATH="$dir" "$BA_PYTHON" -m pytest -p no:cacheprovider -q "$@"
}

run_at 5.5.0 tests/unit/test_sam3_hf_video.py                                   # SAM3: >=5.5,<6
run_at 5.0.0 tests/unit/test_musetalk_audio.py tests/unit/test_musetalk_pipeline.py  # MuseTalk: >=5.0
