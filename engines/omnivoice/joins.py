"""Joining generated clauses into one take without clicks or thumps.

Each cut is moved to the nearest rising zero crossing (searched +-1.5 ms), then the two clauses overlap with an
equal-power crossfade (cos/sin weights, so the summed power stays level across the seam). Ordinary joins use a short
crossfade; joins the writer marked with an ellipsis use 25 ms, as the posts settled on.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .text import JOIN_ELLIPSIS

CROSSFADE_MS = {JOIN_ELLIPSIS: 25.0}
DEFAULT_CROSSFADE_MS = 8.0
SEARCH_MS = 1.5


def rising_zero_crossing(x: np.ndarray, target: int, radius: int) -> int:
    """Index in ``[target - radius, target + radius]`` nearest `target` where `x` crosses zero going up, else target."""
    lo, hi = max(target - radius, 0), min(target + radius, x.size - 1)
    if hi - lo < 1:
        return int(np.clip(target, 0, max(x.size - 1, 0)))
    seg = x[lo:hi + 1]
    below = np.flatnonzero((seg[:-1] <= 0) & (seg[1:] > 0))
    if below.size == 0:
        return target
    # Of the two samples around each crossing, the one closer to zero.
    hits = below + lo + (np.abs(seg[below + 1]) < np.abs(seg[below]))
    return int(hits[np.argmin(np.abs(hits - target))])


def crossfade_join(a: np.ndarray, b: np.ndarray, sample_rate: int, fade_ms: float) -> np.ndarray:
    """`a` then `b`, overlapped by about `fade_ms` with an equal-power crossfade at zero crossings."""
    n = int(round(fade_ms * sample_rate / 1000.0))
    radius = int(round(SEARCH_MS * sample_rate / 1000.0))
    n = min(n, a.size // 2, b.size // 2)
    if n < 2:
        return np.concatenate([a, b])
    ca = rising_zero_crossing(a, a.size - n, radius)
    cb = rising_zero_crossing(b, 0, radius)
    overlap = min(a.size - ca, b.size - cb)
    w = (np.arange(overlap) + 0.5) / overlap
    mixed = a[ca:ca + overlap] * np.cos(0.5 * np.pi * w) + b[cb:cb + overlap] * np.sin(0.5 * np.pi * w)
    return np.concatenate([a[:ca], mixed, b[cb + overlap:]])


def join_clauses(clips: Sequence[np.ndarray], joins: Sequence[str], sample_rate: int) -> np.ndarray:
    """Join clip ``i`` to clip ``i + 1`` with the crossfade its join kind asks for."""
    if not clips:
        return np.zeros(0, dtype=np.float32)
    if len(joins) != len(clips) - 1:
        raise ValueError(f"{len(clips)} clips need {len(clips) - 1} joins, got {len(joins)}")
    out = np.asarray(clips[0], dtype=np.float64)
    for clip, kind in zip(clips[1:], joins):
        out = crossfade_join(out, np.asarray(clip, dtype=np.float64), sample_rate,
                             CROSSFADE_MS.get(kind, DEFAULT_CROSSFADE_MS))
    return out.astype(np.float32)
