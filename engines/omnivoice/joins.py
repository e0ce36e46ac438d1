"""Joining generated clauses into one take without clicks or thumps.

Each cut is moved to the nearest rising zero crossing (searched +-1.5 ms), then the two clauses overlap with an
equal-power crossfade (cos/sin weights, so the summed power stays level across the seam). Ordinary joins use a short
crossfade; joins the writer marked with an ellipsis use 25 ms, as the posts settled on. A breath join (a long
clause cut at its comma) first makes sure the two clauses are separated by at least `BREATH_MS` of quiet (the
posts' 150 ms comma micro-breath), counting the quiet both clips already end and start with.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .text import JOIN_BREATH, JOIN_ELLIPSIS

CROSSFADE_MS = {JOIN_ELLIPSIS: 25.0}
DEFAULT_CROSSFADE_MS = 8.0
SEARCH_MS = 1.5
BREATH_MS = 150.0
QUIET_LEVEL = 10 ** (-50 / 20)  # below -50 dBFS counts as pause (OmniVoice's own silence threshold)


def quiet_samples(x: np.ndarray, from_end: bool) -> int:
    """How many samples at the start (or end) of `x` stay under `QUIET_LEVEL`."""
    loud = np.flatnonzero(np.abs(x) >= QUIET_LEVEL)
    if loud.size == 0:
        return int(x.size)
    return int(x.size - 1 - loud[-1]) if from_end else int(loud[0])


def with_breath(a: np.ndarray, b: np.ndarray, sample_rate: int, breath_ms: float = BREATH_MS) -> np.ndarray:
    """`b` preceded by the silence needed so that a's tail quiet + b's head quiet reaches `breath_ms`."""
    fade = int(round(DEFAULT_CROSSFADE_MS * sample_rate / 1000.0))
    need = int(round(breath_ms * sample_rate / 1000.0)) + fade  # the crossfade overlaps part of the quiet
    have = quiet_samples(a, from_end=True) + quiet_samples(b, from_end=False)
    if have >= need:
        return b
    return np.concatenate([np.zeros(need - have), b])


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
    return _crossfade(a, b, sample_rate, fade_ms)[0]


def _crossfade(a: np.ndarray, b: np.ndarray, sample_rate: int, fade_ms: float) -> tuple:
    """`crossfade_join`'s output, with where `b`'s sample 0 lands in it (``b[j]`` is ``out[offset + j]`` after
    the overlap) and where `a`'s last kept sample ends (one past it)."""
    n = int(round(fade_ms * sample_rate / 1000.0))
    radius = int(round(SEARCH_MS * sample_rate / 1000.0))
    n = min(n, a.size // 2, b.size // 2)
    if n < 2:
        return np.concatenate([a, b]), a.size, a.size
    ca = rising_zero_crossing(a, a.size - n, radius)
    cb = rising_zero_crossing(b, 0, radius)
    overlap = min(a.size - ca, b.size - cb)
    w = (np.arange(overlap) + 0.5) / overlap
    mixed = a[ca:ca + overlap] * np.cos(0.5 * np.pi * w) + b[cb:cb + overlap] * np.sin(0.5 * np.pi * w)
    return np.concatenate([a[:ca], mixed, b[cb + overlap:]]), ca - cb, ca + overlap


def join_clauses(clips: Sequence[np.ndarray], joins: Sequence[str], sample_rate: int) -> np.ndarray:
    """Join clip ``i`` to clip ``i + 1`` with the crossfade its join kind asks for."""
    return join_with_spans(clips, joins, sample_rate)[0]


def join_with_spans(clips: Sequence[np.ndarray], joins: Sequence[str], sample_rate: int) -> tuple:
    """`join_clauses`' output and, for every clip, ``(start, end)``: the output samples it occupies.

    ``start`` is where the clip's sample 0 lands (``out[start + j]`` is ``clips[i][j]`` outside the crossfades;
    a breath's added silence comes before it) and ``end`` one past its last sample still in the output, so spans of
    neighbours overlap by their crossfade. Captions are timed from these spans, to the sample.
    """
    if not clips:
        return np.zeros(0, dtype=np.float32), []
    if len(joins) != len(clips) - 1:
        raise ValueError(f"{len(clips)} clips need {len(clips) - 1} joins, got {len(joins)}")
    out = np.asarray(clips[0], dtype=np.float64)
    spans = [[0, out.size]]
    for clip, kind in zip(clips[1:], joins):
        clip = np.asarray(clip, dtype=np.float64)
        padded = with_breath(out, clip, sample_rate) if kind == JOIN_BREATH else clip
        out, offset, kept = _crossfade(out, padded, sample_rate, CROSSFADE_MS.get(kind, DEFAULT_CROSSFADE_MS))
        spans[-1][1] = min(spans[-1][1], kept)
        start = offset + padded.size - clip.size
        spans.append([start, start + clip.size])
    return out.astype(np.float32), [tuple(s) for s in spans]
