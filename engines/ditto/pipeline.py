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
from ..common.fingerprint import file_fingerprint
from ..common.onnx import onnx_session
from ..common.errors import InputError
from ..common.progress import Progress
from . import audio_features as af
from . import avatar as av
from . import keypoints as kps
from . import motion as mo
from . import render as rd
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
    def __init__(self, folder: Path, device: torch.device = torch.device("cpu"), precision: str = "fp32",
                 input_name: str = "model_name"):
        if precision not in ("fp32", "fp16"):
            raise InputError("precision", "fp32 or fp16", repr(precision))
        if precision == "fp16" and torch.device(device).type != "cuda":
            raise InputError("precision", "fp32 on the CPU (fp16 is for a CUDA GPU)", f"fp16 on {device}")
        self.files: DittoFiles = resolve_files(Path(folder), input_name)
        self.config = self.files.config
        self.device = torch.device(device)
        self.dtype = torch.float16 if precision == "fp16" else torch.float32
        self.nets = load_networks(self.files, input_name)
        sessions = {k: onnx_session(p, self.device) for k, p in self.files.aux.items()}
        self.hubert = af.HubertRunner(sessions["hubert_cfg"])
        self.landmarker = FaceLandmarker(sessions["insightface_det_cfg"], sessions["landmark106_cfg"],
                                         sessions["landmark203_cfg"])
        self.fingerprint = file_fingerprint(list(self.files.weights.values()) + list(self.files.aux.values()))

    # -- stages ------------------------------------------------------------------------------------------------------
    def prepare_avatar(self, images: torch.Tensor, settings: av.AvatarSettings, cache: Optional[ContentCache],
                       progress: Optional[Progress] = None) -> tuple[av.Avatar, bool]:
        frames = av.frames_to_uint8(images)

        def build():
            return av.register(frames, self.landmarker, self.nets.appearance, self.nets.motion_extractor, settings,
                               self.device, torch.float32, progress)

        return av.prepare(frames, settings, cache, self.fingerprint, build)

    def audio_features(self, audio16k: np.ndarray, cache: Optional[ContentCache],
                       progress: Optional[Progress] = None) -> np.ndarray:
        af.check_length(audio16k)
        key = content_hash("ditto-hubert", FEATURES_VERSION, audio16k, self.fingerprint)
        if cache is not None:
            entry = cache.load(FEATURES_NAMESPACE, key, FEATURES_VERSION)
            if entry is not None:
                return entry.tensors["features"].numpy()
        feats = af.audio_features(self.hubert, audio16k, progress)
        if cache is not None:
            cache.store(FEATURES_NAMESPACE, key, FEATURES_VERSION, {"features": torch.from_numpy(feats)},
                        {"frames": len(feats)})
        return feats

    def motion(self, avatar: av.Avatar, features: np.ndarray, settings: mo.MotionSettings,
               drive: kps.DriveSettings, audio16k: Optional[np.ndarray] = None,
               progress: Optional[Progress] = None) -> MotionSequence:
        v_clip = self.config.defaults.get("v_min_max_for_clip")
        seq = mo.generate(self.nets.lmdm, features, avatar.info, settings,
                          None if v_clip is None else np.asarray(v_clip, np.float32), self.device, torch.float32,
                          progress)
        blink = self.config.defaults.get("delta_eye_arr")
        src, kp = kps.driven_keypoints(seq, avatar.info, drive, None if blink is None else np.asarray(blink, np.float32))
        return MotionSequence(seq, src, kp, avatar.key, audio16k, settings={"steps": settings.steps, "seed": settings.seed,
                                                                 "emotion": mo.EMOTIONS[settings.emotion]})

    def render(self, avatar: av.Avatar, motion: MotionSequence, settings: rd.RenderSettings,
               progress: Optional[Progress] = None) -> Iterator[tuple[int, torch.Tensor]]:
        if motion.avatar_key != avatar.key:
            raise InputError("motion", "a motion sequence made for this avatar (same Ditto Avatar node output)",
                             "one made for a different avatar", "Feed the Motion and Render nodes the same avatar.")
        audio16k = motion.audio16k
        rms = None if audio16k is None else af.frame_rms(audio16k, len(motion.kp_driven))
        return rd.render(self.nets, avatar, motion.source_index, motion.kp_driven, rms, settings, self.device,
                         self.dtype, progress)
