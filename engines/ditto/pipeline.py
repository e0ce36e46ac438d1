"""One loaded Ditto model and the four stages the nodes call: avatar, audio features, motion, render.

Holds the six networks (one `nn.Module`, so ComfyUI's model management can move and unload it), the ONNX sessions
(HuBERT and the three face models), the config's defaults and a fingerprint of the files (part of every cache key).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch

from ..common.cache import ContentCache, content_hash
from ..common.errors import InputError
from ..common.fingerprint import file_fingerprint
from ..common.frames import collect_frames
from ..common.onnx import onnx_session
from ..common.precision import dtype_for
from ..common.progress import Progress
from .audio_features import HubertRunner, check_length, frame_rms
from .audio_features import audio_features as hubert_features
from .avatar import Avatar, AvatarSettings, frames_to_uint8
from .avatar import prepare as load_or_register
from .avatar import source_key as avatar_source_key
from .avatar import register as register_avatar
from .keypoints import DriveSettings, driven_keypoints
from .motion import EMOTIONS, MotionSettings
from .motion import generate as generate_motion
from .render import RenderSettings
from .render import render as render_chunks
from .face import FaceLandmarker
from .loader import DittoFiles, load_networks, resolve_files

FEATURES_NAMESPACE = "ditto_audio"
FEATURES_VERSION = 1


@dataclass
class MotionSequence:
    """LMDM output plus what rendering needs: avatar frame per output frame and driven keypoints."""

    motion: np.ndarray              # (N, 265)
    source_index: np.ndarray        # (N,)
    kp_driven: np.ndarray           # (N, 21, 3), before stitching
    avatar_key: str
    audio16k: Optional[np.ndarray] = None   # the speech it was made from (silence detection, pass-through)
    fps: float = 25.0
    settings: dict = field(default_factory=dict)


class DittoPipeline:
    # The renderer's autocast dtypes (the motion model always runs in fp32); fp16 only on a CUDA GPU.
    PRECISIONS = ("fp32", "fp16", "bf16")

    def __init__(self, folder: Path, device: torch.device = torch.device("cpu"), precision: str = "fp32",
                 input_name: str = "model_name"):
        if precision not in self.PRECISIONS:
            raise InputError("precision", f"one of {', '.join(self.PRECISIONS)}", repr(precision))
        if precision == "fp16" and torch.device(device).type != "cuda":
            raise InputError("precision", "fp32 or bf16 on the CPU (fp16 is for a CUDA GPU)", f"fp16 on {device}")
        self.files: DittoFiles = resolve_files(Path(folder), input_name)
        self.config = self.files.config
        self.device = torch.device(device)
        self.dtype = dtype_for(precision)
        self.nets = load_networks(self.files, input_name)
        sessions = {k: onnx_session(p, self.device) for k, p in self.files.aux.items()}
        self.hubert = HubertRunner(sessions["hubert_cfg"])
        self.landmarker = FaceLandmarker(sessions["insightface_det_cfg"], sessions["landmark106_cfg"],
                                         sessions["landmark203_cfg"])
        self.fingerprint = file_fingerprint(list(self.files.weights.values()) + list(self.files.aux.values()))

    @property
    def weights_dtype(self) -> torch.dtype:
        """The networks' own dtype (fp32 under this pipeline's autocast; bf16/fp16 when a caller cast them)."""
        return next(self.nets.parameters()).dtype

    def accelerate(self, backend: str = "auto", opts=None) -> list:
        """Run LMDM and the renderer networks through `backend` (engines/accel); returns what each one runs on."""
        from .accel import accelerate_ditto

        return accelerate_ditto(self.nets, backend, opts, weights_id=self.fingerprint)

    # -- stages ------------------------------------------------------------------------------------------------------
    def _avatar_fingerprint(self) -> str:
        # an avatar registered with cast (bf16/fp16) weights is not the fp32 one: its cache key says which
        dtype = self.weights_dtype
        return self.fingerprint if dtype == torch.float32 else f"{self.fingerprint}:{dtype}"

    def avatar_source_key(self, signature, settings: AvatarSettings) -> Optional[str]:
        """The packet's link key from the source `signature` (engines/common/source_cache.py), or None."""
        return avatar_source_key(signature, settings, self._avatar_fingerprint())

    def prepare_avatar(self, images: Optional[torch.Tensor], settings: AvatarSettings, cache: Optional[ContentCache],
                       progress: Optional[Progress] = None, source_key: Optional[str] = None) -> tuple[Avatar, bool]:
        """The packet of `images` (loaded or registered). With `source_key` it is looked up by source first, and
        `images` (None: not evaluated) is needed only on a miss."""
        frames = frames_to_uint8(images) if images is not None else None

        def build():
            return register_avatar(frames, self.landmarker, self.nets.appearance, self.nets.motion_extractor, settings,
                                   self.device, self.weights_dtype, progress)

        return load_or_register(frames, settings, cache, self._avatar_fingerprint(), build, source_key=source_key)

    def audio_features(self, audio16k: np.ndarray, cache: Optional[ContentCache],
                       progress: Optional[Progress] = None) -> np.ndarray:
        check_length(audio16k)
        key = content_hash("ditto-hubert", FEATURES_VERSION, audio16k, self.fingerprint)
        if cache is not None:
            entry = cache.load(FEATURES_NAMESPACE, key, FEATURES_VERSION)
            if entry is not None:
                return entry.tensors["features"].numpy()
        feats = hubert_features(self.hubert, audio16k, progress)
        if cache is not None:
            cache.store(FEATURES_NAMESPACE, key, FEATURES_VERSION, {"features": torch.from_numpy(feats)},
                        {"frames": len(feats)})
        return feats

    def motion_settings(self, *, steps: int, seed: int, emotion: str, pose_smoothing: int = 0,
                        emotion_steering: float = 0.0) -> MotionSettings:
        """Motion settings from the user's choices and this release's config (`MotionSettings.from_config`)."""
        return MotionSettings.from_config(self.config.defaults, steps=steps, seed=seed, emotion=emotion,
                                          pose_smoothing=pose_smoothing, emotion_steering=emotion_steering)

    def motion(self, avatar: Avatar, features: np.ndarray, settings: MotionSettings,
               drive: DriveSettings, audio16k: Optional[np.ndarray] = None,
               progress: Optional[Progress] = None) -> MotionSequence:
        v_clip = self.config.defaults.get("v_min_max_for_clip")
        runner = (getattr(self.nets, "runners", None) or {}).get("lmdm")
        if runner is not None and runner.net.module.guidance != settings.guidance:
            runner = None    # built for another guidance weight: the eager module takes any
        seq = generate_motion(self.nets.lmdm, features, avatar.info, settings,
                              None if v_clip is None else np.asarray(v_clip, np.float32), self.device,
                              self.weights_dtype, progress, audio16k, runner)
        blink = self.config.defaults.get("delta_eye_arr")
        src, kp = driven_keypoints(seq, avatar.info, drive, None if blink is None else np.asarray(blink, np.float32))
        return MotionSequence(seq, src, kp, avatar.key, audio16k, settings={"steps": settings.steps, "seed": settings.seed,
                                                                 "emotion": EMOTIONS[settings.emotion]})

    def render(self, avatar: Avatar, motion: MotionSequence, settings: RenderSettings,
               progress: Optional[Progress] = None, reuse_buffers: bool = False) -> Iterator[torch.Tensor]:
        """The talking head as a generator of full-size frame chunks ``[b, H, W, 3]`` uint8, in order (feed it to
        `write_stream`, or `render_frames` for the whole clip as an IMAGE). `reuse_buffers`: recycled chunk buffers
        for a consumer done with each chunk when it asks for the next (render.render)."""
        if motion.avatar_key != avatar.key:
            raise InputError("motion", "a motion sequence made for this avatar (same Ditto Avatar node output)",
                             "one made for a different avatar", "Feed the Motion and Render nodes the same avatar.")
        audio16k = motion.audio16k
        rms = None if audio16k is None else frame_rms(audio16k, len(motion.kp_driven))
        return render_chunks(self.nets, avatar, motion.source_index, motion.kp_driven, rms, settings, self.device,
                             self.dtype, progress, reuse_buffers)

    def render_frames(self, avatar: Avatar, motion: MotionSequence, settings: RenderSettings,
                      progress: Optional[Progress] = None) -> torch.Tensor:
        """The whole clip as a ComfyUI IMAGE ``[N, H, W, 3]`` float32 0-1: `render`'s uint8 chunks converted once,
        into one preallocated tensor."""
        w, h = avatar.size
        return collect_frames(self.render(avatar, motion, settings, progress, reuse_buffers=True),
                              len(motion.kp_driven), (h, w, 3), torch.float32)
