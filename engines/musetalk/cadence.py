"""Keyframe cadence: run the UNet on every `stride`-th frame only and fill the rest by SLERP of latents.

A linear blend of two latents shrinks their norm (by cos(θ/2) at the midpoint), which decodes as a faded, blurred
mouth; spherical interpolation keeps the direction on the arc and rescales to the linearly blended norm, so the
in-between frames stay as sharp as the keyframes. The last frame is always a keyframe, so the cadence never
extrapolates and always returns exactly N frames.

Latents are ``[B, C, H, W]`` (MuseTalk: ``[B, 4, 32, 32]``); any trailing shape works.
"""
from __future__ import annotations

import torch

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
    """Spherical interpolation per batch item, norm blended linearly.

    Args:
        z0, z1: ``[B, ...]`` endpoints.
        alpha: ``[B]`` weights in [0, 1] (0 gives `z0`, 1 gives `z1`).
    Returns:
        ``[B, ...]`` with norm ``(1-α)‖z0‖ + α‖z1‖``; linear blend (renormalised) where the angle is tiny.
    """
    shape, dtype = z0.shape, z0.dtype
    a = alpha.to(torch.float64).reshape(-1, 1)
    v0 = z0.reshape(shape[0], -1).to(torch.float64)
    v1 = z1.reshape(shape[0], -1).to(torch.float64)
    n0 = v0.norm(dim=1, keepdim=True)
    n1 = v1.norm(dim=1, keepdim=True)
    u0 = v0 / n0.clamp_min(_EPS)
    u1 = v1 / n1.clamp_min(_EPS)
    theta = torch.acos((u0 * u1).sum(dim=1, keepdim=True).clamp(-1.0, 1.0))
    sin_t = torch.sin(theta)
    tiny = sin_t.abs() < TINY_ANGLE  # also catches the (degenerate) antipodal case
    safe_sin = torch.where(tiny, torch.ones_like(sin_t), sin_t)
    w0 = torch.where(tiny, 1 - a, torch.sin((1 - a) * theta) / safe_sin)
    w1 = torch.where(tiny, a, torch.sin(a * theta) / safe_sin)
    direction = w0 * u0 + w1 * u1
    direction = direction / direction.norm(dim=1, keepdim=True).clamp_min(_EPS)
    out = direction * ((1 - a) * n0 + a * n1)
    return out.reshape(shape).to(dtype)


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
