"""Whisper audio features for MuseTalk, windowed per video frame.

Layout (whisper-tiny): the encoder's 5 hidden states (embedding + 4 layers) of width 384 at 50 steps per second,
stacked as ``[S, 5, 384]``. Video frame ``i`` at ``fps`` takes the 10 steps starting at ``floor(i·50/fps)`` in a copy
padded with 4 zero steps on the left (−80 ms … +120 ms around the frame at 25 fps, as MuseTalk was trained) and
flattens them time-major to 50 tokens: ``[N, 50, 384]``. A sinusoidal positional encoding is added before the UNet.

Audio of any length: Whisper's extractor pads or silently truncates to 30 s, so the audio is cut into 30 s segments
that are encoded separately and concatenated.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch

from ..common.audio import to_mono
from ..common.errors import InputError
from ..common.progress import Progress, ensure

SAMPLE_RATE = 16000
STEPS_PER_SECOND = 50          # whisper encoder output rate
SEGMENT_SECONDS = 30           # whisper's fixed input window
WINDOW_STEPS = 10              # steps per video frame: 2 frames of context each side at 25 fps
LEFT_PAD_STEPS = 4             # the window starts 80 ms before the frame
TOKENS = 50                    # WINDOW_STEPS x 5 hidden states
SEGMENTS_PER_BATCH = 4         # 30 s segments encoded in one forward


def frame_count(num_samples: int, sample_rate: int, fps: float) -> int:
    """Video frames covered by the audio: ``floor(duration · fps)`` (exact for integer rates)."""
    return int(math.floor(num_samples * float(fps) / sample_rate + 1e-9))


def prepare_audio(audio: Any, fps: float, input_name: str = "audio") -> tuple[np.ndarray, int]:
    """Mono 16 kHz samples of an AUDIO dict and the number of video frames they cover (refused if below one)."""
    samples, _ = to_mono(audio, SAMPLE_RATE, input_name)
    n = frame_count(samples.shape[0], SAMPLE_RATE, fps)
    if n < 1:
        raise InputError(input_name, f"audio lasting at least one video frame ({1000.0 / fps:.1f} ms at {fps:g} fps)",
                         f"{1000.0 * samples.shape[0] / SAMPLE_RATE:.1f} ms", "Connect longer speech.")
    return samples, n


@torch.no_grad()
def encode_audio(whisper_encoder: torch.nn.Module, feature_extractor: Any, samples: np.ndarray,
                 device: torch.device, dtype: torch.dtype, progress: Optional[Progress] = None) -> torch.Tensor:
    """Whisper hidden states of 16 kHz mono `samples`: ``[S, 5, 384]`` float32 on CPU, ``S = floor(len·50/16000)``."""
    progress = ensure(progress)
    seg_len = SEGMENT_SECONDS * SAMPLE_RATE
    segments = [samples[i:i + seg_len] for i in range(0, len(samples), seg_len)]
    steps_total = int(math.floor(len(samples) * STEPS_PER_SECOND / SAMPLE_RATE))
    out = []
    for start in range(0, len(segments), SEGMENTS_PER_BATCH):
        chunk = segments[start:start + SEGMENTS_PER_BATCH]
        mel = feature_extractor(chunk, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
        hidden = whisper_encoder(mel.to(device, dtype), output_hidden_states=True).hidden_states
        stacked = torch.stack(hidden, dim=2).float().cpu()          # [b, 1500, 5, 384]
        out.append(stacked.reshape(-1, *stacked.shape[2:]))        # segments back to back in time
        progress.check()
    return torch.cat(out, dim=0)[:steps_total].contiguous()


def window_starts(n_frames: int, fps: float) -> torch.Tensor:
    """First padded step of each frame's window: ``floor(i · 50 / fps)`` as int64 ``[N]``."""
    i = torch.arange(n_frames, dtype=torch.float64)
    return torch.floor(i * STEPS_PER_SECOND / float(fps) + 1e-9).to(torch.long)


def pad_features(features: torch.Tensor, n_frames: int, fps: float) -> torch.Tensor:
    """Zero-pad ``[S, 5, D]`` features: 4 steps on the left, and on the right as many as the last window needs."""
    need = int(window_starts(n_frames, fps)[-1]) + WINDOW_STEPS if n_frames else 0
    right = max(0, need - (features.shape[0] + LEFT_PAD_STEPS))
    left = features.new_zeros((LEFT_PAD_STEPS, *features.shape[1:]))
    tail = features.new_zeros((right, *features.shape[1:]))
    return torch.cat([left, features, tail], dim=0)


def window_features(padded: torch.Tensor, frames: torch.Tensor, fps: float) -> torch.Tensor:
    """Audio tokens of the given frames in one gather: ``[K] -> [K, 50, D]`` (token = step·5 + layer)."""
    starts = torch.floor(frames.to(torch.float64) * STEPS_PER_SECOND / float(fps) + 1e-9).to(torch.long)
    idx = starts[:, None] + torch.arange(WINDOW_STEPS)[None, :]            # [K, 10]
    clips = padded[idx.to(padded.device)]                                  # [K, 10, 5, D]
    return clips.reshape(clips.shape[0], -1, clips.shape[-1])


def positional_encoding(n_tokens: int, width: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """Sinusoidal encoding ``[n_tokens, width]``: sin on even channels, cos on odd, base 10000 (MuseTalk's PE)."""
    pos = torch.arange(n_tokens, dtype=torch.float64)[:, None]
    div = torch.exp(torch.arange(0, width, 2, dtype=torch.float64) * (-math.log(10000.0) / width))
    pe = torch.zeros(n_tokens, width, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe.to(device=device, dtype=dtype)


def window_means(padded: torch.Tensor, n_frames: int, fps: float) -> torch.Tensor:
    """Mean of each frame's 50 audio tokens, ``[N, D]`` float64, without gathering the windows: a running sum over
    the layer-averaged steps (the posts' ``w̄_f``, input of the adaptive cadence and the viseme hash)."""
    steps = padded.to(torch.float64).mean(dim=1)                                    # [S, D]
    csum = torch.cat([steps.new_zeros(1, steps.shape[1]), steps.cumsum(dim=0)])
    starts = window_starts(n_frames, fps)
    return (csum[starts + WINDOW_STEPS] - csum[starts]) / WINDOW_STEPS
