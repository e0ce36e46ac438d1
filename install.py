"""Installs what `requirements.txt` cannot say. ComfyUI-Manager (and comfy-cli) run `pip install -r requirements.txt`
and then this file with ComfyUI's own Python; by hand: `python install.py` in this folder, with that same Python.

- OmniVoice and pydub go in without their dependencies: OmniVoice's own requirements pull a UI stack (gradio,
  librosa, tensorboardX, webdataset) that is not on the inference path, and would move packages other packs share.
  What OmniVoice really needs at inference time (transformers, accelerate, soundfile) is in requirements.txt.
- onnxruntime goes in only when no onnxruntime build is there yet: `pip install onnxruntime` next to an installed
  `onnxruntime-gpu` (or `-directml`, `-openvino`) overwrites the same `onnxruntime` module with the CPU build, which
  silently takes the GPU away from every pack that uses it.

Safe to run again: whatever is already installed at the right version is left alone. Exits non-zero if pip fails.
"""
from __future__ import annotations

import subprocess
import sys
from importlib import metadata

# (distribution, pinned requirement): installed with --no-deps, exactly at this version.
NO_DEPS = (("omnivoice", "omnivoice==0.2.1"), ("pydub", "pydub==0.25.1"))
ONNXRUNTIME = "onnxruntime>=1.18"
ONNXRUNTIME_BUILDS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino",
                      "onnxruntime-silicon", "onnxruntime-qnn")


def installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def pip_install_command(requirements, no_deps: bool = False) -> list[str]:
    return [sys.executable, "-m", "pip", "install", *(["--no-deps"] if no_deps else []), *requirements]


def plan() -> list[list[str]]:
    """The pip commands still needed in this Python (empty when everything is in place)."""
    commands = []
    pending = [req for dist, req in NO_DEPS if installed_version(dist) != req.split("==", 1)[1]]
    if pending:
        commands.append(pip_install_command(pending, no_deps=True))
    if not any(installed_version(build) for build in ONNXRUNTIME_BUILDS):
        commands.append(pip_install_command([ONNXRUNTIME]))
    return commands


def main() -> int:
    for command in plan():
        print("[Broadcast Avatar] " + " ".join(command), flush=True)
        rc = subprocess.call(command)
        if rc != 0:
            print(f"[Broadcast Avatar] pip exited {rc}; the families that need these packages stay disabled "
                  "(the log at ComfyUI's start names them).", file=sys.stderr)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
