"""The engine boundary: what the masking loop needs from a SAM3-like video segmenter.

The loop (`video_mask.segment_video`) never touches a network directly. It asks a `FrameSegmenter` to either run a
full detection on a frame (find prompted objects, match them to the tracks, start new tracks) or only propagate the
existing tracks to the frame from memory. `hf_video.TransformersSegmenter` implements it with transformers' SAM3
video model; tests inject a deterministic stand-in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch


@dataclass(frozen=True)
class MaskSettings:
    """The knobs of one masking run.

    Attributes:
        detection_threshold: minimum detection probability (0-1) for an object to be found or started as a track.
        detect_interval: full detection every N frames and on the last frame; 1 = every frame.
        max_objects: tracks kept at most, counted over all prompts in order of appearance; 0 = no limit.
        mask_threshold: probability (0-1) above which a pixel belongs to an object's mask.
        output_mode: ``"per prompt"`` (mask k = union of the objects of prompt line k) or ``"per object"``
            (mask k = the k-th object tracked, in order of appearance).
    """

    detection_threshold: float = 0.5
    detect_interval: int = 4
    max_objects: int = 0
    mask_threshold: float = 0.5
    output_mode: str = "per prompt"


@dataclass(frozen=True)
class TrackedMask:
    """One object's mask on one frame.

    Attributes:
        obj_id: the track's id, stable across frames.
        prompt_index: index into the prompt list given to `FrameSegmenter.start`.
        logits: mask logits ``(h, w)`` at any resolution (the loop resizes them to the frame); > 0 means inside.
        score: detection or tracking confidence in 0-1 (informational).
    """

    obj_id: int
    prompt_index: int
    logits: torch.Tensor
    score: float = 1.0


class FrameSegmenter(Protocol):
    """A video segmenter driven one frame at a time, always in increasing frame order."""

    def start(self, prompts: Sequence[str], height: int, width: int, settings: MaskSettings) -> None:
        """Begin a clip of ``height x width`` frames with these (distinct, non-empty) text prompts."""

    def detect(self, frame_idx: int, frame: torch.Tensor) -> list[TrackedMask]:
        """Full detection on `frame` (``(H, W, 3)`` float 0-1, CPU): update the tracks, return every visible object."""

    def propagate(self, frame_idx: int, frame: torch.Tensor) -> list[TrackedMask]:
        """Carry the existing tracks to `frame` from memory, without detecting; return every visible object."""

    def close(self) -> None:
        """Release the clip's state (memory bank, cached features). Called once, also after an error or cancel."""
