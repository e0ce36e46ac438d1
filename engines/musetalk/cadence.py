"""Keyframe cadence: run the UNet on every `stride`-th frame only and fill the rest by SLERP of latents.

A linear blend of two latents shrinks their norm (by cos(θ/2) at the midpoint), which decodes as a faded, blurred
mouth; spherical interpolation keeps the direction on the arc and rescales to the linearly blended norm, so the
in-between frames stay as sharp as the keyframes. The last frame is always a keyframe, so the cadence never
extrapolates and always returns exactly N frames.

Latents are ``[B, C, H, W]`` (MuseTalk: ``[B, 4, 32, 32]``); any trailing shape works.
"""
from __future__ import annotations

import torch

from ..common.slerp import slerp as common_slerp

# Below this angle (radians) sin(θ) is too small to divide by: blend linearly, which is then indistinguishable.
TINY_ANGLE = 1e-4
_EPS = 1e-12


def keyframe_indices(n_frames: int, stride: int) -> torch.Tensor:
    """Frames the UNet evaluates: ``0, stride, 2·stride, …`` plus the last frame (sorted, unique, int64)."""
    if n_frames < 1:
        raise ValueError(f"n_frames must be at least 1, got {n_frames}")
    if stride < 1:
        raise ValueError(f"stride must be at least 1, got {stride}")
    keys = torch.arange(0, n_frames, stride, dtype=torch.long)
    if keys[-1].item() != n_frames - 1:
        keys = torch.cat([keys, torch.tensor([n_frames - 1])])
    return keys


def slerp(z0: torch.Tensor, z1: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """`engines.common.slerp.slerp` with MuseTalk's arithmetic: float64, linear where |sin| of the angle is tiny
    (which also catches the degenerate antipodal case); the result in `z0`'s dtype. ``alpha`` is ``[B]``."""
    return common_slerp(z0, z1, alpha, dtype=torch.float64, linear_below_sin=TINY_ANGLE, eps=_EPS)


def expand_keyframes(key_latents: torch.Tensor, key_indices: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """Latents for `frames` from the keyframes around each one.

    Args:
        key_latents: ``[M, ...]`` latents of the keyframes, in frame order.
        key_indices: ``[M]`` their frame numbers, strictly increasing.
        frames: ``[K]`` frame numbers inside ``[key_indices[0], key_indices[-1]]``.
    Returns:
        ``[K, ...]``: keyframes copied untouched, every other frame the SLERP of its two neighbouring keyframes at
        ``α = (f - k0) / (k1 - k0)`` (true keyframe spacing, so a short last gap is handled right).
    """
    key_indices = key_indices.to(torch.long).cpu()
    frames = frames.to(torch.long).cpu()
    if frames.numel() == 0:
        return key_latents[:0]
    if frames.min() < key_indices[0] or frames.max() > key_indices[-1]:
        raise ValueError(f"frames {frames.min().item()}..{frames.max().item()} lie outside the keyframes "
                         f"{key_indices[0].item()}..{key_indices[-1].item()}")
    if key_indices.numel() == 1:
        return key_latents[:1].expand(frames.numel(), *key_latents.shape[1:]).clone()
    seg = (torch.searchsorted(key_indices, frames, right=True) - 1).clamp(0, key_indices.numel() - 2)
    k0, k1 = key_indices[seg], key_indices[seg + 1]
    alpha = (frames - k0).to(torch.float64) / (k1 - k0).to(torch.float64)
    dev = key_latents.device
    out = slerp(key_latents[seg.to(dev)], key_latents[(seg + 1).to(dev)], alpha.to(dev))
    exact0 = (alpha == 0).to(dev)
    exact1 = (alpha == 1).to(dev)
    if exact0.any():
        out[exact0] = key_latents[seg.to(dev)[exact0]]
    if exact1.any():
        out[exact1] = key_latents[(seg + 1).to(dev)[exact1]]
    return out
