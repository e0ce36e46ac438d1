"""The one check of a ComfyUI IMAGE batch (``[frames, height, width, channels]``, float 0-1), for nodes and
engines alike, so every family refuses a bad batch with the same message.

Families differ only in what they can use, and say so through the arguments: how many channels (a compositor
takes masks-as-images and RGBA; a face model needs RGB), whether one ``[H, W, C]`` frame is accepted as a batch of
one, and the smallest frame size.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .errors import InputError

RGB = (3,)
RGB_OR_RGBA = (3, 4)
ANY_CHANNELS = (1, 3, 4)


def check_image_batch(images: Any, input_name: str = "images", *, channels: tuple[int, ...] = RGB_OR_RGBA,
                      single_frame: bool = False, min_size: int = 1) -> torch.Tensor:
    """Return `images` as a ``[F, H, W, C]`` tensor (or numpy array, as given) with ``F >= 1`` (a view, never a
    copy) or raise `InputError` naming `input_name`.

    Args:
        channels: the channel counts accepted.
        single_frame: accept one ``[H, W, C]`` frame as a batch of one.
        min_size: the smallest height and width in pixels.
    """
    if not isinstance(images, (torch.Tensor, np.ndarray)):
        raise InputError(input_name, "an IMAGE batch (a tensor or array [frames, height, width, 3])",
                         type(images).__name__)
    given = f"shape {tuple(images.shape)}"
    if single_frame and images.ndim == 3:
        images = images[None]
    if images.ndim != 4 or images.shape[-1] not in channels:
        others = {1: " or [..., 1] (a mask as an image)", 4: " or [..., 4] (RGBA)"}
        shapes = "".join(others[c] for c in channels if c in others)
        raise InputError(input_name, f"an IMAGE batch of shape [frames, height, width, 3]{shapes}", given)
    if images.shape[0] == 0:
        raise InputError(input_name, "at least one frame", "0 frames")
    if images.shape[1] < min_size or images.shape[2] < min_size:
        raise InputError(input_name, f"frames at least {min_size}x{min_size} pixels",
                         f"{images.shape[2]}x{images.shape[1]}")
    return images
