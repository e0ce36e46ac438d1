"""Ditto's 8-way emotion condition, fixed or steered by the speech's energy and pitch.

Order of the 8 values (upstream's, index 4 = neutral): angry, disgust, fear, happy, neutral, sad, surprise, contempt
(`motion.EMOTIONS`). Upstream conditions every frame on a soft one-hot, softmax of 8 at the chosen label.

Steering (``strength`` > 0): per 25 fps frame, the speech's loudness (RMS in dB) and pitch (autocorrelation f0 of
voiced frames) are z-scored against the clip's own median and spread, smoothed over half a second, and turned into
logits added to the chosen label's: louder and higher than usual raises happy (and surprise when the pitch jumps
far above the voice's norm), loud and low raises angry, quiet and low raises sad. Relative measures make the
steering independent of the recording level and of the voice's register; silence keeps the chosen label.
"""
from __future__ import annotations

import numpy as np

from ..common.errors import InputError

EMOTIONS = ("angry", "disgust", "fear", "happy", "neutral", "sad", "surprise", "contempt")
FPS = 25
SAMPLE_RATE = 16000


def label_logits(label: int) -> np.ndarray:
    logits = np.zeros(8, np.float64)
    logits[label] = 8.0
    return logits


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def frame_energy_pitch(audio16k: np.ndarray, n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """(dB RMS, f0 Hz or NaN when unvoiced) per 40 ms frame of 16 kHz mono speech."""
    hop = SAMPLE_RATE // FPS
    x = np.asarray(audio16k, np.float64).reshape(-1)
    x = np.pad(x, (0, max(0, n_frames * hop + hop - x.size)))
    energy = np.empty(n_frames)
    pitch = np.full(n_frames, np.nan)
    lo, hi = SAMPLE_RATE // 400, SAMPLE_RATE // 70  # 70-400 Hz voices
    for i in range(n_frames):
        seg = x[i * hop:i * hop + 2 * hop]  # 80 ms window for two periods of a low voice
        rms = np.sqrt(np.mean(seg ** 2) + 1e-12)
        energy[i] = 20 * np.log10(rms)
        if rms < 1e-3:
            continue
        seg = seg - seg.mean()
        ac = np.correlate(seg, seg, mode="full")[seg.size - 1:]
        if ac[0] <= 0:
            continue
        lag = lo + int(np.argmax(ac[lo:hi]))
        if ac[lag] / ac[0] > 0.45:  # clearly periodic: voiced
            pitch[i] = SAMPLE_RATE / lag
    return energy, pitch


def _z(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    ref = values[mask]
    if ref.size < 3:
        return np.zeros_like(values)
    med = np.median(ref)
    spread = np.median(np.abs(ref - med)) * 1.4826 + 1e-6
    return np.where(mask, (values - med) / spread, 0.0)


def _smooth(values: np.ndarray, frames: int) -> np.ndarray:
    if frames <= 1:
        return values
    kernel = np.ones(frames) / frames
    pad = frames // 2
    return np.convolve(np.pad(values, (pad, frames - 1 - pad), mode="edge"), kernel, mode="valid")


def emotion_weights(n_frames: int, label: int, audio16k=None, strength: float = 0.0) -> np.ndarray:
    """(n, 8) float32 emotion condition: the soft one-hot of `label`, steered by the audio when `strength` > 0."""
    if not 0 <= int(label) < len(EMOTIONS):
        raise InputError("emotion", f"one of {', '.join(EMOTIONS)}", str(label))
    if not 0.0 <= float(strength) <= 4.0:
        raise InputError("emotion_steering", "a steering strength between 0 and 4", str(strength))
    base = np.broadcast_to(label_logits(int(label)), (n_frames, 8)).copy()
    if strength > 0 and audio16k is not None and n_frames > 0:
        energy, pitch = frame_energy_pitch(audio16k, n_frames)
        speaking = energy > np.max(energy) - 40.0
        e = _smooth(_z(energy, speaking), FPS // 2)
        voiced = np.isfinite(pitch)
        p = _smooth(_z(np.nan_to_num(pitch), voiced), FPS // 2)
        arousal = 0.6 * e + 0.4 * p
        steer = np.zeros((n_frames, 8))
        steer[:, EMOTIONS.index("happy")] = np.clip(arousal, 0, None)
        steer[:, EMOTIONS.index("surprise")] = np.clip(p - 1.5, 0, None)
        steer[:, EMOTIONS.index("angry")] = np.clip(e - p - 1.0, 0, None)
        steer[:, EMOTIONS.index("sad")] = np.clip(-arousal - 0.5, 0, None)
        steer[~speaking] = 0.0
        base = base + 4.0 * float(strength) * steer
    return softmax(base).astype(np.float32)


def dominant(weights: np.ndarray) -> list:
    """The strongest emotion per frame, by name (for reports and tests)."""
    return [EMOTIONS[i] for i in np.argmax(weights, axis=1)]
