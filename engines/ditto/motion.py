"""Audio features + avatar -> a 265-d motion sequence (one row per 25 fps frame), upstream's offline procedure.

Motion layout: [scale - 1 | pitch 66 | yaw 66 | roll 66 (bin logits) | t 3 | exp 63].
Condition per frame (1103): [HuBERT 1024 | emotion 8 | eye openness 2 | eye ball 6 | source keypoints 63].
Windows of `seq_frames` (80) start every `seq_frames - overlap` frames; the last is padded with its final row. Each
new window is blended into the previous result over `overlap` rows with weights k/overlap, then the blended region
is mean-smoothed (kernel `smo_k_d` on dims [0:202], i.e. not the expression) and, at the end, the whole sequence.
The next window starts from the row just before the overlap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..common.errors import InputError
from ..common.loop_modes import loop_index
from ..common.progress import Progress, ensure
from . import diffusion
from .emotion import EMOTIONS, emotion_weights, label_logits, softmax
NEUTRAL = EMOTIONS.index("neutral")
MOTION_DIM = 265
POSE_DIMS = slice(1, 202)          # pitch, yaw, roll bins and translation: what Savitzky-Golay may touch
SMOOTH_DIMS = 202                  # upstream smooths [0:202]: scale, pose, translation


def emotion_vector(label: int) -> np.ndarray:
    """Upstream's soft one-hot: softmax of 8 at the label, 0 elsewhere (0.9977 on the label)."""
    return softmax(label_logits(label)).astype(np.float32)


def mirror_index(i: np.ndarray, n: int) -> np.ndarray:
    """Mirror over n frames (0..n-1, n-1..0, ...), upstream's way of looping a source video."""
    return loop_index(i, n, "mirror")


def source_motion(info: dict, frame: int = 0) -> np.ndarray:
    """The avatar frame's motion row in the 265-d layout."""
    return np.concatenate([info["scale"][frame] - 1.0, info["pitch"][frame], info["yaw"][frame],
                           info["roll"][frame], info["t"][frame], info["exp"][frame]]).astype(np.float32)


def build_condition(features: np.ndarray, info: dict, emotion: int, eye_f0_mode: bool,
                    emotions: Optional[np.ndarray] = None) -> np.ndarray:
    """Per-frame condition; `emotions` (n, 8) replaces the fixed label's soft one-hot (audio steering)."""
    n = len(features)
    m = len(info["eye_open"])
    idx = np.zeros(n, np.int64) if (eye_f0_mode or m == 1) else mirror_index(np.arange(n), m)
    emo = np.broadcast_to(emotion_vector(emotion), (n, 8)) if emotions is None else emotions
    sc = np.broadcast_to(info["kp"][0].reshape(1, -1), (n, info["kp"].shape[1]))
    return np.concatenate([features, emo, info["eye_open"][idx], info["eye_ball"][idx], sc], axis=1
                          ).astype(np.float32)


def mean_smooth(seq: np.ndarray, start: int, end: int, k: int) -> np.ndarray:
    """Upstream `_smo`: rows [start, end) of dims [0:202] replaced by a centred mean over k rows (in place)."""
    if k <= 1:
        return seq
    src = seq[:, :SMOOTH_DIMS].copy()
    n, half = len(seq), k // 2
    csum = np.concatenate([np.zeros((1, SMOOTH_DIMS)), np.cumsum(src, axis=0, dtype=np.float64)])
    rows = np.arange(max(start, 0), min(end, n))
    lo, hi = np.maximum(rows - half, 0), np.minimum(rows + half + 1, n)
    seq[rows, :SMOOTH_DIMS] = ((csum[hi] - csum[lo]) / (hi - lo)[:, None]).astype(seq.dtype)
    return seq


def fuse(result: np.ndarray, window: np.ndarray, overlap: int, valid: int) -> np.ndarray:
    """Blend the new window's first `overlap` rows into the result's last ones, append the rest."""
    alpha = (np.arange(overlap, dtype=np.float32) / overlap)[:, None]
    s = len(window) - valid - overlap
    result[-overlap:] = result[-overlap:] * (1 - alpha) + window[s:s + overlap] * alpha
    return np.concatenate([result, window[s + overlap:]], axis=0)


def savgol_pose(seq: np.ndarray, window: int, order: int = 2) -> np.ndarray:
    """Savitzky-Golay along time on pose and translation only (dims 1..201); expression and scale untouched."""
    if window < 3 or len(seq) < 3:
        return seq
    from scipy.signal import savgol_filter

    w = min(window | 1, len(seq) if len(seq) % 2 else len(seq) - 1)
    if w <= order:
        return seq
    out = seq.copy()
    out[:, POSE_DIMS] = savgol_filter(seq[:, POSE_DIMS], w, order, axis=0, mode="interp")
    return out


@dataclass(frozen=True)
class MotionSettings:
    steps: int = 50
    seed: int = 0
    emotion: int = NEUTRAL
    overlap: int = 10
    smooth_k: int = 3
    fix_kp_cond: int = 0
    fix_kp_cond_dims: Optional[tuple] = None
    eye_f0_mode: bool = False
    savgol_window: int = 0
    guidance: float = 2.0
    emotion_steering: float = 0.0   # > 0: the emotion follows the speech's energy and pitch (emotion.py)

    @classmethod
    def from_config(cls, defaults: dict, *, steps: int, seed: int, emotion: str,
                    pose_smoothing: int = 0, emotion_steering: float = 0.0) -> "MotionSettings":
        """The user's choices plus what the release's config fixes: the window overlap (`overlap_v2`), upstream's
        mean smoothing (`smo_k_d`) and the keypoint-condition fixing (`fix_kp_cond`, `fix_kp_cond_dim`)."""
        if emotion not in EMOTIONS:
            raise InputError("emotion", f"one of {', '.join(EMOTIONS)}", repr(emotion))
        dims = defaults.get("fix_kp_cond_dim")
        return cls(steps=int(steps), seed=int(seed), emotion=EMOTIONS.index(emotion),
                   overlap=int(defaults["overlap_v2"]), smooth_k=int(defaults["smo_k_d"]),
                   fix_kp_cond=int(defaults.get("fix_kp_cond") or 0), fix_kp_cond_dims=tuple(dims) if dims else None,
                   savgol_window=int(pose_smoothing), emotion_steering=float(emotion_steering))


def generate(lmdm, features: np.ndarray, info: dict, settings: MotionSettings,
             v_min_max: Optional[np.ndarray] = None, device: Optional[torch.device] = None,
             dtype: Optional[torch.dtype] = None, progress: Optional[Progress] = None,
             audio16k: Optional[np.ndarray] = None, runner=None) -> np.ndarray:
    """Run LMDM over the whole clip; returns (frames, 265) float32. `audio16k` is needed for emotion steering.

    `device` / `dtype`: None = the weights'. The network runs in `dtype`; the DDIM arithmetic stays in fp32 (each
    step's sample is cast for the network, its prediction cast back). `runner`: an accelerated guided LMDM
    (``engines/ditto/accel.py``, guidance baked in) used instead of the eager module.
    """
    progress = ensure(progress)
    weight = next(lmdm.parameters())
    device = torch.device(device) if device is not None else weight.device
    dtype = dtype or weight.dtype
    seq_frames = lmdm.seq_len
    if not 0 < settings.overlap < seq_frames:
        raise InputError("overlap", f"an overlap between 1 and {seq_frames - 1} frames", str(settings.overlap))
    if not 0 <= settings.emotion < len(EMOTIONS):
        raise InputError("emotion", f"one of {', '.join(EMOTIONS)}", str(settings.emotion))
    n = len(features)
    valid = seq_frames - settings.overlap
    emotions = None
    if settings.emotion_steering > 0:
        if audio16k is None:
            raise InputError("emotion_steering", "the speech the features came from (to steer the emotion)",
                             "no audio", "Use Broadcast Ditto Audio Features, or set emotion_steering to 0.")
        emotions = emotion_weights(n, settings.emotion, audio16k, settings.emotion_steering)
    cond_all = build_condition(features, info, settings.emotion, settings.eye_f0_mode, emotions)
    if cond_all.shape[1] != lmdm.cond_projection.in_features:
        raise InputError("ditto_model", f"a motion model taking a {cond_all.shape[1]}-d condition",
                         f"one taking {lmdm.cond_projection.in_features}")
    gen = torch.Generator().manual_seed(int(settings.seed))
    plan = diffusion.make_plan(settings.steps, (1, seq_frames, MOTION_DIM), gen)
    source_cond = source_motion(info)[None]
    kp_cond = source_cond.copy()
    starts = list(range(0, n, valid))
    progress.reset(len(starts) * len(plan.pairs))
    result = None

    def predict(cond_frame, cond):
        def f(x, times):
            progress.step()
            if runner is not None:
                return runner(x, cond_frame, cond, times).float()
            return lmdm.guided(x.to(dtype), cond_frame, cond, times, settings.guidance).float()
        return f

    with torch.inference_mode():
        for w, start in enumerate(starts):
            chunk = cond_all[start:start + seq_frames]
            if len(chunk) < seq_frames:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], seq_frames - len(chunk), 0)])
            cond = torch.from_numpy(chunk)[None].to(device, dtype)
            cond_frame = torch.from_numpy(kp_cond).to(device, dtype)
            x_T = torch.randn((1, seq_frames, MOTION_DIM), generator=gen).to(device)
            window = diffusion.sample(predict(cond_frame, cond), plan, x_T)[0].float().cpu().numpy()
            if result is None:
                result = mean_smooth(window, 0, len(window), settings.smooth_k)
            else:
                result = fuse(result, window, settings.overlap, valid)
                result = mean_smooth(result, len(result) - valid - settings.overlap, len(result) - valid + 1,
                                     settings.smooth_k)
            row = result[len(result) - settings.overlap - 1][None]
            if settings.fix_kp_cond > 0 and (w + 1) % settings.fix_kp_cond == 0:
                kp_cond = source_cond.copy()
                if settings.fix_kp_cond_dims is not None:
                    ds, de = settings.fix_kp_cond_dims
                    kp_cond[:, ds:de] = row[:, ds:de]
            else:
                kp_cond = row.copy()
    result = mean_smooth(result[:n].copy(), 0, n, settings.smooth_k)
    if v_min_max is not None:
        result = np.clip(result, v_min_max[0][None], v_min_max[1][None])
    return savgol_pose(result, settings.savgol_window).astype(np.float32)
