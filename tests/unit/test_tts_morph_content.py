"""What Voice Morph's prompt holds: voice B's recording, time-stretched onto A's frames and mixed in frame by frame
(so both utterances' content, overlaid), not a voice between A and B with A's content.

The oracle is the mix written out here (B's latent frames resampled with numpy's own linear interpolation) and a
counterfactual: B's frames in reverse order have the same voice statistics (every frame, same mean and spread) but
another content order; a morph of voices would not care, the pack's morph follows B's order frame by frame.
"""
from __future__ import annotations

import numpy as np
import torch

from engines.omnivoice import morph
from tests.unit.test_tts_voices import loaded, voices  # noqa: F401  (module fixtures: the tiny model, two voices)


def _latent(loaded, voice) -> np.ndarray:                     # noqa: F811
    quantizer = loaded.model.audio_tokenizer.quantizer
    with torch.inference_mode():
        return quantizer.decode(voice.tokens[:, None, :]).float()[0].numpy()       # [channels, frames]


def _stretch(latent: np.ndarray, length: int) -> np.ndarray:
    x = np.linspace(0.0, latent.shape[1] - 1.0, length)
    return np.stack([np.interp(x, np.arange(latent.shape[1]), row) for row in latent])


def _frame_corr(x: np.ndarray, y: np.ndarray) -> float:
    """Mean over frames of the correlation across channels."""
    x = x - x.mean(0, keepdims=True)
    y = y - y.mean(0, keepdims=True)
    return float(np.mean((x * y).sum(0) / (np.linalg.norm(x, axis=0) * np.linalg.norm(y, axis=0) + 1e-12)))


def test_a_morph_mixes_bs_recording_into_as_frames(loaded, voices):  # noqa: F811
    a, b = voices
    w = 0.5
    blend = morph.blend_prompts(loaded, a, b, w)
    la, lb, lm = _latent(loaded, a), _latent(loaded, b), _latent(loaded, blend)
    n = la.shape[1]
    assert lm.shape[1] == n                                    # A's frames, A's transcript
    residual = lm - w * la                                     # what B put into each frame
    in_order = _frame_corr(residual, (1 - w) * _stretch(lb, n))
    reversed_ = _frame_corr(residual, (1 - w) * _stretch(lb[:, ::-1], n))
    # B's recording, frame by frame: 0.78 here (the rest is the tiny quantiser's rounding), reversed 0.07
    assert in_order > 0.6, (in_order, reversed_)
    assert in_order - reversed_ > 0.3, (in_order, reversed_)   # its content order, not its voice statistics
