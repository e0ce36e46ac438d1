"""Put the token-grid mask into a ComfyUI LATENT dict: plain video latents and nested audio-video ones.

A LATENT is ``{"samples": Tensor [B, C, T, h, w] | NestedTensor(video, audio), ...}``. For a nested latent (MiniMax
H3: video ``[B, 24, T, h, w]`` + audio ``[B, 32, 2, T40]``; LTX-2 alike) core's sampler takes a nested noise mask,
one part per stream; the audio part here is all zeros ("keep the soundtrack latent") unless asked to regenerate it.
The nested type is taken from the latent itself (``type(samples)``), so this module never imports ComfyUI.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..common.errors import InputError
from ..common.progress import Progress
from . import tokengrid

GRID_KEY = "broadcast_token_grid"  # LATENT dict key: the grid the noise mask was snapped to (read by the preview)


def latent_parts(latent, input_name: str):
    """``(samples, video [B, C, T, h, w], audio or None)`` of a LATENT dict."""
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if samples is None:
        raise InputError(input_name, "a LATENT dict with 'samples'", type(latent).__name__)
    if getattr(samples, "is_nested", False):
        parts = list(samples.unbind())
        if len(parts) != 2 or parts[0].dim() != 5:
            raise InputError(input_name, "an audio-video latent of (video [B, C, T, h, w], audio)",
                             f"{len(parts)} parts of shapes {[tuple(p.shape) for p in parts]}")
        return samples, parts[0], parts[1]
    if samples.dim() != 5:
        raise InputError(input_name, "a video latent [batch, channels, frames, height, width]",
                         f"shape {tuple(samples.shape)}", "Image latents have no token groups in time.")
    return samples, samples, None


def with_source(latent_samples, video, audio, source_latent):
    """Replace the latent's video part (or both parts, for a nested source) by the encoded source frames."""
    _, src_video, src_audio = latent_parts(source_latent, "source_latent")
    if tuple(src_video.shape) != tuple(video.shape):
        raise InputError("source_latent", f"a video latent of shape {tuple(video.shape)} (as 'latent')",
                         f"{tuple(src_video.shape)}", "Encode the same cropped frames with the model's VAE.")
    if audio is None:
        return src_video, src_video, None
    new_audio = src_audio if src_audio is not None else audio
    if tuple(new_audio.shape) != tuple(audio.shape):
        raise InputError("source_latent", f"an audio part of shape {tuple(audio.shape)} (as 'latent')",
                         f"{tuple(new_audio.shape)}")
    return type(latent_samples)([src_video, new_audio]), src_video, new_audio


def apply(latent: dict, masks: torch.Tensor, grid: tokengrid.TokenGrid, coverage: float = 0.0,
          regenerate_audio: bool = False, source_latent: Optional[dict] = None,
          progress: Optional[Progress] = None):
    """A new LATENT dict with the token-grid noise mask of ``masks`` ``[F, H, W]``; returns ``(latent, grid_mask)``.

    The input dict is not modified. Its other keys (batch_index, ...) are kept; ``GRID_KEY`` records the grid.
    """
    samples, video, audio = latent_parts(latent, "latent")
    if source_latent is not None:
        samples, video, audio = with_source(samples, video, audio, source_latent)
    T, h, w = video.shape[2:]
    grid_mask = tokengrid.snap_to_grid(masks, grid, T, h, w, coverage, progress=progress)
    video_mask = tokengrid.noise_mask_5d(grid_mask).to(video.device)
    if audio is not None:
        noise = type(samples)([video_mask, tokengrid.audio_mask(audio.shape, regenerate_audio).to(audio.device)])
    else:
        noise = video_mask
    out = dict(latent)
    out["samples"] = samples
    out["noise_mask"] = noise
    out[GRID_KEY] = {**grid.as_dict(), "pixel_frames": int(masks.shape[0]), "height": int(masks.shape[1]),
                     "width": int(masks.shape[2])}
    return out, grid_mask


def grid_of(latent) -> tuple:
    """``(TokenGrid, grid_mask [T, h, w])`` stored in a LATENT by `apply` (for previews)."""
    spec = latent.get(GRID_KEY) if isinstance(latent, dict) else None
    noise = latent.get("noise_mask") if isinstance(latent, dict) else None
    if spec is None or noise is None:
        raise InputError("latent", "the latent output of Broadcast Latent Inpaint Mask",
                         "a latent without a token-grid noise mask")
    video_mask = noise.unbind()[0] if getattr(noise, "is_nested", False) else noise
    return tokengrid.TokenGrid.from_dict(spec), video_mask[0, 0].float().cpu()
