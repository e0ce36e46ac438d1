"""Node-layer helpers the two TTS families share: their model folders and local Whisper transcription.

`models/whisper/<name>` holds Hugging Face Whisper folders (engines/omnivoice/asr.py) and `models/omnivoice_voices`
the voice prompts saved by Broadcast Voice Prompt. Both are registered with ComfyUI here, idempotently.
"""
from __future__ import annotations

import os
from pathlib import Path

import folder_paths

from ..engines.omnivoice import asr
from .comfy_bridge import model_dir, model_names, progress, torch_device

WHISPER_FOLDER = "whisper"
VOICES_FOLDER = "omnivoice_voices"
WHISPER_NONE = "(none)"


def register_tts_folders() -> None:
    for name in (WHISPER_FOLDER, VOICES_FOLDER):
        if name not in folder_paths.folder_names_and_paths:
            folder_paths.add_model_folder_path(name, os.path.join(folder_paths.models_dir, name), is_default=True)


def voices_dir() -> Path:
    register_tts_folders()
    return Path(folder_paths.get_folder_paths(VOICES_FOLDER)[0])


def whisper_names() -> list[str]:
    register_tts_folders()
    return model_names(WHISPER_FOLDER)


def load_whisper(name: str, input_name: str = "whisper_model"):
    register_tts_folders()
    return asr.load_whisper(model_dir(WHISPER_FOLDER, name, input_name), torch_device(), input_name)


def transcribe_reference(whisper_name: str, samples, sample_rate: int, language: str = "") -> str:
    whisper = load_whisper(whisper_name)
    windows = max(1, int(len(samples) / sample_rate // asr.WINDOW_S) + 1)
    return asr.transcribe(whisper, samples, sample_rate, language.strip() or None, progress(windows))


register_tts_folders()
