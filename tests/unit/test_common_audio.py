"""engines.common.audio: ComfyUI's AUDIO dict checked, mixed, resampled and built back."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engines.common.audio import check_audio, make_audio, resample, to_mono
from engines.common.errors import InputError


def _sine(freq, sr, seconds=1.0, channels=2):
    t = torch.arange(int(sr * seconds)) / sr
    wave = torch.sin(2 * torch.pi * freq * t)
    return torch.stack([wave * (c + 1) / channels for c in range(channels)])[None]


@pytest.mark.parametrize("bad, needle", [
    ("not audio", "AUDIO dict"),
    ({"waveform": torch.zeros(1, 1, 10)}, "keys ['waveform']"),
    ({"waveform": torch.zeros(1, 1, 1, 10), "sample_rate": 16000}, "shape (1, 1, 1, 10)"),
    ({"waveform": torch.zeros(1, 1, 10), "sample_rate": "fast"}, "'fast'"),
    ({"waveform": torch.zeros(1, 1, 10), "sample_rate": 0}, "positive sample_rate"),
    ({"waveform": torch.zeros(1, 1, 0), "sample_rate": 16000}, "empty waveform"),
])
def test_bad_audio_is_an_input_error_naming_the_input(bad, needle):
    with pytest.raises(InputError) as info:
        check_audio(bad, "speech")
    assert str(info.value).startswith("speech: ")
    assert needle in str(info.value)


def test_check_audio_promotes_shapes_and_moves_to_float32_cpu():
    wave, sr = check_audio({"waveform": np.zeros(100, dtype=np.float64), "sample_rate": 8000.0})
    assert wave.shape == (1, 1, 100) and wave.dtype == torch.float32 and sr == 8000
    wave, _ = check_audio({"waveform": torch.zeros(2, 50, dtype=torch.float16), "sample_rate": 8000})
    assert wave.shape == (1, 2, 50) and wave.dtype == torch.float32


def test_to_mono_averages_channels_of_the_first_item():
    audio = {"waveform": torch.stack([torch.ones(2, 10), 5 * torch.ones(2, 10)]), "sample_rate": 100}
    audio["waveform"][0, 1] = 3.0
    mono, sr = to_mono(audio)
    assert sr == 100 and mono.dtype == np.float32 and mono.shape == (10,)
    assert np.allclose(mono, 2.0)


def test_to_mono_resamples_and_keeps_the_pitch():
    mono, sr = to_mono({"waveform": _sine(440, 48000), "sample_rate": 48000}, target_rate=16000)
    assert sr == 16000 and abs(len(mono) - 16000) <= 1
    spectrum = np.abs(np.fft.rfft(mono))
    assert abs(np.argmax(spectrum) * 16000 / len(mono) - 440) < 2


def test_resample_identity_and_leading_dims():
    x = torch.randn(3, 2, 480)
    assert resample(x, 48000, 48000) is x
    y = resample(x, 48000, 24000)
    assert y.shape == (3, 2, 240)


def test_make_audio_builds_a_valid_dict():
    for samples in (np.zeros(10), np.zeros((2, 10)), torch.zeros(1, 2, 10)):
        audio = make_audio(samples, 22050)
        assert audio["waveform"].dim() == 3 and audio["waveform"].dtype == torch.float32
        assert audio["sample_rate"] == 22050
        check_audio(audio)
