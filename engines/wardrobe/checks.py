"""Shape rules shared by every wardrobe stage: masks and frames must agree exactly, or the stage refuses.

ComfyUI's MASK is ``[F, H, W]`` (a single ``[H, W]`` mask is promoted to one frame) and IMAGE is ``[F, H, W, C]``.
A mismatch is never resized or truncated here: a silent shift of the mask against the frames is the failure these
checks exist to prevent.
"""
from __future__ import annotations

import torch

from ..common.errors import InputError
from ..common.images import ANY_CHANNELS, check_image_batch


def as_masks(mask, input_name: str) -> torch.Tensor:
    """Validate a MASK and return it as float32 ``[F, H, W]`` (a view where possible; never modified in place)."""
    if not isinstance(mask, torch.Tensor):
        raise InputError(input_name, "a MASK tensor [frames, height, width]", type(mask).__name__)
    if mask.dim() == 2:
        mask = mask.unsqueeze(0)
    if mask.dim() == 4 and mask.shape[1] == 1:  # [F, 1, H, W] from some custom nodes
        mask = mask[:, 0]
    if mask.dim() != 3:
        raise InputError(input_name, "a MASK of shape [frames, height, width]", f"shape {tuple(mask.shape)}")
    if mask.shape[0] == 0 or mask.shape[1] == 0 or mask.shape[2] == 0:
        raise InputError(input_name, "at least one frame of at least 1x1 pixels", f"shape {tuple(mask.shape)}")
    if mask.dtype != torch.float32:
        mask = mask.float()
    return mask


def as_images(images, input_name: str) -> torch.Tensor:
    """Validate an IMAGE batch ``[F, H, W, C]`` (C = 1, 3 or 4; one ``[H, W, C]`` frame is a batch of one): the
    compositors also take masks converted to images and RGBA layers."""
    return check_image_batch(images, input_name, channels=ANY_CHANNELS, single_frame=True)


def match_frames(masks: torch.Tensor, frames: int, height: int, width: int, mask_name: str,
                 frames_name: str = "images", allow_single: bool = True) -> torch.Tensor:
    """Check a mask sequence against a clip's frame count and size; a single mask frame may stand for all frames.

    Returns the masks (expanded as a view when a single frame is broadcast).
    """
    if tuple(masks.shape[1:]) != (height, width):
        raise InputError(mask_name, f"masks of {width}x{height} pixels (the size of '{frames_name}')",
                         f"{masks.shape[2]}x{masks.shape[1]}",
                         "Masks are never resized against the frames; produce them from the same frames.")
    if masks.shape[0] != frames:
        if allow_single and masks.shape[0] == 1:
            return masks.expand(frames, height, width)
        raise InputError(mask_name, f"{frames} mask frames (one per frame of '{frames_name}')",
                         f"{masks.shape[0]}", "Masks are never trimmed or repeated to fit; check the frame caps.")
    return masks


def check_same_masks(a: torch.Tensor, b: torch.Tensor, a_name: str, b_name: str) -> torch.Tensor:
    """For two-mask operations: same size; b may be a single frame (broadcast). Returns b as a view of a's shape."""
    if tuple(a.shape[1:]) != tuple(b.shape[1:]):
        raise InputError(b_name, f"masks of {a.shape[2]}x{a.shape[1]} pixels (the size of '{a_name}')",
                         f"{b.shape[2]}x{b.shape[1]}")
    if a.shape[0] != b.shape[0]:
        if b.shape[0] == 1:
            return b.expand_as(a)
        raise InputError(b_name, f"{a.shape[0]} frames (as many as '{a_name}') or a single frame",
                         f"{b.shape[0]} frames")
    return b


def chunks(total: int, size: int):
    """``range`` pairs ``(start, stop)`` covering ``total`` items in steps of ``size``."""
    size = max(1, int(size))
    for start in range(0, total, size):
        yield start, min(total, start + size)
