"""Avatar registration: a portrait or a loop of frames -> everything rendering needs, saved as a packet.

Per frame: face landmarks (detector -> 106 -> 203 points; a loop tracks from the previous frame's 203 points as
upstream does, the detector confirming a face), the 512 crop and its affine, the crop at 256 (INTER_AREA) through
the motion extractor (pose bins, translation, expression, scale, canonical keypoints) and the appearance extractor
(feature volume f_s), and the eye measures. Frames without a face get their crop affine, motion and eye measures
interpolated from the nearest frames that have one (f_s is computed from that crop); no face anywhere is an error.
A loop's motion is mean-smoothed over `smooth_k` frames (upstream 13).

The packet (engines/common/cache.py, namespace ``ditto_avatar``) holds the frames as uint8, f_s, the motion arrays,
eye measures and both crop affines (3x3): the putback is computed from the affine, no sampling grids are stored.
It is keyed by a hash of the frames, the settings and the model files, and read back memory-mapped.

Cold boots: when the node knows what produced the frames (a loop file picked in Load Video, see
engines/common/source_cache.py), `prepare` is given a `source_key` too: a small link under it names the packet, so
a later run finds the packet from the file's identity and the settings without decoding or hashing the loop.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import cv2
import numpy as np
import torch

from ..common import source_cache
from ..common.cache import ContentCache, content_hash
from ..common.errors import InputError
from ..common.frames import frames_to_uint8  # noqa: F401  (the packet's frames; re-exported)
from ..common.progress import Progress, ensure
from . import crop as cropper
from .eyes import eye_measures

NAMESPACE = "ditto_avatar"
FORMAT_VERSION = 1
CROP = 512
MOTION_KEYS = ("pitch", "yaw", "roll", "t", "exp", "scale", "kp")
INFO_KEYS = MOTION_KEYS + ("eye_open", "eye_ball")


@dataclass(frozen=True)
class AvatarSettings:
    crop_scale: float = 2.3
    crop_vy_ratio: float = -0.125
    smooth_k: int = 13
    batch_size: int = 4


@dataclass
class Avatar:
    """A registered avatar (tensors usually memory-mapped from its packet)."""

    key: str
    frames: torch.Tensor                 # (N, H, W, 3) uint8
    f_s: torch.Tensor                    # (N, C, D, h, w)
    info: dict                           # motion arrays (N, ...) float32 + eye_open (N, 2), eye_ball (N, 6)
    m_c2o: np.ndarray                    # (N, 3, 3) crop -> frame
    m_o2c: np.ndarray                    # (N, 3, 3) frame -> crop
    has_face: np.ndarray                 # (N,) bool
    meta: dict = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])

    @property
    def size(self) -> tuple[int, int]:
        return int(self.frames.shape[2]), int(self.frames.shape[1])


def _interp_missing(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Linear interpolation along axis 0 across frames where `present` is False (ends: nearest)."""
    idx = np.flatnonzero(present)
    if len(idx) == len(present):
        return values
    flat = values.reshape(len(values), -1)
    out = flat.copy()
    t = np.arange(len(values))
    for j in range(flat.shape[1]):
        out[:, j] = np.interp(t, idx, flat[idx, j])
    return out.reshape(values.shape)


def _mean_filter(arr: np.ndarray, k: int) -> np.ndarray:
    if k <= 1 or len(arr) < 2:
        return arr
    n, half = len(arr), k // 2
    csum = np.concatenate([np.zeros((1,) + arr.shape[1:]), np.cumsum(arr, axis=0, dtype=np.float64)])
    lo = np.maximum(np.arange(n) - half, 0)
    hi = np.minimum(np.arange(n) + half + 1, n)
    return ((csum[hi] - csum[lo]) / (hi - lo).reshape((-1,) + (1,) * (arr.ndim - 1))).astype(arr.dtype)


def register(frames: torch.Tensor, landmarker, appearance, motion_extractor, settings: AvatarSettings,
             device: torch.device, dtype: torch.dtype, progress: Optional[Progress] = None,
             input_name: str = "images") -> dict:
    """Compute the packet's tensors for uint8 frames (N, H, W, 3). Raises InputError when no frame has a face."""
    progress = ensure(progress)
    n = frames.shape[0]
    progress.reset(2 * n)
    m_o2c = np.zeros((n, 3, 3), np.float64)
    lmks: list = [None] * n
    last = None
    for i in range(n):
        rgb = frames[i].numpy()
        lmk = landmarker(rgb, last)
        if lmk is not None:
            lmks[i] = lmk
            m_o2c[i] = cropper.crop_transform(lmk, CROP, settings.crop_scale, settings.crop_vy_ratio)
        last = lmk
        progress.step()
    present = np.array([l is not None for l in lmks])
    if not present.any():
        raise InputError(input_name, "frames showing a face (the detector found none in any of the "
                         f"{n} frame{'s' if n != 1 else ''})", "no face anywhere",
                         "Use a portrait where the face is clearly visible, roughly frontal and not tiny.")
    m_o2c = _interp_missing(m_o2c, present)
    eye_open = np.zeros((n, 2), np.float32)
    eye_ball = np.zeros((n, 6), np.float32)
    motion = {k: [] for k in MOTION_KEYS}
    f_s = None
    for s in range(0, n, settings.batch_size):
        batch = []
        for i in range(s, min(n, s + settings.batch_size)):
            crop_img = cropper.warp(frames[i].numpy(), m_o2c[i], CROP)
            if present[i]:
                eye_open[i], eye_ball[i] = eye_measures(crop_img, cropper.apply(lmks[i], m_o2c[i]))
            batch.append(cv2.resize(crop_img, (256, 256), interpolation=cv2.INTER_AREA))
        x = torch.from_numpy(np.stack(batch)).permute(0, 3, 1, 2).to(device=device, dtype=dtype) / 255.0
        with torch.inference_mode():
            outs = motion_extractor(x)
            feats = appearance(x).to(torch.float16).cpu()
        for k, v in zip(MOTION_KEYS, outs):
            motion[k].append(v.float().cpu().numpy())
        if f_s is None:
            f_s = torch.empty((n,) + feats.shape[1:], dtype=torch.float16)
        f_s[s:s + len(batch)] = feats
        progress.step(len(batch))
    info = {k: np.concatenate(v).astype(np.float32) for k, v in motion.items()}
    info["eye_open"], info["eye_ball"] = eye_open, eye_ball
    info = {k: _interp_missing(v, present) for k, v in info.items()}
    if n > 1:
        info.update({k: _mean_filter(info[k], settings.smooth_k) for k in MOTION_KEYS})
    m_c2o = np.linalg.inv(m_o2c)
    tensors = {f"info.{k}": torch.from_numpy(np.ascontiguousarray(v)) for k, v in info.items()}
    tensors.update({"frames": frames.contiguous(), "f_s": f_s, "m_o2c": torch.from_numpy(m_o2c),
                    "m_c2o": torch.from_numpy(m_c2o), "has_face": torch.from_numpy(present)})
    return tensors


def packet_key(frames: torch.Tensor, settings: AvatarSettings, model_fingerprint: str) -> str:
    return content_hash("ditto-avatar", FORMAT_VERSION, frames,
                        {"crop_scale": settings.crop_scale, "crop_vy_ratio": settings.crop_vy_ratio,
                         "smooth_k": settings.smooth_k}, model_fingerprint)


def from_tensors(key: str, tensors: dict, meta: dict) -> Avatar:
    info = {k[5:]: tensors[k].numpy() for k in tensors if k.startswith("info.")}
    return Avatar(key=key, frames=tensors["frames"], f_s=tensors["f_s"], info=info,
                  m_c2o=tensors["m_c2o"].numpy(), m_o2c=tensors["m_o2c"].numpy(),
                  has_face=tensors["has_face"].numpy(), meta=dict(meta))


def source_key(signature, settings: AvatarSettings, model_fingerprint: str) -> Optional[str]:
    """The link key of a packet made from what `signature` describes (the graph feeding the node's images;
    `engines.common.prompt_graph.source_signature`), or None when the source is not known."""
    if signature is None:
        return None
    return source_cache.link_key("ditto-avatar", signature, FORMAT_VERSION,
                                 {"crop_scale": settings.crop_scale, "crop_vy_ratio": settings.crop_vy_ratio,
                                  "smooth_k": settings.smooth_k}, model_fingerprint)


def load_from_source(cache: Optional[ContentCache], key: Optional[str]) -> Optional[Avatar]:
    """The packet linked under `key`, memory-mapped, or None: nothing is decoded or hashed."""
    found = source_cache.resolve(cache, NAMESPACE, key, FORMAT_VERSION)
    if found is None:
        return None
    link, entry = found
    return from_tensors(link.meta["target"], entry.tensors, entry.meta)


def prepare(frames: Optional[torch.Tensor], settings: AvatarSettings, cache: Optional[ContentCache],
            model_fingerprint: str, build, source_key: Optional[str] = None) -> tuple[Avatar, bool]:
    """Load the packet for these frames/settings or build and store it. `build()` returns the tensors.

    `source_key` (from `source_key()`): look the packet up by its source first; `frames` may then be None (not
    evaluated) and is needed only on a miss; the link is written after a build or a content hit.
    Returns (avatar, hit) where hit says the packet came from the cache (no registration ran)."""
    if source_key is not None:
        avatar = load_from_source(cache, source_key)
        if avatar is not None:
            return avatar, True
    if frames is None:
        raise InputError("images", "the loop's frames (its cached packet is missing or unreadable)", "nothing",
                         "Queue the workflow again: the loop will be decoded this time.")
    avatar, hit = _load_or_build(frames, settings, cache, model_fingerprint, build)
    if source_key is not None and cache is not None:
        source_cache.store_link(cache, NAMESPACE, source_key, FORMAT_VERSION, avatar.key, avatar.meta)
    return avatar, hit


def _load_or_build(frames: torch.Tensor, settings: AvatarSettings, cache: Optional[ContentCache],
                   model_fingerprint: str, build) -> tuple[Avatar, bool]:
    key = packet_key(frames, settings, model_fingerprint)
    if cache is not None:
        entry = cache.load(NAMESPACE, key, FORMAT_VERSION)
        if entry is not None:
            return from_tensors(key, entry.tensors, entry.meta), True
    tensors = build()
    n, h, w = frames.shape[:3]
    meta = {"frames": int(n), "width": int(w), "height": int(h),
            "missing_faces": [int(i) for i in np.flatnonzero(~tensors["has_face"].numpy())],
            "crop_scale": settings.crop_scale, "crop_vy_ratio": settings.crop_vy_ratio,
            "smooth_k": settings.smooth_k}
    if cache is None:
        return from_tensors(key, tensors, meta), False
    entry = cache.store(NAMESPACE, key, FORMAT_VERSION, tensors, meta)
    return from_tensors(key, entry.tensors, entry.meta), False
