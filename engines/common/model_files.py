"""Model folders and safe tensor loading.

Every loader of the pack goes through here: it checks that a model folder holds the files it needs before anything
loads (naming the folder and each missing file), and it reads tensors only through safetensors or
``torch.load(weights_only=True)``, never through plain pickle. Finding *which* folder (ComfyUI's registered
``models/<family>`` paths) is the node layer's job; engines receive a `Path`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence, Union

import torch

from .errors import InputError, ModelFilesMissing

PathLike = Union[str, Path]
SAFE_SUFFIXES = (".safetensors",)
TORCH_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt")


def require_files(folder: PathLike, required: Iterable[Union[str, Sequence[str]]], input_name: str = "model") -> Path:
    """Check that `folder` exists and holds every required file; return it as a `Path`.

    Each entry of `required` is a path relative to the folder, or a tuple of alternatives of which one must exist
    (``("model.safetensors", "pytorch_model.bin")``).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelFilesMissing(input_name, str(folder), [_describe(r) for r in required],
                                hint=f"The folder '{folder}' does not exist; create it and put the model files in it.")
    missing = []
    for entry in required:
        options = (entry,) if isinstance(entry, str) else tuple(entry)
        if not any((folder / option).exists() for option in options):
            missing.append(_describe(entry))
    if missing:
        raise ModelFilesMissing(input_name, str(folder), missing)
    return folder


def _describe(entry: Union[str, Sequence[str]]) -> str:
    return entry if isinstance(entry, str) else " or ".join(entry)


def load_state_dict(path: PathLike, device: Union[str, torch.device] = "cpu") -> dict:
    """Load a tensor dict from ``.safetensors`` or from a torch file with ``weights_only=True``.

    A torch file that needs arbitrary pickled objects is refused with a message naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFilesMissing("model", str(path.parent), [path.name])
    if path.suffix in SAFE_SUFFIXES:
        from safetensors.torch import load_file

        return load_file(str(path), device=str(device))
    try:
        state = torch.load(str(path), map_location=device, weights_only=True)
    except Exception as exc:  # weights_only refuses pickled code: say so, never fall back to full unpickling
        raise InputError("model", "a weights file that loads with torch.load(weights_only=True) or safetensors",
                         f"'{path}' ({type(exc).__name__}: {exc})",
                         "Convert it to .safetensors; the pack never unpickles untrusted files.") from exc
    if isinstance(state, Mapping) and "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise InputError("model", "a state dict (a mapping of names to tensors)", f"{type(state).__name__} in '{path}'")
    return dict(state)
