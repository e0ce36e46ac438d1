"""ComfyUI core's SAM3 track data -> the pack's masks (union + four masks), so a user can keep core's SAM3 model.

Core (``comfy_extras/nodes_sam3.py``, SAM3_VideoTrack, newer than 0.3.75) outputs ``SAM3_TRACK_DATA``, a plain dict:

    packed_masks  uint8 ``(N, K, Hm, Wm // 8)``: per frame N and tracked object K, the binary mask at the model's
                  resolution (1008 x 1008), 8 columns per byte, least significant bit first (bit b of byte j is
                  column 8 j + b); or None when nothing was ever tracked
    n_frames      int N
    scores        list of K floats, the detection score of each object (1.0 for objects given as masks)
    orig_size     (H, W) of the input frames

Object k keeps index k in every frame (frames before it appeared are all-zero). Core's own SAM3_TrackToMask resizes
the union bilinearly and returns the soft edge; here every object is resized bilinearly and thresholded, so the
result is a binary mask like the pack's video mask node.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F

from ..common.errors import InputError
from ..common.progress import Progress, ensure
from .video_mask import MAX_PROMPTS

_BITS = torch.tensor([1 << b for b in range(8)], dtype=torch.uint8)


def unpack_bits(packed: torch.Tensor) -> torch.Tensor:
    """uint8 ``(..., W // 8)`` -> bool ``(..., W)``, least significant bit first (core's packing)."""
    bits = packed.to(torch.uint8).unsqueeze(-1) & _BITS.to(packed.device)
    return bits.ne(0).reshape(*packed.shape[:-1], packed.shape[-1] * 8)


def pack_bits(masks: torch.Tensor) -> torch.Tensor:
    """bool ``(..., W)`` (W divisible by 8) -> uint8 ``(..., W // 8)``; the inverse of `unpack_bits`."""
    if masks.shape[-1] % 8:
        raise ValueError(f"mask width {masks.shape[-1]} is not a multiple of 8")
    groups = masks.ne(0).reshape(*masks.shape[:-1], masks.shape[-1] // 8, 8).to(torch.uint8)
    return (groups * _BITS.to(masks.device)).sum(-1, dtype=torch.uint8)


def check_track_data(track_data: Any) -> tuple[Optional[torch.Tensor], int, int, int]:
    """Validate core's dict; return ``(packed or None, frames, height, width)``."""
    expected = "core's SAM3_TRACK_DATA (a dict with packed_masks, n_frames, orig_size) from SAM3 Video Track"
    if not isinstance(track_data, dict) or "packed_masks" not in track_data or "orig_size" not in track_data:
        got = f"a dict with keys {sorted(track_data)}" if isinstance(track_data, dict) else type(track_data).__name__
        raise InputError("track_data", expected, got)
    try:
        height, width = (int(v) for v in track_data["orig_size"])
    except (TypeError, ValueError):
        raise InputError("track_data", "orig_size as (height, width)", repr(track_data["orig_size"])) from None
    if height < 1 or width < 1:
        raise InputError("track_data", "a positive orig_size", f"{width}x{height}")
    packed = track_data["packed_masks"]
    if packed is None:
        frames = int(track_data.get("n_frames") or 0)
        if frames < 1:
            raise InputError("track_data", "at least one frame (n_frames)", repr(track_data.get("n_frames")))
        return None, frames, height, width
    if not isinstance(packed, torch.Tensor) or packed.dim() != 4 or packed.dtype != torch.uint8:
        got = f"{packed.dtype} shape {tuple(packed.shape)}" if isinstance(packed, torch.Tensor) else type(packed).__name__
        raise InputError("track_data", "packed_masks as uint8 [frames, objects, height, width/8]", got)
    if packed.shape[0] < 1:
        raise InputError("track_data", "at least one frame", "0 frames")
    return packed, int(packed.shape[0]), height, width


def parse_groups(text: str, num_outputs: int = MAX_PROMPTS) -> list[Optional[list[int]]]:
    """One line per output mask: comma-separated object indices (0-based). Blank text -> objects 0..3 in turn."""
    lines = [line.strip() for line in (text or "").replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        return [[k] for k in range(num_outputs)]
    if len(lines) > num_outputs:
        raise InputError("object_groups", f"at most {num_outputs} lines (outputs mask_1..mask_{num_outputs})",
                         f"{len(lines)} lines")
    groups: list[Optional[list[int]]] = []
    for n, line in enumerate(lines, start=1):
        if not line:
            groups.append(None)
            continue
        indices = []
        for token in line.split(","):
            token = token.strip()
            if not token:
                continue
            if not token.isdigit():
                raise InputError("object_groups", "object indices such as '0' or '0, 2' on each line",
                                 f"{token!r} on line {n}")
            indices.append(int(token))
        groups.append(indices or None)
    return groups + [None] * (num_outputs - len(groups))


def track_data_to_masks(track_data: Any, groups: Sequence[Optional[Sequence[int]]], threshold: float = 0.5,
                        progress: Optional[Progress] = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(union, [mask_1..mask_4])``, each ``(N, H, W)`` float 0/1 at the original frame size.

    The union holds every tracked object; mask k the objects listed in ``groups[k]``. An index beyond the objects
    core tracked in this run selects nothing: how many objects SAM3 finds changes with the footage, and a workflow
    should not fail because a second hand never showed up.
    """
    if not 0.0 <= float(threshold) <= 1.0:
        raise InputError("threshold", "a value between 0 and 1", repr(threshold))
    packed, frames, height, width = check_track_data(track_data)
    union = torch.zeros(frames, height, width, dtype=torch.bool)
    outs: list[Optional[torch.Tensor]] = [None] * len(groups)
    progress = ensure(progress)
    progress.reset(frames)
    num_objects = 0 if packed is None else int(packed.shape[1])
    for t in range(frames):
        if num_objects:
            objects = unpack_bits(packed[t].cpu()).float()  # (K, Hm, Wm)
            resized = F.interpolate(objects[:, None], size=(height, width), mode="bilinear", align_corners=False)
            binary = resized[:, 0] > float(threshold)
            union[t] = binary.any(0)
            for k, group in enumerate(groups):
                chosen = [i for i in (group or ()) if i < num_objects]
                if chosen:
                    if outs[k] is None:
                        outs[k] = torch.zeros(frames, height, width, dtype=torch.bool)
                    outs[k][t] = binary[chosen].any(0)
        progress.step()
    masks = [o.float() if o is not None else torch.zeros(frames, height, width) for o in outs]
    return union.float(), masks
