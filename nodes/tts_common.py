"""Node-layer helpers the two TTS families share: their model folders and local Whisper transcription.

`models/whisper/<name>` holds Hugging Face Whisper folders (engines/omnivoice/asr.py) and `models/omnivoice_voices`
the voice prompts saved by Broadcast Voice Prompt; both are registered with the pack's other folders by
`comfy_bridge.register_folders`.
"""
from __future__ import annotations

from pathlib import Path

import folder_paths

from ..engines.omnivoice import asr
from .comfy_bridge import (VOICES_FOLDER, WHISPER_FOLDER, model_dir, model_names, progress, register_folders,
                           torch_device)

WHISPER_NONE = "(none)"


def voices_dir() -> Path:
    register_folders()
    return Path(folder_paths.get_folder_paths(VOICES_FOLDER)[0])


def whisper_names() -> list[str]:
    register_folders()
    return model_names(WHISPER_FOLDER)


def load_whisper(name: str, input_name: str = "whisper_model"):
    register_folders()
    return asr.load_whisper(model_dir(WHISPER_FOLDER, name, input_name), torch_device(), input_name)


def transcribe_reference(whisper_name: str, samples, sample_rate: int, language: str = "") -> str:
    whisper = load_whisper(whisper_name)
    windows = max(1, int(len(samples) / sample_rate // asr.WINDOW_S) + 1)
    return asr.transcribe(whisper, samples, sample_rate, language.strip() or None, progress(windows))


register_folders()
