"""The node layer's link to ComfyUI: progress bars, interrupts, registered folders, devices.

Engines never import ComfyUI; nodes use these helpers to hand them plain objects (`Progress`, `Path`,
`ContentCache`, `torch.device`).
"""
from __future__ import annotations

import os
from pathlib import Path

import folder_paths

from ..engines.common.cache import ContentCache
from ..engines.common.errors import InputError, ModelFilesMissing
from ..engines.common.progress import Progress

PACK = "Broadcast"
CATEGORY = "Broadcast"

# Model families and their folders under ComfyUI's models directory (registered at load time in __init__.py).
MODEL_FOLDERS = ("omnivoice", "musetalk", "ditto", "sam3")
CACHE_FOLDER = "broadcast_cache"          # content-hash cache: mask sequences, prompts, avatars, packets
TRT_FOLDER = "broadcast_tensorrt"         # built TensorRT engines (keyed by GPU, versions and shapes)


def register_folders() -> None:
    """Register the pack's model and cache folders with ComfyUI (idempotent)."""
    for name in MODEL_FOLDERS + (CACHE_FOLDER, TRT_FOLDER):
        if name not in folder_paths.folder_names_and_paths:
            folder_paths.add_model_folder_path(name, os.path.join(folder_paths.models_dir, name), is_default=True)


def progress(total: int) -> Progress:
    """A `Progress` that drives ComfyUI's progress bar and raises on the user's cancel."""
    import comfy.model_management
    import comfy.utils

    bar = comfy.utils.ProgressBar(max(int(total), 1))

    def on_update(done: int, total_: int) -> None:
        bar.update_absolute(done, max(total_, 1))

    return Progress(total, on_update=on_update,
                    check_cancel=comfy.model_management.throw_exception_if_processing_interrupted)


def model_names(family: str) -> list[str]:
    """Model folders (one level deep) under every registered path of `family`, for a combo widget."""
    names = set()
    for base in folder_paths.get_folder_paths(family):
        if os.path.isdir(base):
            names.update(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)) and not d.startswith("."))
    return sorted(names)


def model_dir(family: str, name: str, input_name: str = "model_name") -> Path:
    """Resolve a model folder by its name inside `models/<family>`; a missing one names every place looked at."""
    if not name or os.path.isabs(name) or ".." in Path(name).parts:
        raise InputError(input_name, f"the name of a folder inside models/{family}", repr(name),
                         "Workflows refer to models by name, never by path.")
    bases = folder_paths.get_folder_paths(family)
    for base in bases:
        candidate = Path(base) / name
        if candidate.is_dir():
            return candidate
    raise ModelFilesMissing(input_name, os.path.join(bases[0] if bases else f"models/{family}", name), [name],
                            hint=f"Put the '{name}' folder inside models/{family} (see the README).")


def cache() -> ContentCache:
    """The pack's content-hash cache, inside ComfyUI's models folder."""
    return ContentCache(folder_paths.get_folder_paths(CACHE_FOLDER)[0])


def output_dir() -> Path:
    return Path(folder_paths.get_output_directory())


def temp_dir() -> Path:
    return Path(folder_paths.get_temp_directory())


def torch_device():
    import comfy.model_management

    return comfy.model_management.get_torch_device()


def offload_device():
    import comfy.model_management

    return comfy.model_management.unet_offload_device()
