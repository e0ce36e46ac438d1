"""Transcription with a local Whisper folder (transformers), for reference transcripts and output checks.

The folder is the Hugging Face layout (``config.json``, ``model.safetensors``, ``generation_config.json``,
``preprocessor_config.json`` and the tokenizer files); it is loaded with ``local_files_only=True``, so nothing is
fetched. Audio longer than Whisper's 30 s window is transcribed window by window.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..common.audio import resample
from ..common.errors import InputError
from ..common.model_files import require_files

WHISPER_RATE = 16000
WINDOW_S = 30.0
REQUIRED_FILES = ("config.json", "model.safetensors", "preprocessor_config.json", "generation_config.json",
                  ("tokenizer.json", "vocab.json"))


@dataclass
class Whisper:
    model: "torch.nn.Module"
    processor: object
    folder: Path


def load_whisper(folder: os.PathLike | str, device: Optional[torch.device] = None,
                 input_name: str = "whisper_model") -> Whisper:
    folder = require_files(folder, REQUIRED_FILES, input_name)
    stamp = (folder / "model.safetensors").stat().st_mtime_ns  # replaced weights are a new cache entry
    return _load_cached(str(folder), str(torch.device(device or "cpu")), stamp)


@lru_cache(maxsize=2)
def _load_cached(folder: str, device: str, stamp: int) -> Whisper:
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    processor = WhisperProcessor.from_pretrained(folder, local_files_only=True)
    model = WhisperForConditionalGeneration.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    return Whisper(model=model.eval().to(device), processor=processor, folder=Path(folder))


def transcribe(whisper: Whisper, samples: np.ndarray, sample_rate: int, language: Optional[str] = None,
               progress=None) -> str:
    """Text of mono `samples`; `language` is a Whisper language code or name, or None to let Whisper detect it."""
    wave = torch.as_tensor(np.asarray(samples, dtype=np.float32))
    wave = resample(wave, sample_rate, WHISPER_RATE).numpy()
    step = int(WINDOW_S * WHISPER_RATE)
    pieces = []
    gen_kwargs = {"task": "transcribe"}
    if language:
        gen_kwargs["language"] = language
    device = next(whisper.model.parameters()).device
    for start in range(0, max(wave.size, 1), step):
        window = wave[start:start + step]
        features = whisper.processor(window, sampling_rate=WHISPER_RATE, return_tensors="pt").input_features
        with torch.inference_mode():
            try:
                ids = whisper.model.generate(features.to(device), **gen_kwargs)
            except ValueError as exc:  # unknown language code and the like
                raise InputError("language", "a language this Whisper model knows", repr(language), str(exc)) from exc
        pieces.append(whisper.processor.batch_decode(ids, skip_special_tokens=True)[0].strip())
        if progress is not None:
            progress.step()
    return " ".join(p for p in pieces if p)
