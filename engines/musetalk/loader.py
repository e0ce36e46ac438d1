"""Load MuseTalk's three networks from a model folder in the upstream layout.

```
<folder>/musetalkV15/musetalk.json + unet.pth (or unet.safetensors)   v1.5 UNet (v1.0: musetalk/pytorch_model.bin)
<folder>/sd-vae/config.json + diffusion_pytorch_model.safetensors (or .bin)  sd-vae-ft-mse
<folder>/whisper/config.json + model.safetensors (or pytorch_model.bin) + preprocessor_config.json   whisper-tiny
```
The UNet folder has no ``config.json``, so ``from_pretrained`` cannot read it: the UNet is built from
``musetalk.json`` and its state dict loaded strictly. The VAE goes through ``from_pretrained`` because SD-era ``.bin``
files carry legacy attention key names that only that path renames. Only the Whisper encoder is kept.
Everything is local: ``local_files_only`` everywhere, tensors through safetensors or ``weights_only`` loads.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from ..common.errors import InputError, ModelFilesMissing
from ..common.fingerprint import file_fingerprint
from ..common.model_files import load_state_dict, require_files


@dataclass(frozen=True)
class UNetLayout:
    folder: str
    weights: tuple


UNET_LAYOUTS = {
    "v1.5": UNetLayout("musetalkV15", ("unet.safetensors", "unet.pth")),
    "v1.0": UNetLayout("musetalk", ("pytorch_model.safetensors", "pytorch_model.bin")),
}
VAE_FILES = ("sd-vae/config.json", ("sd-vae/diffusion_pytorch_model.safetensors", "sd-vae/diffusion_pytorch_model.bin"))
WHISPER_FILES = ("whisper/config.json", ("whisper/model.safetensors", "whisper/pytorch_model.bin"),
                 "whisper/preprocessor_config.json")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class MuseTalkNets(torch.nn.Module):
    """The UNet, the VAE and the Whisper encoder as one module (so ComfyUI can move and offload them together).

    Attributes besides the networks: ``feature_extractor`` (WhisperFeatureExtractor), ``version`` ("v1.5"/"v1.0"),
    ``dtype`` (compute dtype), ``vae_id`` (a fingerprint of the VAE files: avatars are keyed by it), ``unet_id``
    (of the UNet's files: its ONNX export is keyed by it; None: hashed from the weights).
    """

    def __init__(self, unet, vae, whisper_encoder, feature_extractor, version: str, dtype: torch.dtype, vae_id: str,
                 unet_id: Optional[str] = None):
        super().__init__()
        self.unet = unet
        self.vae = vae
        self.whisper = whisper_encoder
        self.feature_extractor = feature_extractor
        self.version = version
        self.compute_dtype = dtype
        self.vae_id = vae_id
        self.unet_id = unet_id

    @property
    def scaling_factor(self) -> float:
        return float(getattr(self.vae.config, "scaling_factor", None) or 0.18215)

    @property
    def audio_width(self) -> int:
        return int(self.unet.config.cross_attention_dim)


def find_root(folder: os.PathLike | str) -> Path:
    """The folder holding the layout; also accepts one of its subfolders (upstream ``models/`` copied as is)."""
    folder = Path(folder)
    for candidate in (folder, folder.parent):
        if any((candidate / lay.folder / "musetalk.json").is_file() for lay in UNET_LAYOUTS.values()):
            return candidate
    return folder


def _first(root: Path, options) -> Path:
    for name in (options,) if isinstance(options, str) else options:
        if (root / name).is_file():
            return root / name
    raise ModelFilesMissing("model_name", str(root), [" or ".join(options)])


def check_layout(folder: os.PathLike | str) -> tuple[Path, str]:
    """Return ``(root, unet version)`` after checking every file exists; the error lists all that are missing."""
    root = find_root(folder)
    version = next((v for v, lay in UNET_LAYOUTS.items() if (root / lay.folder).is_dir()), "v1.5")
    lay = UNET_LAYOUTS[version]
    require_files(root, [f"{lay.folder}/musetalk.json", tuple(f"{lay.folder}/{w}" for w in lay.weights),
                         *VAE_FILES, *WHISPER_FILES], input_name="model_name")
    return root, version


@contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def load_unet(root: Path, version: str, dtype: torch.dtype):
    from diffusers import UNet2DConditionModel

    lay = UNET_LAYOUTS[version]
    with open(root / lay.folder / "musetalk.json", encoding="utf-8") as f:
        config = json.load(f)
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    if config.get("in_channels") != 8 or config.get("out_channels") != 4:
        raise InputError("model_name", "a MuseTalk UNet config with in_channels 8 and out_channels 4",
                         f"in_channels {config.get('in_channels')}, out_channels {config.get('out_channels')} in "
                         f"{root / lay.folder / 'musetalk.json'}")
    state = load_state_dict(_first(root, [f"{lay.folder}/{w}" for w in lay.weights]))
    # Build on the meta device and adopt the loaded tensors: skips random init (~10 s for the full UNet on CPU).
    with torch.device("meta"):
        unet = UNet2DConditionModel.from_config(config)
    try:
        unet.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:
        raise InputError("model_name", "UNet weights matching musetalk.json", f"mismatched keys or shapes ({exc})",
                         "Use the unet.pth that belongs to this musetalk.json.") from None
    leftovers = [n for n, t in list(unet.named_parameters()) + list(unet.named_buffers()) if t.is_meta]
    if leftovers:  # a buffer not in the state dict: build normally instead
        unet = UNet2DConditionModel.from_config(config)
        unet.load_state_dict(state, strict=True)
    if any(p.dtype != dtype for p in unet.parameters()):
        unet = unet.to(dtype)
    return unet.eval().requires_grad_(False)


def load_musetalk(folder: os.PathLike | str, dtype: torch.dtype = torch.float32) -> MuseTalkNets:
    """Load the networks from `folder` onto the CPU in `dtype` (the node moves them to the compute device)."""
    from diffusers import AutoencoderKL
    from transformers import WhisperFeatureExtractor, WhisperModel

    root, version = check_layout(folder)
    unet = load_unet(root, version, dtype)
    # Say which file to read: otherwise diffusers first looks for .safetensors and logs a scary miss.
    has_safetensors = (root / "sd-vae" / "diffusion_pytorch_model.safetensors").is_file()
    vae = AutoencoderKL.from_pretrained(str(root / "sd-vae"), local_files_only=True, torch_dtype=dtype,
                                        use_safetensors=has_safetensors)
    vae = vae.eval().requires_grad_(False)
    with _quiet_transformers():   # its load report lists proj_out.weight (the decoder head we drop) as unexpected
        whisper = WhisperModel.from_pretrained(str(root / "whisper"), local_files_only=True, dtype=dtype)
    encoder = whisper.get_encoder().eval().requires_grad_(False)
    extractor = WhisperFeatureExtractor.from_pretrained(str(root / "whisper"), local_files_only=True)
    if encoder.config.d_model != unet.config.cross_attention_dim:
        raise InputError("model_name", f"a Whisper encoder of width {unet.config.cross_attention_dim} "
                         "(the UNet's cross_attention_dim)", f"width {encoder.config.d_model}",
                         "MuseTalk uses whisper-tiny (384).")
    if extractor.sampling_rate != 16000:
        raise InputError("model_name", "a Whisper feature extractor at 16000 Hz",
                         f"{extractor.sampling_rate} Hz in {root / 'whisper' / 'preprocessor_config.json'}")
    # The shared cheap fingerprint (names, sizes, edge bytes): a copied folder keeps its avatars, replaced weights
    # make new ones.
    vae_id = file_fingerprint(p for p in (root / "sd-vae").iterdir() if p.is_file())
    unet_dir = root / UNET_LAYOUTS[version].folder
    unet_id = file_fingerprint(p for p in unet_dir.iterdir() if p.is_file())
    return MuseTalkNets(unet, vae, encoder, extractor, version, dtype, vae_id, unet_id)


def describe(nets: Any) -> str:
    n = sum(p.numel() for p in nets.parameters())
    return f"MuseTalk {nets.version}, {n / 1e6:.1f} M parameters, {str(nets.compute_dtype).replace('torch.', '')}"
