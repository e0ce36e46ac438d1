"""Lip-sync offset, with a verdict only when the evidence beats chance.

Feature model: the mouth is open on loud (vowel) sounds and closed on quiet ones, so the mean luma of the blocks that
hold the mouth follows the audio level: sqrt(A(k)), A(k) being the RMS of the audio in frame k's slot (one frame
long, centred on its presentation time, as the pack's renderers sample audio features), with an open mouth darker or
lighter than a closed one. Both series lose their 0.5 s moving average first (`DETREND_S`): what is compared is
syllable-rate detail, not phrase-level activity, which any two readings share by chance (they start, pause and stop).
(The earlier model, mouth *motion* against |A(k) - A(k-1)|, beat the null on only 3 of 8 synchronous espeak-ng clips.)

Statistic and its null. Every analysis block's detrended luma is correlated (Pearson, absolute) with the detrended
audio level at every whole-frame lag within +-`SEARCH_MS`; the statistic T is the largest of those correlations. Picking the best
of hundreds of blocks and dozens of lags makes a large T on *unrelated* audio likely, so T is never read on its own:
it is compared with its distribution under "this audio has nothing to do with these lips", computed per clip by
rotating the audio series circularly against the picture by `NULL_SHIFTS` offsets at least `SEARCH_MS` + 1 s
away from any alignment searched (same clip, same speech rhythm, same picture, only the pairing broken), and taking
the same maximum for each. p = (1 + shifts at least as large) / (1 + shifts). Only p <= `ALPHA` gives a verdict.

States: `in_sync` (offset within the tolerance), `out_of_sync` (by how much), `inconclusive` with the reason:
too little speech (under `MIN_SPEECH_S` of frames with sound above the speech level), no visible mouth (nothing in
the picture moves), clip too short for the search and its null, or no significant correlation (p > ALPHA).

Offset (only with a verdict): the blocks whose best correlation is highest (at most `MAX_MOUTH_BLOCKS`, at least half
the best) are summed and correlated again at lags every 5 ms within one frame of the best block's whole-frame lag
(the alignment that was significant); the peak is refined by a parabola.

Sign: `offset_ms` > 0 means the audio is late (the sound comes after the lips), < 0 early. The standards (ITU-R
BT.1359, EBU R37, ATSC IS-191) write audio *early* as +: R37's "+40/-60 ms" is 40 ms early, 60 ms late.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

SEARCH_MS = 500.0
FINE_STEP_MS = 5.0
MAX_MOUTH_BLOCKS = 6
NULL_SHIFTS = 99
ALPHA = 0.01
MIN_SPEECH_S = 1.5
DETREND_S = 0.5           # both series lose their moving average over this: phrase-level loudness and slow picture
                          # drift agree by chance (every reading starts, pauses and stops), syllables do not
MIN_MOTION = 0.05          # mean |change| in 8-bit codes: a picture whose blocks all move less shows no mouth
IN_SYNC, OUT_OF_SYNC, INCONCLUSIVE = "in_sync", "out_of_sync", "inconclusive"


@dataclass(frozen=True)
class Tolerance:
    name: str
    max_early_ms: float
    max_late_ms: float
    source: str


TOLERANCES = {t.name: t for t in (
    Tolerance("EBU R37", 40.0, 60.0, "EBU R 37 (2007): sound at most 40 ms before, 60 ms after the picture"),
    Tolerance("ATSC IS-191", 15.0, 45.0, "ATSC IS-191 (2003): audio never leads by > 15 ms nor lags by > 45 ms"),
    Tolerance("ITU-R BT.1359 detectability", 45.0, 125.0,
              "ITU-R BT.1359-1 (1998) detectability thresholds: +45 ms early / -125 ms late"),
    Tolerance("ITU-R BT.1359 acceptability", 90.0, 185.0,
              "ITU-R BT.1359-1 (1998) acceptability thresholds: +90 ms early / -185 ms late"),
)}
DEFAULT_TOLERANCE = "EBU R37"
CUSTOM = "custom"


@dataclass(frozen=True)
class SyncEstimate:
    state: str                 # in_sync / out_of_sync / inconclusive (`judge` fills in the first two)
    offset_ms: Optional[float]
    correlation: float         # T, the best block/lag correlation
    p_value: Optional[float]   # against the circular-shift null
    reason: str                # why inconclusive ("" otherwise)
    mouth_blocks: tuple = ()
    speech_s: float = 0.0
    lags_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    curve: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value <= ALPHA and self.offset_ms is not None


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


def _inconclusive(reason: str, speech_s: float = 0.0, correlation: float = 0.0, p: Optional[float] = None):
    return SyncEstimate(INCONCLUSIVE, None, correlation, p, reason, speech_s=speech_s)


def _detrend(x: np.ndarray, width: int) -> np.ndarray:
    """`x` less its centred moving average over `width` frames (along axis 0): syllable-rate detail only."""
    from scipy.ndimage import uniform_filter1d

    return x - uniform_filter1d(x, width, axis=0, mode="nearest")


def estimate(block_luma: np.ndarray, block_motion: np.ndarray, fps: float, ms_energy: np.ndarray,
             speech_dbfs: float = -40.0, search_ms: float = SEARCH_MS, seed: int = 0) -> SyncEstimate:
    """The audio's offset against the mouth motion, or inconclusive with the reason (`judge` adds the tolerance)."""
    frames_total = block_motion.shape[0]
    audio_ms = ms_energy.size
    pad = int(np.ceil(search_ms * fps / 1000.0)) + 1
    first = max(1, pad)
    last = min(frames_total - 1, int(np.floor((audio_ms - search_ms) * fps / 1000.0 - 0.5)) - 1)
    count = last - first + 1
    if count < 2 * fps:
        return _inconclusive(f"clip too short ({frames_total / fps:.1f} s) for a +-{search_ms:.0f} ms search")
    prefix = _prefix(ms_energy)
    speech = slot_rms(prefix, np.arange(first, last + 1, dtype=np.float64), fps, 0.0)
    talking = np.flatnonzero(20 * np.log10(np.maximum(speech, 1e-12)) > speech_dbfs)
    speech_s = float(talking.size / fps)
    if speech_s < MIN_SPEECH_S:
        return _inconclusive(f"too little speech ({speech_s:.1f} s above {speech_dbfs:g} dBFS; "
                             f"{MIN_SPEECH_S:g} s needed)", speech_s)
    # Only the stretch from the first to the last speech is compared: silence before and after the speech, where
    # a still mouth meets a still soundtrack, would agree for any pairing and make the null (rotations carry that
    # silence elsewhere) too easy to beat.
    first, last = first + int(talking[0]), first + int(talking[-1])
    count = last - first + 1
    min_shift = pad + int(np.ceil(fps))  # rotations at least the search window + 1 s from any alignment
    if count < 2 * fps:
        return _inconclusive(f"too little speech ({count / fps:.1f} s from first to last)", speech_s)
    frames = np.arange(first - 1, last + 1)  # slots k-1 .. k for the change at k
    motion = block_motion[first:last + 1].astype(np.float64)
    if float(motion.mean(axis=0).max(initial=0.0)) < MIN_MOTION:
        return _inconclusive("no visible mouth (nothing in the picture moves)", speech_s)

    width = max(3, int(round(DETREND_S * fps)) | 1)
    slots = frames[1:].astype(np.float64)

    def level(lag):
        return _zscore(_detrend(np.sqrt(slot_rms(prefix, slots, fps, lag)), width))

    coarse = np.arange(-pad + 1, pad) * 1000.0 / fps
    coarse = coarse[np.abs(coarse) <= search_ms + 1e-6]
    audio = np.stack([level(lag) for lag in coarse])                # [lags, frames]
    lz = _zscore(_detrend(block_luma[first:last + 1].astype(np.float64), width))  # [frames, blocks]

    def best_per_block(shift: int) -> np.ndarray:
        a = np.roll(audio, shift, axis=1) if shift else audio
        return np.abs(a @ lz).max(axis=0) / count                   # [blocks]

    signed = audio @ lz / count                                     # [lags, blocks]
    table = np.abs(signed)
    best = table.max(axis=0)
    observed = float(best.max())
    if not np.isfinite(observed) or observed <= 0:
        return _inconclusive("no visible mouth (no motion that varies)", speech_s)
    order = np.argsort(best)[::-1]
    chosen = tuple(int(i) for i in order[:MAX_MOUTH_BLOCKS] if best[i] >= 0.5 * observed)
    if count < 2 * min_shift + fps:
        return SyncEstimate(INCONCLUSIVE, None, observed, None, f"clip too short ({frames_total / fps:.1f} s) for "
                            "the null (rotations of the audio)", chosen, speech_s)
    rng = np.random.default_rng(seed)
    shifts = rng.integers(min_shift, count - min_shift + 1, NULL_SHIFTS)
    null = np.array([best_per_block(int(s)).max() for s in shifts])
    p = float((1 + np.count_nonzero(null >= observed)) / (1 + NULL_SHIFTS))
    if p > ALPHA:
        # The likeliest mouth blocks are kept (the face-flicker check looks around them), never an offset.
        return SyncEstimate(INCONCLUSIVE, None, observed, p,
                            f"no significant correlation (best {observed:.2f}, p = {p:.2f} against {NULL_SHIFTS} "
                            f"rotations of the audio; {ALPHA:g} needed)", chosen, speech_s)
    # The significant alignment is the whole-frame lag of the best block: the fine search stays within a frame of it
    # (a second, chance peak of the summed blocks elsewhere cannot take the offset away). An open mouth may be darker
    # or lighter than a closed one: each block counts with the sign of its correlation there.
    at = int(np.argmax(table[:, order[0]]))
    anchor = float(coarse[at])
    signs = np.sign(signed[at, list(chosen)])
    mouth = _zscore((lz[:, list(chosen)] * signs).sum(axis=1))
    frame_ms = 1000.0 / fps
    lags = np.arange(anchor - frame_ms, anchor + frame_ms + 1e-6, FINE_STEP_MS)
    curve = np.array([float(level(lag) @ mouth / mouth.size) for lag in lags])
    i = int(np.argmax(curve))
    offset = float(lags[i])
    if 0 < i < lags.size - 1:
        y0, y1, y2 = curve[i - 1], curve[i], curve[i + 1]
        denom = y0 - 2 * y1 + y2
        if denom < 0:
            offset += FINE_STEP_MS * 0.5 * (y0 - y2) / denom
    return SyncEstimate(IN_SYNC, offset, observed, p, "", chosen, speech_s, lags, curve)


def judge(est: SyncEstimate, max_early_ms: float, max_late_ms: float) -> SyncEstimate:
    """`est` with its state set against a tolerance (inconclusive estimates stay so)."""
    if est.state == INCONCLUSIVE or est.offset_ms is None:
        return est
    ok = -max_early_ms <= est.offset_ms <= max_late_ms
    return SyncEstimate(IN_SYNC if ok else OUT_OF_SYNC, est.offset_ms, est.correlation, est.p_value, "",
                        est.mouth_blocks, est.speech_s, est.lags_ms, est.curve)


def tolerance(name: str, max_early_ms: float, max_late_ms: float) -> Tolerance:
    """The named tolerance profile, or the two widgets' values for custom."""
    if name == CUSTOM:
        return Tolerance(CUSTOM, float(max_early_ms), float(max_late_ms), "the node's max_audio_early_ms / "
                         "max_audio_late_ms")
    if name not in TOLERANCES:
        from ..common.errors import InputError

        raise InputError("lipsync_tolerance", f"one of {', '.join((*TOLERANCES, CUSTOM))}", repr(name))
    return TOLERANCES[name]
