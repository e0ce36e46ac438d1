"""Loudness figures from the meter's 100 ms K-weighted powers (ITU-R BS.1770-4, EBU Tech 3341 / 3342).

- momentary loudness: 400 ms windows (4 sub-blocks), every 100 ms;
- short-term loudness: 3 s windows (30 sub-blocks), every 100 ms;
- integrated loudness: the 400 ms blocks gated at -70 LUFS, then at 10 LU under the mean of the survivors
  (BS.1770-4 eq. 5-7; the same gating pyloudnorm applies to a whole file, here without holding the file);
- loudness range (LRA, Tech 3342): short-term values gated at -70 LUFS, then at 20 LU under their power mean;
  LRA is the spread between their 10th and 95th percentiles.
"""
from __future__ import annotations

import numpy as np

ABSOLUTE_GATE = -70.0
RELATIVE_GATE_INTEGRATED = -10.0
RELATIVE_GATE_LRA = -20.0


def to_lufs(power) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return -0.691 + 10.0 * np.log10(np.asarray(power, dtype=np.float64))


def windowed_power(subblocks: np.ndarray, width: int) -> np.ndarray:
    """Mean power of every run of `width` consecutive sub-blocks (one value per 100 ms step)."""
    if subblocks.size < width:
        return np.zeros(0)
    c = np.concatenate([[0.0], np.cumsum(subblocks)])
    return (c[width:] - c[:-width]) / width


def momentary(subblocks: np.ndarray) -> np.ndarray:
    return to_lufs(windowed_power(subblocks, 4))


def short_term(subblocks: np.ndarray) -> np.ndarray:
    return to_lufs(windowed_power(subblocks, 30))


def integrated(subblocks: np.ndarray) -> float:
    """Gated integrated loudness in LUFS; -inf when nothing passes the absolute gate (or under 400 ms)."""
    power = windowed_power(subblocks, 4)
    level = to_lufs(power)
    keep = level >= ABSOLUTE_GATE
    if not keep.any():
        return float("-inf")
    relative = to_lufs(power[keep].mean()) + RELATIVE_GATE_INTEGRATED
    keep &= level > relative
    return float(to_lufs(power[keep].mean())) if keep.any() else float("-inf")


def loudness_range(subblocks: np.ndarray) -> float:
    """EBU Tech 3342 LRA in LU; 0 when the programme is too short (under 3 s) or silent."""
    power = windowed_power(subblocks, 30)
    level = to_lufs(power)
    keep = level >= ABSOLUTE_GATE
    if not keep.any():
        return 0.0
    relative = to_lufs(power[keep].mean()) + RELATIVE_GATE_LRA
    gated = level[keep & (level >= relative)]
    if gated.size == 0:
        return 0.0
    low, high = np.percentile(gated, [10.0, 95.0])
    return float(high - low)
