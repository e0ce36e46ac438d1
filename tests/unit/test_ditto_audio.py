"""HuBERT windowing (upstream's offline loop, vectorised), lengths that are not a multiple of a frame, bad audio."""
import numpy as np
import pytest
import torch

from engines.common.audio import to_mono
from engines.common.errors import InputError
from engines.ditto import audio_features as ditto_audio


def upstream_windows(audio):
    """Upstream's loop, written out: pad 2000 before / 6480 after, a 6480 window every 5 frames."""
    n = int(np.ceil(len(audio) / 16000 * 25))
    pad = np.concatenate([np.zeros(2000, np.float32), audio, np.zeros(6480, np.float32)])
    out, i = [], 0
    while i < n:
        s = int(i * 0.04 * 16000)
        out.append(pad[s:s + 6480])
        i += 5
    return n, np.stack(out)


@pytest.mark.parametrize("length", [640, 641, 6399, 16000, 16001, 23999, 3 * 6480 + 17])
def test_windows_match_upstream_loop(length):
    audio = np.random.default_rng(length).standard_normal(length).astype(np.float32)
    n, want = upstream_windows(audio)
    got = ditto_audio.windows(audio)
    assert ditto_audio.frame_count(length) == n
    np.testing.assert_array_equal(got, want)


def test_features_take_rows_minus14_to_minus4_in_pairs():
    n_windows = 3
    outs = np.zeros((n_windows, 20, 1024), np.float32)
    for w in range(n_windows):
        for r in range(20):
            outs[w, r] = w * 100 + r
    feats = ditto_audio.features_from_outputs(outs, 12)
    assert feats.shape == (12, 1024)
    # window 0 rows 6..15 -> pairs (6,7), (8,9), ... -> 6.5, 8.5, 10.5, 12.5, 14.5
    np.testing.assert_allclose(feats[:5, 0], [6.5, 8.5, 10.5, 12.5, 14.5])
    np.testing.assert_allclose(feats[5:10, 0], [106.5, 108.5, 110.5, 112.5, 114.5])
    np.testing.assert_allclose(feats[10:, 0], [206.5, 208.5])


def test_runner_on_the_tiny_onnx_counts_frames(tmp_path):
    """The upstream-shaped ONNX (input (1, 6480), output (20, 1024) without a batch axis) runs window by window."""
    from engines.common.onnx import onnx_session
    from tests.fixtures.tiny_ditto import build_tiny_ditto

    folder = build_tiny_ditto(tmp_path / "tiny")
    runner = ditto_audio.HubertRunner(onnx_session(folder / "ditto_pytorch/aux_models/hubert_streaming_fix_kv.onnx"))
    assert runner.input_name == "input_values" and not runner.batched
    audio = np.random.default_rng(0).standard_normal(16000 + 123).astype(np.float32)
    feats = ditto_audio.audio_features(runner, audio)
    assert feats.shape == (ditto_audio.frame_count(len(audio)), 1024) == (26, 1024)
    # each window's features depend on that window only: the first 5 frames equal a run on the first window alone
    first = runner(ditto_audio.windows(audio)[:1])
    np.testing.assert_allclose(feats[:5], ditto_audio.features_from_outputs(first, 5), rtol=1e-6)


def test_audio_shorter_than_one_frame_is_refused():
    with pytest.raises(InputError, match="audio: expected at least one video frame"):
        ditto_audio.check_length(np.zeros(639, np.float32))


def test_other_sample_rates_are_resampled_not_refused():
    wave = torch.randn(1, 2, 24000)
    mono, sr = to_mono({"waveform": wave, "sample_rate": 24000}, 16000)
    assert sr == 16000 and len(mono) == 16000
    assert ditto_audio.frame_count(len(mono)) == 25


def test_frame_rms():
    audio = np.concatenate([np.zeros(640), np.full(640, 0.5), np.full(100, 0.5)]).astype(np.float32)
    rms = ditto_audio.frame_rms(audio, 3)
    np.testing.assert_allclose(rms, [0.0, 0.5, 0.5 * np.sqrt(100 / 640)], rtol=1e-6)
