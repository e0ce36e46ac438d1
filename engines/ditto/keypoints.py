"""Motion rows + avatar -> source and driven 3-D keypoints (before the stitching network), vectorised over frames.

Upstream's MotionStitch, per frame: the driven motion is taken relative to the first generated frame and added to
the avatar frame's own motion (on bin logits), only for the keys the avatar kind drives (a still image: expression,
pose and translation; a loop: expression only); scale and canonical keypoints always come from the avatar. The
expression is driven on the lip keypoints and, with eye driving, the eye keypoints (or replaced there by a blink
template); pose offsets are added in degrees; with eye driving the gaze is corrected for the head turn. Then
x = scale * (kp @ R + exp), x[..., :2] += t[:2].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..common.loop_modes import DITTO_LEGACY_LOOP_MODES, DITTO_LOOP_MODES, loop_index, loop_mode_name
from . import head_lock as hl
from . import living as lv

EYE_KPS = (11, 13, 15, 16, 18)
LIP_KPS = (6, 12, 14, 17, 19, 20)
KEYS = ("scale", "pitch", "yaw", "roll", "t", "exp")
SIZES = (1, 66, 66, 66, 3, 63)


def split_motion(motion: np.ndarray) -> dict:
    out, s = {}, 0
    for k, n in zip(KEYS, SIZES):
        out[k] = motion[:, s:s + n].astype(np.float32)
        s += n
    out["scale"] = out["scale"] + 1.0
    return out


def bins_to_degrees(logits: np.ndarray) -> np.ndarray:
    """Expected angle of 66 bins of 3 degrees centred on 0: sum(softmax * i) * 3 - 97.5."""
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return (p * np.arange(logits.shape[-1], dtype=np.float32)).sum(-1) * 3.0 - 97.5


def rotation(pitch: np.ndarray, yaw: np.ndarray, roll: np.ndarray) -> np.ndarray:
    """(N, 3, 3) = (Rz(roll) Ry(yaw) Rx(pitch))^T from degrees, the row-vector form upstream multiplies by."""
    x, y, z = (np.radians(a.astype(np.float64)) for a in (pitch, yaw, roll))
    n = len(x)
    one, zero = np.ones(n), np.zeros(n)
    rx = np.stack([one, zero, zero, zero, np.cos(x), -np.sin(x), zero, np.sin(x), np.cos(x)], 1).reshape(n, 3, 3)
    ry = np.stack([np.cos(y), zero, np.sin(y), zero, one, zero, -np.sin(y), zero, np.cos(y)], 1).reshape(n, 3, 3)
    rz = np.stack([np.cos(z), -np.sin(z), zero, np.sin(z), np.cos(z), zero, zero, zero, one], 1).reshape(n, 3, 3)
    return np.transpose(rz @ ry @ rx, (0, 2, 1)).astype(np.float32)


def transform(kp: np.ndarray, pitch_deg, yaw_deg, roll_deg, t, exp, scale) -> np.ndarray:
    n = len(kp)
    x = kp.reshape(n, -1, 3) @ rotation(pitch_deg, yaw_deg, roll_deg) + exp.reshape(n, -1, 3)
    x = x * scale.reshape(n, 1, 1)
    x[:, :, :2] += t.reshape(n, 1, 3)[:, :, :2]
    return x.astype(np.float32)


def source_keypoints(info: dict) -> np.ndarray:
    """(frames, 21, 3) keypoints of every avatar frame."""
    return transform(info["kp"], bins_to_degrees(info["pitch"]), bins_to_degrees(info["yaw"]),
                     bins_to_degrees(info["roll"]), info["t"], info["exp"], info["scale"])


def blink_schedule(n: int, template_len: int, open_n: int, rng: np.random.Generator) -> np.ndarray:
    """Index into the blink template per frame (0 = eyes open). open_n: -1 none, 0 random 60-100, >0 fixed."""
    idx = np.zeros(n, np.int64)
    if open_n < 0 or template_len == 0:
        return idx
    gap = (lambda: open_n) if open_n > 0 else (lambda: int(rng.integers(60, 101)))
    start, end_gap = gap(), gap()
    cur, last = start, n - max(end_gap, template_len)
    while cur < last:
        idx[cur:cur + template_len] = np.arange(template_len)
        cur += template_len + gap()
    return idx


@dataclass(frozen=True)
class DriveSettings:
    drive_eyes: Optional[bool] = None        # None: on for a still image, off for a loop (upstream)
    delta_pitch: float = 0.0
    delta_yaw: float = 0.0
    delta_roll: float = 0.0
    blink_open_frames: int = -1              # -1 no template blinks, 0 random gaps, >0 fixed gap (frames)
    relative: bool = True
    loop_mode: str = "mirror"                # loop_modes.DITTO_LOOP_MODES: "mirror" (upstream's) or "wrap"
    seed: int = 0
    living: Optional[lv.LivingSettings] = None  # natural blinks / saccades instead of the template schedule
    head_lock: bool = False                  # no head rotation from the motion (see head_lock.py)
    fps: float = 25.0


def source_index(n_out: int, n_src: int, loop_mode: str) -> np.ndarray:
    """Avatar frame per output frame (a saved Ditto ``ping-pong`` is ``mirror``: it always held the end frames)."""
    mode = loop_mode_name(loop_mode, modes=DITTO_LOOP_MODES, legacy=DITTO_LEGACY_LOOP_MODES)
    return loop_index(np.arange(n_out), n_src, mode)


def driven_keypoints(motion: np.ndarray, info: dict, settings: DriveSettings,
                     blink_template: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Returns (source frame index per output frame, driven keypoints (frames, 21, 3) before stitching)."""
    n = len(motion)
    n_src = len(info["kp"])
    is_image = n_src == 1
    src = source_index(n, n_src, settings.loop_mode)
    d = split_motion(motion)
    s = {k: info[k][src].astype(np.float32) for k in KEYS}
    use = ("exp", "pitch", "yaw", "roll", "t") if is_image else ("exp",)
    if settings.head_lock:
        use = ("exp", "t") if is_image else ("exp",)  # the pose stays the source's
    x = {}
    for k in KEYS:
        if k in use:
            x[k] = s[k] + (d[k] - d[k][:1]) if settings.relative else d[k]
        else:
            x[k] = s[k]
    drive_eyes = is_image if settings.drive_eyes is None else settings.drive_eyes
    living = settings.living if drive_eyes else None
    living_blinks, gaze = None, None
    if living is not None and (living.blinks or living.saccades):
        # Natural blinks replace the template's fixed schedule; none lands on a closed-eye source frame.
        closed = lv.closed_source_frames(info["eye_open"])[src] if "eye_open" in info else np.zeros(n, bool)
        template = blink_template if living.blinks else None
        offsets, gaze, onsets = lv.living_offsets(n, settings.fps, template, closed, living)
        living_blinks = offsets if onsets else None
    template_blinks = (drive_eyes and living is None and blink_template is not None
                       and settings.blink_open_frames >= 0)
    use_template = template_blinks or living_blinks is not None
    a1 = np.zeros((21, 3), np.float32)
    a1[list(LIP_KPS)] = 1
    a2 = np.zeros((21, 3), np.float32)
    if drive_eyes and not use_template:
        a1[list(EYE_KPS)] = 1
    if use_template:
        a2[list(EYE_KPS)] = 1
    a1, a2 = a1.reshape(1, -1), a2.reshape(1, -1)
    delta_eye = 0.0
    if living_blinks is not None:
        delta_eye = living_blinks
    elif template_blinks:
        rng = np.random.default_rng(settings.seed)
        delta_eye = blink_template[blink_schedule(n, len(blink_template), settings.blink_open_frames, rng)]
    x["exp"] = x["exp"] * (a1 * (1 - a2)) + s["exp"] * ((1 - a1) + a1 * a2) + delta_eye * a2
    if settings.head_lock:  # no rigid turn hidden in the expression offsets of the driven keypoints
        posed = info["kp"][src].reshape(n, -1, 3) @ rotation(*(bins_to_degrees(s[k]) for k in ("pitch", "yaw", "roll")))
        posed = posed + s["exp"].reshape(n, -1, 3)
        moving = np.maximum(a1, a2).reshape(-1)
        x["exp"] = s["exp"] + hl.lock_expression(x["exp"] - s["exp"], posed, moving)
    if gaze is not None:
        x["exp"] = lv.apply_gaze(x["exp"], gaze)
    deg = {k: bins_to_degrees(x[k]) + getattr(settings, f"delta_{k}") for k in ("pitch", "yaw", "roll")}
    if drive_eyes:
        x["exp"] = fix_gaze(x["exp"], deg["yaw"] - bins_to_degrees(info["yaw"][:1]),
                            deg["pitch"] - bins_to_degrees(info["pitch"][:1]))
    kp = transform(info["kp"][src], deg["pitch"], deg["yaw"], deg["roll"], x["t"], x["exp"], x["scale"])
    return src, kp


def fix_gaze(exp: np.ndarray, d_yaw: np.ndarray, d_pitch: np.ndarray) -> np.ndarray:
    """Upstream's gaze correction: keep the eyes on camera as the head turns (exp dims 33/45 x, 34/46 y)."""
    exp = exp.copy()
    dx, dy = d_yaw * 0.26, d_pitch * 0.28
    pos = dx > 0
    exp[:, 33] += dx * np.where(pos, 0.0007, 0.001)
    exp[:, 45] += dx * np.where(pos, 0.001, 0.0007)
    exp[:, 34] += dy * -0.001
    exp[:, 46] += dy * -0.001
    return exp
