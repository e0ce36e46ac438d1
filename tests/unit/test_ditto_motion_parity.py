"""The motion loop (condition, windows, padding, overlap fusion, smoothing, next-window start) against upstream's
offline loop (antgroup/ditto-talkinghead e9191cf: ConditionHandler + Audio2Motion + the driver in
stream_pipeline_offline.py), recorded with the same deterministic window model (tests/data/ditto_upstream_motion.json).

With one DDIM step the sampler returns the model's x0 directly, so a window model that ignores the noise makes both
loops deterministic; the real denoiser is checked separately (test_ditto_parity.py).
"""
import json
from pathlib import Path

import numpy as np
import torch

from engines.ditto import motion as ditto_motion

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "ditto_upstream_motion.json").read_text())
SEQ, OVERLAP, N_FRAMES = 12, 3, 31


def window_model_np(kp_cond: np.ndarray, cond: np.ndarray) -> np.ndarray:
    """(1, 265), (1, L, 1103) -> (1, L, 265): depends on both, and on the position in the window."""
    j = np.arange(265)
    pos = np.arange(cond.shape[1])[:, None]
    return np.tanh(0.5 * cond[:, :, j % 1103] + 0.3 * kp_cond[:, None, :] + 0.01 * pos)[:, :, :].astype(np.float32)


class WindowModel(torch.nn.Module):
    """The same function behind the denoiser's interface (``guided`` returns x0)."""

    def __init__(self):
        super().__init__()
        self.seq_len = SEQ
        self.cond_projection = torch.nn.Linear(1103, 1)

    def guided(self, x, cond_frame, cond, times, guidance_weight=2.0):
        return torch.from_numpy(window_model_np(cond_frame.numpy(), cond.numpy()))


def avatar_info(seed: int = 3, frames: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    info = {k: rng.standard_normal((frames, n)).astype(np.float32) for k, n in
            (("pitch", 66), ("yaw", 66), ("roll", 66), ("t", 3), ("exp", 63), ("kp", 63), ("scale", 1),
             ("eye_open", 2), ("eye_ball", 6))}
    return info


def features(seed: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((N_FRAMES, 1024)).astype(np.float32)


def test_motion_loop_matches_upstream():
    got = ditto_motion.generate(WindowModel(), features(), avatar_info(),
                                ditto_motion.MotionSettings(steps=1, seed=0, emotion=ditto_motion.NEUTRAL,
                                                            overlap=OVERLAP, smooth_k=3))
    ref = np.array(REFERENCE["res_kp_seq"], np.float32)
    assert got.shape == ref.shape == (N_FRAMES, 265)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_condition_matches_upstream_handler():
    cond = ditto_motion.build_condition(features(), avatar_info(), ditto_motion.NEUTRAL, eye_f0_mode=False)
    np.testing.assert_array_equal(cond[:, :1024], features())
    np.testing.assert_allclose(cond[:, 1024:], np.array(REFERENCE["cond_tail"], np.float32), rtol=1e-6, atol=1e-6)
