"""Local Whisper transcription (engines/omnivoice/asr.py) on a tiny random Whisper, offline."""
from __future__ import annotations

import shutil

import pytest

from engines.common.errors import InputError, ModelFilesMissing
from engines.omnivoice import asr
from tests.fixtures.tiny_omnivoice import reference_voice
from tests.fixtures.tiny_whisper import MAX_TOKENS, install_tiny_whisper


@pytest.fixture(scope="module")
def whisper(tmp_path_factory):
    return asr.load_whisper(install_tiny_whisper(tmp_path_factory.mktemp("models")))


def test_transcribes_in_30_s_windows(whisper):
    short = asr.transcribe(whisper, reference_voice(2.0), 24000, "en")
    assert isinstance(short, str) and short
    long = asr.transcribe(whisper, reference_voice(35.0), 24000)  # 30 s + 5 s: two windows, joined by a space
    assert len(long.split(" ")) == 2


def test_unknown_language_names_the_input(whisper):
    with pytest.raises(InputError, match="language: expected a language this Whisper model knows"):
        asr.transcribe(whisper, reference_voice(2.0), 24000, "fr")


def test_missing_files_are_named(tmp_path):
    folder = install_tiny_whisper(tmp_path)
    (folder / "generation_config.json").unlink()
    with pytest.raises(ModelFilesMissing, match="generation_config.json"):
        asr.load_whisper(folder)
    shutil.rmtree(folder)
    with pytest.raises(ModelFilesMissing, match="does not exist"):
        asr.load_whisper(folder)


def test_the_tiny_whisper_decodes_text_to_its_token_limit(whisper):
    text = asr.transcribe(whisper, reference_voice(2.0), 24000, "es")
    assert 0 < len(text) <= MAX_TOKENS * 2
