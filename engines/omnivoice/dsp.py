"""Small signal helpers shared by the mastering stages and the clause joiner.

Arrays are float64 ``(..., T)``: every helper works along the last axis, so a ``(channels, T)`` block is processed
in one call. Envelopes use cumulative sums (O(T) whatever the window), filters are second-order sections run
forward and backward (zero phase). True peak is `engines/common/true_peak.py` (shared with the QC meter).
"""
from __future__ import annotations

import numpy as np
from scipy import signal

def moving_average(x: np.ndarray, width: int) -> np.ndarray:
    """Centred moving average of width `width` samples along the last axis (edges use the samples available)."""
    width = max(int(width), 1)
    if width == 1:
        return np.array(x, dtype=np.float64, copy=True)
    left = width // 2
    right = width - 1 - left
    pad = [(0, 0)] * (x.ndim - 1) + [(left + 1, right)]
    c = np.cumsum(np.pad(np.asarray(x, dtype=np.float64), pad), axis=-1)
    n = x.shape[-1]
    total = c[..., width:width + n] - c[..., :n]
    # Count of real (unpadded) samples in each window, for exact averages at the edges.
    idx = np.arange(n)
    count = np.minimum(idx + right, n - 1) - np.maximum(idx - left, 0) + 1
    return total / count


def rms_envelope(x: np.ndarray, width: int) -> np.ndarray:
    return np.sqrt(np.maximum(moving_average(np.square(x), width), 0.0))


def abs_envelope(x: np.ndarray, width: int) -> np.ndarray:
    return moving_average(np.abs(x), width)


def butter_sos(order: int, cutoff, sample_rate: int, btype: str) -> np.ndarray:
    return signal.butter(order, cutoff, btype=btype, fs=sample_rate, output="sos")


def zero_phase(sos: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Forward-backward filtering: no phase shift, so a band split and its remainder line up sample for sample."""
    padlen = min(3 * (2 * len(sos) + 1), x.shape[-1] - 1)
    return signal.sosfiltfilt(sos, x, axis=-1, padlen=max(padlen, 0))


def to_db(x) -> np.ndarray:
    return 20.0 * np.log10(np.maximum(np.asarray(x, dtype=np.float64), 1e-12))


def from_db(db) -> np.ndarray:
    return np.power(10.0, np.asarray(db, dtype=np.float64) / 20.0)


def raised_cosine(n: int, rising: bool = True) -> np.ndarray:
    """``n`` samples going 0 -> 1 (or 1 -> 0) along half a cosine period."""
    if n <= 0:
        return np.zeros(0)
    ramp = 0.5 - 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    return ramp if rising else ramp[::-1]
