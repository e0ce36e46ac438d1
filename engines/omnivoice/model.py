"""Loading OmniVoice from a local folder, never from the hub.

Folder layout (as published as ``k2-fsa/OmniVoice``)::

    <folder>/config.json, model.safetensors, tokenizer.json, tokenizer_config.json
    <folder>/audio_tokenizer/config.json, model.safetensors, preprocessor_config.json

Every file is checked before anything loads: without ``audio_tokenizer/`` the upstream loader silently fetches
``eustlb/higgs-audio-v2-tokenizer`` from the hub, and with a path that is not a folder it calls ``snapshot_download``.
The Qwen3 backbone runs in the chosen precision; the Higgs-Audio-v2 tokenizer (whose decoder makes the waveform) is
always fp32, because the posts saw NaN from an fp16 decoder.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from ..common.errors import InputError
from ..common.fingerprint import file_fingerprint
from ..common.precision import dtype_for, precision_name, torch_auto_precision
from ..common.model_files import require_files

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                  "audio_tokenizer/config.json", "audio_tokenizer/model.safetensors",
                  "audio_tokenizer/preprocessor_config.json")
WARMUPS = ("none", "B1", "B1+B3")
WARMUP_TEXTS = {"B1": ["Hello there, this is a warm-up."],
                "B3": ["Good evening and welcome.", "We begin with the markets.", "Stay with us for more."]}


@dataclass
class LoadedOmniVoice:
    """A loaded OmniVoice plus what the nodes need to know about it.

    ``fingerprint`` identifies the audio tokenizer's weights: voice prompts are its codes, so it is part of every
    prompt cache key (a prompt built by one tokenizer is never reused with another).
    """

    model: "torch.nn.Module"
    folder: Path
    backbone_dtype: torch.dtype
    sample_rate: int
    frame_rate: int
    num_codebooks: int
    fingerprint: str

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def resolve_precision(precision: str, device: torch.device) -> torch.dtype:
    """`engines.common.precision` names -> the backbone's dtype; "auto" by the pack's one policy (the node resolves
    it with ComfyUI's view of the device first)."""
    name = precision_name(precision)
    dtype = dtype_for(torch_auto_precision(device) if name == "auto" else name)
    if device.type == "cpu" and dtype == torch.float16:
        raise InputError("precision", "fp32 or bf16 on the CPU", "fp16", "fp16 matmuls are not supported well on "
                         "the CPU; choose auto.")
    return dtype


def tokenizer_fingerprint(folder: Path) -> str:
    """Fingerprint of the audio tokenizer's config and weights (`engines.common.fingerprint`; 1 MiB edges: cheap on
    an 800 MB file, and the safetensors header changes whenever the weights do)."""
    at = folder / "audio_tokenizer"
    return file_fingerprint([at / "config.json", at / "model.safetensors"], edge_bytes=1 << 20)


def load_omnivoice(folder: os.PathLike | str, precision: str = "auto", device: Optional[torch.device] = None,
                   load_on: Optional[torch.device] = None, input_name: str = "model_name") -> LoadedOmniVoice:
    """Load the folder's model for running on `device` (CPU by default), placed on `load_on` (default `device`).

    The precision is chosen for the device the model will run on; ComfyUI keeps it on the offload device until a
    node needs it. Raises `InputError` for missing files or bad options.
    """
    folder = require_files(folder, REQUIRED_FILES, input_name)
    device = torch.device(device or "cpu")
    dtype = resolve_precision(precision, device)
    _check_config(folder, input_name)
    from omnivoice import OmniVoice

    # local_files_only: the path is a folder, but belt and braces against any hub lookup inside transformers.
    model = OmniVoice.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
    model.audio_tokenizer.float()  # the waveform decoder stays fp32 whatever the backbone runs in
    model.eval()
    model.to(load_on or device)
    at_cfg = model.audio_tokenizer.config
    return LoadedOmniVoice(model=model, folder=folder, backbone_dtype=dtype, sample_rate=int(model.sampling_rate),
                           frame_rate=int(at_cfg.frame_rate), num_codebooks=int(model.config.num_audio_codebook),
                           fingerprint=tokenizer_fingerprint(folder))


def _check_config(folder: Path, input_name: str) -> None:
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(input_name, "a readable config.json", f"'{folder / 'config.json'}' ({exc})") from exc
    if cfg.get("model_type") != "omnivoice":
        raise InputError(input_name, "an OmniVoice folder (config.json with model_type 'omnivoice')",
                         f"model_type {cfg.get('model_type')!r} in '{folder}'")


def warm_up(loaded: LoadedOmniVoice, mode: str = "B1", num_step: int = 10, progress=None) -> None:
    """Run the shapes the first real calls will use (one clause, then three), so their one-off costs are paid now."""
    if mode not in WARMUPS:
        raise InputError("warmup", f"one of {', '.join(WARMUPS)}", repr(mode))
    if mode == "none":
        return
    from .speak import seeded

    batches = [WARMUP_TEXTS["B1"]] + ([WARMUP_TEXTS["B3"]] if mode == "B1+B3" else [])
    for texts in batches:
        with seeded(0, loaded.device):
            loaded.model.generate(text=texts, language="en", num_step=num_step, postprocess_output=False)
        if progress is not None:
            progress.step()
