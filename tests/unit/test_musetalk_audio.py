"""Audio features: per-frame windows against a reference loop, 30 s segments, bad audio."""
import math

import numpy as np
import pytest
import torch

from engines.common.errors import InputError
from engines.musetalk.audio_features import (LEFT_PAD_STEPS, WINDOW_STEPS, encode_audio, frame_count, pad_features,
                                             positional_encoding, prepare_audio, window_features)


def _reference_windows(features, n_frames, fps):
    """The upstream-style loop: pad once, then one slice per frame (time-major flatten)."""
    mult = 50 / fps
    right = WINDOW_STEPS * 3
    padded = torch.cat([torch.zeros(LEFT_PAD_STEPS, *features.shape[1:]), features,
                        torch.zeros(right + int(n_frames * mult), *features.shape[1:])])
    out = []
    for i in range(n_frames):
        start = math.floor(i * mult)
        clip = padded[start:start + WINDOW_STEPS]
        assert clip.shape[0] == WINDOW_STEPS
        out.append(clip.reshape(-1, clip.shape[-1]))
    return torch.stack(out)


@pytest.mark.parametrize("seconds,fps", [(1.0, 25), (2.37, 25), (1.5, 30), (0.9, 24), (3.0, 12.5)])
def test_vectorised_windows_equal_the_reference_loop(seconds, fps):
    steps = int(seconds * 50)
    features = torch.randn(steps, 5, 384)
    n = frame_count(int(seconds * 16000), 16000, fps)
    padded = pad_features(features, n, fps)
    fast = window_features(padded, torch.arange(n), fps)
    assert fast.shape == (n, 50, 384)
    assert torch.equal(fast, _reference_windows(features, n, fps))


def test_window_of_frame_i_spans_minus_80_to_plus_120_ms_at_25_fps():
    features = torch.arange(100, dtype=torch.float32)[:, None, None].expand(100, 5, 2).clone()
    padded = pad_features(features, 50, 25)
    win = window_features(padded, torch.tensor([10]), 25)[0]     # tokens are step-major: step = token // 5
    steps = win[::5, 0]
    assert steps.tolist() == list(range(16, 26))                 # 2*10 - 4 .. 2*10 + 5
    first = window_features(padded, torch.tensor([0]), 25)[0][::5, 0]
    assert first.tolist() == [0, 0, 0, 0, 0, 1, 2, 3, 4, 5]      # 4 zero steps of left padding


def test_frame_count_is_floor_of_duration_times_fps():
    assert frame_count(16000, 16000, 25) == 25
    assert frame_count(15999, 16000, 25) == 24
    assert frame_count(44100 * 3 + 100, 44100, 29.97) == math.floor((3 + 100 / 44100) * 29.97)


def test_audio_shorter_than_one_frame_is_refused():
    short = {"waveform": torch.zeros(1, 1, 500), "sample_rate": 16000}   # 31 ms < 40 ms
    with pytest.raises(InputError, match="audio.*at least one video frame"):
        prepare_audio(short, 25)


def test_any_sample_rate_and_channel_count_is_resampled_to_16k_mono():
    t = np.arange(48000) / 48000
    stereo = np.stack([np.sin(2 * np.pi * 220 * t), np.sin(2 * np.pi * 220 * t)]).astype(np.float32)
    samples, n = prepare_audio({"waveform": torch.from_numpy(stereo)[None], "sample_rate": 48000}, 25)
    assert samples.shape == (16000,) and n == 25
    t16 = np.arange(16000) / 16000
    assert np.abs(samples[200:-200] - np.sin(2 * np.pi * 220 * t16)[200:-200]).max() < 1e-2


def test_positional_encoding_sin_even_cos_odd():
    pe = positional_encoding(50, 384)
    assert pe.shape == (50, 384)
    assert torch.allclose(pe[0, 0::2], torch.zeros(192)) and torch.allclose(pe[0, 1::2], torch.ones(192))
    assert math.isclose(float(pe[3, 2]), math.sin(3 / 10000 ** (2 / 384)), rel_tol=1e-6)


class _FakeEncoder(torch.nn.Module):
    """Stands in for Whisper's encoder with its real contract: exactly 3000 mel frames in, 1500 steps out."""

    def forward(self, mel, output_hidden_states=True):
        assert mel.shape[1:] == (80, 3000), mel.shape
        pooled = mel.reshape(mel.shape[0], 80, 1500, 2).mean(-1).transpose(1, 2)      # [b, 1500, 80]
        h = torch.nn.functional.pad(pooled, (0, 304))                                # [b, 1500, 384]

        class Out:
            hidden_states = tuple(h + k for k in range(5))
        return Out()


def test_long_audio_is_encoded_in_30_second_segments_without_truncation():
    from transformers import WhisperFeatureExtractor

    extractor = WhisperFeatureExtractor(feature_size=80, sampling_rate=16000, hop_length=160, chunk_length=30,
                                        n_fft=400)
    rng = np.random.default_rng(0)
    samples = (0.1 * rng.standard_normal(16000 * 65 + 1234)).astype(np.float32)    # 65.08 s: 3 segments
    feats = encode_audio(_FakeEncoder(), extractor, samples, torch.device("cpu"), torch.float32)
    assert feats.shape == (math.floor(len(samples) * 50 / 16000), 5, 384)
    second = encode_audio(_FakeEncoder(), extractor, samples[16000 * 30:16000 * 60], torch.device("cpu"),
                          torch.float32)
    assert torch.allclose(feats[1500:3000], second, atol=1e-5)   # segment 2 lands at 30 s, intact
    assert feats[-1].abs().sum() > 0                             # the tail past 60 s is there, not cut off
