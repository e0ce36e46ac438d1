"""Audio -> one 1024-d HuBERT feature per 25 fps video frame, as upstream's offline path computes it.

Upstream feeds its streaming HuBERT ONNX windows of 6480 samples (10 frames of 640 samples + 80) and keeps, from the
20 output rows (50 Hz), rows [-14:-4] averaged in pairs: 5 video frames per window. Windows start every 5 frames
over the audio padded with 2000 zeros in front and 6480 behind. Here all windows are cut at once as a strided view
and the post-processing is one reshape/mean; the ONNX model runs in batches when its batch axis is dynamic.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..common.errors import InputError
from ..common.progress import Progress, ensure

SAMPLE_RATE = 16000
FPS = 25
HOP = SAMPLE_RATE // FPS            # 640 samples per video frame
CHUNK = (3, 5, 2)                    # past / valid / future frames of one window
WINDOW = sum(CHUNK) * HOP + 80       # 6480 samples
FRONT_PAD = WINDOW - (CHUNK[1] + CHUNK[2]) * HOP   # 2000 zeros before the audio
ROWS = (-(CHUNK[1] + CHUNK[2]) * 2, -CHUNK[2] * 2)  # rows [-14:-4] of the 50 Hz output
FEATURE_DIM = 1024


def frame_count(num_samples: int) -> int:
    """Video frames covering `num_samples` at 16 kHz (upstream: ceil(len / 16000 * 25))."""
    return math.ceil(num_samples / HOP)


def windows(audio16k: np.ndarray) -> np.ndarray:
    """All HuBERT input windows for the clip, (n_windows, 6480) float32 (a view; no copy of the audio per window)."""
    n = frame_count(len(audio16k))
    padded = np.concatenate([np.zeros(FRONT_PAD, np.float32), audio16k.astype(np.float32),
                             np.zeros(WINDOW, np.float32)])
    starts = np.arange(0, n, CHUNK[1]) * HOP
    view = np.lib.stride_tricks.sliding_window_view(padded, WINDOW)
    return view[starts]


def features_from_outputs(outputs: np.ndarray, n_frames: int) -> np.ndarray:
    """(n_windows, rows, 1024) HuBERT outputs -> (n_frames, 1024): rows [-14:-4], pairs averaged, cut to length."""
    valid = outputs[:, ROWS[0]:ROWS[1]]
    w, r, d = valid.shape
    feats = valid.reshape(w, r // 2, 2, d).mean(axis=2).reshape(-1, d)
    return np.ascontiguousarray(feats[:n_frames], dtype=np.float32)


class HubertRunner:
    """The upstream HuBERT ONNX file behind onnxruntime."""

    def __init__(self, session):
        self.session = session
        inp = session.get_inputs()[0]
        self.input_name = inp.name
        self.batched = not isinstance(inp.shape[0], int) if inp.shape else False

    def __call__(self, wins: np.ndarray, progress: Optional[Progress] = None, batch: int = 16) -> np.ndarray:
        progress = ensure(progress)
        outs = []
        step = batch if self.batched else 1
        for s in range(0, len(wins), step):
            chunk = np.ascontiguousarray(wins[s:s + step], dtype=np.float32)
            out = np.asarray(self.session.run(None, {self.input_name: chunk})[0], dtype=np.float32)
            if out.ndim == 2:          # the released file drops the batch axis: (rows, 1024) for one window
                out = out[None]
            outs.append(out)
            progress.step(len(chunk))
        return np.concatenate(outs, axis=0)


def check_length(audio16k: np.ndarray, input_name: str = "audio") -> None:
    if len(audio16k) < HOP:
        raise InputError(input_name, f"at least one video frame of audio ({HOP} samples at 16 kHz = 40 ms)",
                         f"{len(audio16k)} samples ({len(audio16k) / SAMPLE_RATE * 1000:.1f} ms)")


def audio_features(runner: HubertRunner, audio16k: np.ndarray, progress: Optional[Progress] = None) -> np.ndarray:
    """16 kHz mono float samples -> (frames, 1024) float32."""
    check_length(audio16k)
    wins = windows(audio16k)
    if progress is not None:
        progress.reset(len(wins))
    return features_from_outputs(runner(wins, progress), frame_count(len(audio16k)))


def frame_rms(audio16k: np.ndarray, n_frames: int) -> np.ndarray:
    """RMS of each frame's 640-sample window (zero-padded past the end): the silence detector's measure."""
    padded = np.zeros(n_frames * HOP, np.float32)
    m = min(len(audio16k), len(padded))
    padded[:m] = audio16k[:m]
    return np.sqrt(np.mean(padded.reshape(n_frames, HOP) ** 2, axis=1))
