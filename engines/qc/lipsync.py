"""Lip-sync offset: where the audio envelope's changes line up best with the mouth region's motion.

Model: lips move when the loudness changes (a syllable opens and closes the mouth), so the motion energy of the
mouth region between frame k-1 and frame k follows |A(k) - A(k-1)|, where A(k) is the RMS of the audio in frame k's
slot (one frame long, centred on its presentation time k / fps, as the lip-sync renderers of this pack sample their
audio features). Shifting the audio slots by a lag tau and correlating finds the offset.

1. Mouth region, unsupervised: every analysis block's motion series is correlated (Pearson) with the audio-change
   series at whole-frame lags within the search window; the blocks whose best correlation is highest are the mouth
   (a presenter's swaying body or blinking eyes move, but not with the syllables). The best lag per block is not
   used, so the choice does not favour any offset.
2. Offset, sub-frame: the selected blocks' summed motion is correlated with the audio change at lags every 5 ms
   (audio slots from the 1 ms energy bins); the peak is refined by a parabola through its neighbours.

Sign: a positive offset means the audio is late (the sound comes after the lips), negative that it is early.
Confidence: the correlation at the peak (0-1). Under the node's minimum the estimate is reported as inconclusive.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

SEARCH_MS = 500.0
FINE_STEP_MS = 5.0
MAX_MOUTH_BLOCKS = 6


@dataclass(frozen=True)
class SyncEstimate:
    offset_ms: float
    confidence: float
    mouth_blocks: tuple        # block indices used
    lags_ms: np.ndarray        # the fine search's lags
    correlation: np.ndarray    # and its curve


def _prefix(ms_energy: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(ms_energy, dtype=np.float64)])


def slot_rms(prefix: np.ndarray, frames: np.ndarray, fps: float, lag_ms: float) -> np.ndarray:
    """RMS of the audio in each frame's slot [k - 1/2, k + 1/2) / fps, shifted by `lag_ms`; fractional ms
    interpolated linearly within the 1 ms bins."""
    n_ms = prefix.size - 1
    a = (frames - 0.5) * 1000.0 / fps + lag_ms
    b = a + 1000.0 / fps

    def at(t):
        t = np.clip(t, 0.0, n_ms)
        i = np.minimum(np.floor(t).astype(np.int64), n_ms - 1)
        return prefix[i] + (t - i) * (prefix[i + 1] - prefix[i])

    return np.sqrt(np.maximum(at(b) - at(a), 0.0) / (b - a))


def _zscore(x: np.ndarray, axis: int = 0) -> np.ndarray:
    x = x - x.mean(axis=axis, keepdims=True)
    sd = x.std(axis=axis, keepdims=True)
    return x / np.where(sd > 1e-9, sd, np.inf)


def estimate(block_motion: np.ndarray, fps: float, ms_energy: np.ndarray,
             search_ms: float = SEARCH_MS) -> Optional[SyncEstimate]:
    """Offset of the audio against the mouth motion; None when the clip is too short to tell (under ~2 s)."""
    frames_total = block_motion.shape[0]
    audio_ms = ms_energy.size
    pad = int(np.ceil(search_ms * fps / 1000.0)) + 1
    # Frames whose shifted slots stay inside the audio for every lag searched.
    first = max(1, pad)
    last = min(frames_total - 1, int(np.floor((audio_ms - search_ms) * fps / 1000.0 - 0.5)) - 1)
    if last - first < 2 * fps:
        return None
    frames = np.arange(first - 1, last + 1)  # slots k-1 .. k for the change at k
    prefix = _prefix(ms_energy)
    motion = block_motion[first:last + 1].astype(np.float64)

    def change(lag):
        rms = slot_rms(prefix, frames.astype(np.float64), fps, lag)
        return np.abs(np.diff(rms))

    # 1. mouth blocks: best correlation over whole-frame lags, per block
    coarse = np.arange(-pad + 1, pad) * 1000.0 / fps
    coarse = coarse[np.abs(coarse) <= search_ms + 1e-6]
    mz = _zscore(motion)
    best = np.full(motion.shape[1], -1.0)
    for lag in coarse:
        az = _zscore(change(lag))
        best = np.maximum(best, az @ mz / az.size)
    order = np.argsort(best)[::-1]
    top = best[order[0]]
    if not np.isfinite(top) or top <= 0:
        return SyncEstimate(0.0, 0.0, (), np.zeros(0), np.zeros(0))
    chosen = tuple(int(i) for i in order[:MAX_MOUTH_BLOCKS] if best[i] >= 0.5 * top)
    mouth = motion[:, list(chosen)].sum(axis=1)

    # 2. fine lag with a parabolic peak
    lags = np.arange(-search_ms, search_ms + 1e-6, FINE_STEP_MS)
    mzs = _zscore(mouth)
    corr = np.array([float(_zscore(change(lag)) @ mzs / mzs.size) for lag in lags])
    i = int(np.argmax(corr))
    offset = float(lags[i])
    if 0 < i < lags.size - 1:
        y0, y1, y2 = corr[i - 1], corr[i], corr[i + 1]
        denom = y0 - 2 * y1 + y2
        if denom < 0:
            offset += FINE_STEP_MS * 0.5 * (y0 - y2) / denom
    return SyncEstimate(offset, max(0.0, float(corr[i])), chosen, lags, corr)
