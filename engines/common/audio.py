"""ComfyUI's AUDIO dict (``{"waveform": Tensor[B, C, T], "sample_rate": int}``) and plain sample arrays.

One place for validating the dict, mixing to mono, resampling (torchaudio's functional resampler, never file decoding
through ``torchaudio.load``) and building the dict back. Every family that touches audio goes through here.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from .errors import InputError


def check_audio(audio: Any, input_name: str = "audio") -> tuple[torch.Tensor, int]:
    """Validate an AUDIO dict and return ``(waveform [B, C, T] float32 on CPU, sample_rate)``."""
    if not isinstance(audio, dict) or "waveform" not in audio or "sample_rate" not in audio:
        got = type(audio).__name__ if not isinstance(audio, dict) else f"a dict with keys {sorted(audio)}"
        raise InputError(input_name, "an AUDIO dict with 'waveform' [batch, channels, samples] and 'sample_rate'", got,
                         "Connect an AUDIO output (Load Audio, a TTS node).")
    wave = audio["waveform"]
    sr = audio["sample_rate"]
    if not isinstance(wave, torch.Tensor):
        wave = torch.as_tensor(np.asarray(wave))
    if wave.dim() == 1:
        wave = wave[None, None]
    elif wave.dim() == 2:
        wave = wave[None]
    if wave.dim() != 3:
        raise InputError(input_name, "a waveform of shape [batch, channels, samples]", f"shape {tuple(wave.shape)}")
    try:
        sr = int(sr)
    except (TypeError, ValueError):
        raise InputError(input_name, "an integer sample_rate", repr(sr)) from None
    if sr <= 0:
        raise InputError(input_name, "a positive sample_rate", str(sr))
    if wave.shape[-1] == 0:
        raise InputError(input_name, "at least one audio sample", "an empty waveform")
    return wave.detach().to("cpu", torch.float32), sr


def resample(wave: torch.Tensor, sr_from: int, sr_to: int) -> torch.Tensor:
    """Resample along the last axis (any leading dims). Identity when the rates agree."""
    if sr_from == sr_to:
        return wave
    import torchaudio.functional as AF

    return AF.resample(wave, int(sr_from), int(sr_to))


def to_mono(audio: Any, target_rate: Optional[int] = None, input_name: str = "audio") -> tuple[np.ndarray, int]:
    """First batch item of an AUDIO dict, channels averaged, optionally resampled: ``(float32 [T], rate)``."""
    wave, sr = check_audio(audio, input_name)
    mono = wave[0].mean(dim=0)
    if target_rate is not None and target_rate != sr:
        mono = resample(mono, sr, target_rate)
        sr = int(target_rate)
    return mono.numpy().astype(np.float32, copy=False), sr


def make_audio(samples: Any, sample_rate: int) -> dict:
    """Build an AUDIO dict from ``[T]``, ``[C, T]`` or ``[B, C, T]`` samples."""
    wave = torch.as_tensor(np.asarray(samples) if not isinstance(samples, torch.Tensor) else samples)
    wave = wave.to(torch.float32)
    while wave.dim() < 3:
        wave = wave.unsqueeze(0)
    return {"waveform": wave.contiguous(), "sample_rate": int(sample_rate)}
