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


# Adaptive cadence (the posts' WebGPU build): a frame's articulation speed is the mean absolute change of its audio
# window's mean vector from the previous frame's; above the threshold a keyframe span is cut to the short stride.
VELOCITY_THRESHOLD = 0.065     # the posts' figure for whisper-tiny windows (80 ms stride above it, 160-200 ms below)


def window_velocity(window_means: torch.Tensor) -> torch.Tensor:
    """Acoustic velocity per frame ``Δv_f = mean_c |w̄_f,c − w̄_(f−1),c|`` from ``[N, D]`` window means (``Δv_0 = 0``),
    float64 ``[N]``."""
    w = window_means.to(torch.float64)
    v = torch.zeros(w.shape[0], dtype=torch.float64)
    if w.shape[0] > 1:
        v[1:] = (w[1:] - w[:-1]).abs().mean(dim=1)
    return v


def adaptive_keyframe_indices(velocity: torch.Tensor, min_stride: int, max_stride: int,
                              threshold: float = VELOCITY_THRESHOLD) -> torch.Tensor:
    """Keyframes whose spacing follows the articulation, segment by segment.

    From each keyframe ``k`` the next one is ``k + max_stride`` when every frame of ``(k, k + max_stride]`` moves
    slower than `threshold` (a steady vowel or a pause: SLERP carries the mouth), else ``k + min_stride`` (fast
    articulation: the UNet sees the mouth often). Always starts at 0 and ends on the last frame (never
    extrapolates), like `keyframe_indices`, which it equals when ``min_stride == max_stride``.
    """
    n = int(velocity.shape[0])
    if n < 1:
        raise ValueError("velocity must cover at least one frame")
    if not 1 <= min_stride <= max_stride:
        raise ValueError(f"strides must satisfy 1 <= min_stride <= max_stride, got {min_stride}, {max_stride}")
    fast = (velocity.to(torch.float64) > float(threshold)).tolist()
    keys, k = [0], 0
    while k < n - 1:
        span_end = min(k + max_stride, n - 1)
        step = min_stride if any(fast[k + 1:span_end + 1]) else max_stride
        k = min(k + step, n - 1)
        keys.append(k)
    return torch.tensor(keys, dtype=torch.long)
