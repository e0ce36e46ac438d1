"""Cheaper frames: cadence infill (SLERP between rendered crops) and the silence bypass with Hermite easing.

- Cadence stride s renders every s-th frame (and the ends of every run of frames that need rendering) and fills the
  rest by spherical interpolation of the rendered crops, in float32 whatever the model precision (fp16 dot products
  over 786k values overflow), norm-preserving (the norm is interpolated linearly), and linear when the two crops are
  nearly parallel (cos > 0.9995) where the sine formula loses precision.
- Silence: a frame whose 640-sample audio window has RMS below the threshold shows the avatar frame itself; the
  neural output fades out and in over `ease_frames` frames with a Hermite curve: at distance d from speech,
  tau = d / (T + 1), h = 3 tau^2 - 2 tau^3 and the neural weight is 1 - h (T = 3: 1.0, 0.844, 0.500, 0.156, 0.0).
"""
from __future__ import annotations

import numpy as np
import torch

from ..common.slerp import slerp as common_slerp

SILENCE_RMS = 0.008
EASE_FRAMES = 3


def hermite_weights(ease_frames: int = EASE_FRAMES) -> np.ndarray:
    """Neural weight at distance 0..T+1 from the nearest speech frame."""
    tau = np.arange(ease_frames + 2, dtype=np.float64) / (ease_frames + 1)
    return 1.0 - (3 * tau ** 2 - 2 * tau ** 3)


def neural_weights(rms: np.ndarray, threshold: float = SILENCE_RMS, ease_frames: int = EASE_FRAMES) -> np.ndarray:
    """Per frame, how much of the rendered frame to show (1 speech, 0 bypassed, eased in between)."""
    speech = rms >= threshold
    n = len(rms)
    if speech.all():
        return np.ones(n, np.float32)
    if not speech.any():
        return np.zeros(n, np.float32)
    idx = np.arange(n)
    pos = np.flatnonzero(speech)
    nearest = np.abs(idx[:, None] - pos[None, :]).min(axis=1) if n * len(pos) < 4_000_000 else _distance(speech)
    table = hermite_weights(ease_frames)
    return np.where(nearest < len(table), table[np.minimum(nearest, len(table) - 1)], 0.0).astype(np.float32)


def _distance(mask: np.ndarray) -> np.ndarray:
    """Distance to the nearest True, two linear passes (for long clips)."""
    n = len(mask)
    big = n + 1
    d = np.full(n, big, np.int64)
    last = -big
    for i in range(n):
        if mask[i]:
            last = i
        d[i] = i - last
    last = 2 * big
    for i in range(n - 1, -1, -1):
        if mask[i]:
            last = i
        d[i] = min(d[i], last - i)
    return d


def render_plan(weights: np.ndarray, stride: int) -> np.ndarray:
    """Indices to run through the networks: every `stride`-th frame that needs rendering plus the first and last
    frame of each run of such frames (so every infilled frame lies between two rendered ones of its own run)."""
    active = weights > 0
    n = len(active)
    idx = np.arange(n)
    prev_off = np.concatenate([[True], ~active[:-1]])
    next_off = np.concatenate([~active[1:], [True]])
    keep = active & ((idx % stride == 0) | prev_off | next_off)
    return np.flatnonzero(keep)


def slerp(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor | float, dot_threshold: float = 0.9995) -> torch.Tensor:
    """`engines.common.slerp.slerp` with upstream Ditto's arithmetic: float32, linear where the cosine exceeds
    `dot_threshold`, norms offset by 1e-7; the result in float32. ``t`` is ``[B]`` or a scalar."""
    return common_slerp(a, b, t, dtype=torch.float32, linear_above_cos=dot_threshold, linear_below_sin=0.0,
                        eps=1e-7, out_dtype=torch.float32)
