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

run_at() {  # run_at <transformers version> "<other pins>" <pytest args...>
  local version=$1 pins=$2 dir="$scratch/tf-$1"
  shift 2
  # shellcheck disable=SC2086  # the pins are separate words
  _ba_pip "$BA_PYTHON" install -q --no-deps --target "$dir" "transformers==$version" $pins
  PYTHONPATH="$dir" "$BA_PYTHON" -c "import transformers; assert transformers.__version__ == '$version'"
  echo "[range] transformers $version ($pins): $*" >&2
  PYTHONPATH="$dir" "$BA_PYTHON" -m pytest -p no:cacheprovider -q "$@"
}

# transformers 5.x below ~5.20 wants huggingface_hub 1.x and tokenizers <= 0.23.0 (hub 1.x needs httpx); 4.57
# wants hub 0.x, which the environment's diffusers no longer accepts, so it is run with diffusers 0.35 (the floor).
HUB1="huggingface_hub>=1.5,<2 tokenizers==0.22.2 httpx httpcore h11 anyio"
run_at 5.5.0 "$HUB1" tests/unit/test_sam3_hf_video.py                                        # SAM3: >=5.5,<6
run_at 5.3.0 "$HUB1" tests/unit/test_tts_omnivoice.py tests/unit/test_tts_voices.py          # OmniVoice: >=5.3
run_at 4.57.6 "huggingface_hub==0.36.0 tokenizers==0.22.1 diffusers==0.35.2" \
    tests/unit/test_musetalk_audio.py tests/unit/test_musetalk_pipeline.py                  # MuseTalk: >=4.57
