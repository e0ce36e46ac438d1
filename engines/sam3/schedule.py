"""Which frames get a full SAM3 detection.

Detection (vision backbone + DETR detector for every prompt + matching against the tracks) is the expensive step;
tracking a known object to the next frame needs only the backbone and the memory-conditioned mask decoder. The posts
detect on every 4th frame and let the memory bank carry the objects in between (48 s -> 28 s for 175 frames).

The last frame is always detected as well: otherwise a clip whose length is not 1 modulo the interval would end on
up to N-1 frames of pure propagation, and an object entering at the end would never be picked up.
"""
from __future__ import annotations

from ..common.errors import InputError


def detection_schedule(num_frames: int, interval: int) -> list[bool]:
    """``[True, False, ...]``: True where frame ``i`` gets a full detection (``i % interval == 0`` or the last frame).

    Args:
        num_frames: frames in the clip (>= 0; 0 gives an empty schedule).
        interval: detect every `interval` frames; 1 detects on every frame.
    """
    if int(interval) != interval or interval < 1:
        raise InputError("detect_interval", "an integer of at least 1 (1 = detect on every frame)", repr(interval))
    if num_frames < 0:
        raise InputError("images", "a non-negative frame count", str(num_frames))
    interval = int(interval)
    return [i % interval == 0 or i == num_frames - 1 for i in range(int(num_frames))]


def detection_frames(num_frames: int, interval: int) -> list[int]:
    """The indices of the frames that get a full detection, in order."""
    return [i for i, detect in enumerate(detection_schedule(num_frames, interval)) if detect]
