"""Whisper word times for caption refinement (engines/captions/refine.py) on the tiny random Whisper: the plumbing
(alignment heads required, words in time order inside the audio, nothing downloaded). What the times mean is tested
with known word onsets in test_captions_layout.py; a random model hears no real words."""
from __future__ import annotations

import json

import numpy as np
import pytest

from engines.captions.refine import whisper_words
from engines.common.errors import InputError
from engines.omnivoice import asr
from tests.fixtures.tiny_whisper import build_tiny_whisper


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    plain = build_tiny_whisper(tmp_path_factory.mktemp("whisper") / "plain")
    aligned = build_tiny_whisper(tmp_path_factory.mktemp("whisper") / "aligned")
    config = json.loads((aligned / "generation_config.json").read_text())
    config["alignment_heads"] = [[0, 0], [0, 1]]
    (aligned / "generation_config.json").write_text(json.dumps(config))
    return plain, aligned


def test_words_come_in_time_order_inside_the_audio(folders):
    rng = np.random.default_rng(0)
    samples = rng.uniform(-0.3, 0.3, 24000 * 3).astype(np.float32)
    words = whisper_words(asr.load_whisper(folders[1]), samples, 24000, "en")
    assert words, "the tiny model always emits tokens"
    starts = [w[0] for w in words]
    assert starts == sorted(starts) and all(0 <= a <= b <= 3.0 + 1e-6 and w for a, b, w in words)


def test_a_model_without_alignment_heads_is_refused_by_name(folders):
    with pytest.raises(InputError, match="whisper_model.*alignment_heads"):
        whisper_words(asr.load_whisper(folders[0]), np.zeros(24000, np.float32), 24000)
