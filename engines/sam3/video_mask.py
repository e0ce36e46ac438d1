"""The SAM3 video masking loop: frames + text prompts -> a union mask and one mask per prompt (or per object).

Tensor layouts: frames ``(T, H, W, C)`` float 0-1 (ComfyUI IMAGE, C = 3 or 4, alpha ignored); every output mask
``(T, H, W)`` float32 holding exactly 0.0 or 1.0 (ComfyUI MASK).

Memory: frames are handed to the segmenter one at a time (it resizes each to the model's input on its own), and
masks are accumulated as one bool ``(T, H, W)`` buffer per output actually used, so the clip never exists twice at
full size in float. Only at the end is each buffer converted to a float MASK, one after the other.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F

from ..common.errors import InputError
from ..common.images import check_image_batch
from ..common.progress import Progress, ensure
from .schedule import detection_schedule
from .segmenter import FrameSegmenter, MaskSettings, TrackedMask

MAX_PROMPTS = 4
OUTPUT_MODES = ("per prompt", "per object")

Frames = Union[torch.Tensor, Sequence[torch.Tensor]]


@dataclass
class VideoMasks:
    """What one run produced.

    Attributes:
        union: ``(T, H, W)`` every kept object of every prompt.
        masks: four ``(T, H, W)`` masks: per prompt line, or the first four objects (see `MaskSettings.output_mode`);
            all-zero where a line is unused or an object never appeared.
        detections: frames that got a full detection; propagations: frames that were only propagated.
        object_prompts: track id -> prompt line (0-based) for every kept object, in order of appearance.
    """

    union: torch.Tensor
    masks: list
    detections: int = 0
    propagations: int = 0
    object_prompts: dict = field(default_factory=dict)


def parse_prompts(text: str) -> list[Optional[str]]:
    """Split the prompt box into lines: ``[line 1, ..., line k]`` (k <= 4), None for a blank line in between.

    Each line is one SAM3 text prompt ("burgundy dress, corset, straps" is one prompt). Trailing blank lines are
    ignored; a prompt on line 5 or later is refused rather than dropped, because outputs map to lines 1-4.
    """
    if not isinstance(text, str):
        raise InputError("prompts", "text with one prompt per line", type(text).__name__)
    lines = [line.strip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise InputError("prompts", "at least one text prompt (one per line, e.g. 'burgundy dress')",
                         "an empty prompt")
    if len(lines) > MAX_PROMPTS:
        raise InputError("prompts", f"at most {MAX_PROMPTS} prompt lines (outputs mask_1..mask_{MAX_PROMPTS})",
                         f"a prompt on line {len(lines)}", "Run a second mask node for more prompts.")
    return [line or None for line in lines]


def check_frames(images: Frames) -> tuple[int, int, int]:
    """Validate the frames; return ``(T, H, W)``. Refuses zero frames, odd shapes and mixed frame sizes."""
    if isinstance(images, torch.Tensor):
        images = check_image_batch(images, "images")
        t, h, w = images.shape[0], images.shape[1], images.shape[2]
    else:
        frames = list(images) if images is not None else []
        if not frames:
            raise InputError("images", "at least one frame", "0 frames")
        sizes = []
        for i, frame in enumerate(frames):
            if not isinstance(frame, torch.Tensor) or frame.dim() != 3 or frame.shape[-1] not in (3, 4):
                got = tuple(frame.shape) if isinstance(frame, torch.Tensor) else type(frame).__name__
                raise InputError("images", "frames of shape [height, width, 3]", f"{got} at frame {i}")
            sizes.append((frame.shape[0], frame.shape[1]))
        if len(set(sizes)) > 1:
            first = sizes[0]
            odd = next(i for i, s in enumerate(sizes) if s != first)
            raise InputError("images", f"frames of one size (frame 0 is {first[1]}x{first[0]})",
                             f"frame {odd} of {sizes[odd][1]}x{sizes[odd][0]}", "Resize the frames to one size first.")
        t, (h, w) = len(frames), sizes[0]
    if t == 0:
        raise InputError("images", "at least one frame", "0 frames")
    if h < 1 or w < 1:
        raise InputError("images", "frames of at least 1x1 pixel", f"{w}x{h}")
    return int(t), int(h), int(w)


def check_settings(settings: MaskSettings) -> None:
    """Range checks that name the node input at fault."""
    for name in ("detection_threshold", "mask_threshold"):
        value = getattr(settings, name)
        if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
            raise InputError(name, "a probability between 0 and 1", repr(value))
    if int(settings.max_objects) != settings.max_objects or settings.max_objects < 0:
        raise InputError("max_objects", "an integer >= 0 (0 = no limit)", repr(settings.max_objects))
    if settings.output_mode not in OUTPUT_MODES:
        raise InputError("output_mode", " or ".join(repr(m) for m in OUTPUT_MODES), repr(settings.output_mode))
    detection_schedule(0, settings.detect_interval)  # validates the interval


def _logit(p: float) -> float:
    """Mask threshold as a logit: sigmoid(x) > p  <=>  x > logit(p)."""
    if p <= 0.0:
        return -math.inf
    if p >= 1.0:
        return math.inf
    return math.log(p / (1.0 - p))


def segment_video(segmenter: FrameSegmenter, images: Frames, prompts: Union[str, Sequence[Optional[str]]],
                  settings: MaskSettings = MaskSettings(), progress: Optional[Progress] = None) -> VideoMasks:
    """Mask every frame for the given prompts, detecting on the schedule and propagating in between.

    Args:
        segmenter: the detector/propagator (started, driven frame by frame in order, and always closed here).
        images: ``(T, H, W, C)`` frames, or a sequence of ``(H, W, C)`` frames of one size.
        prompts: the prompt box text, or lines as returned by `parse_prompts`.
        settings: thresholds, interval, object cap and output mode.
        progress: stepped once per frame; raises to cancel.
    """
    lines = parse_prompts(prompts) if isinstance(prompts, str) else list(prompts)
    if not any(lines):
        raise InputError("prompts", "at least one text prompt", "an empty prompt")
    check_settings(settings)
    num_frames, height, width = check_frames(images)
    schedule = detection_schedule(num_frames, settings.detect_interval)

    # Identical lines share one prompt in the model; each line still gets its own output.
    unique: list[str] = []
    for line in lines:
        if line and line not in unique:
            unique.append(line)
    lines_of_prompt = [[k for k, line in enumerate(lines) if line == p] for p in unique]

    threshold = _logit(float(settings.mask_threshold))
    per_object = settings.output_mode == "per object"
    union = torch.zeros(num_frames, height, width, dtype=torch.bool)
    slots: list[Optional[torch.Tensor]] = [None] * MAX_PROMPTS
    object_prompts: dict[int, int] = {}
    object_slot: dict[int, int] = {}
    progress = ensure(progress)
    progress.reset(num_frames)
    result = VideoMasks(union=union, masks=[])

    segmenter.start(unique, height, width, settings)
    try:
        for i in range(num_frames):
            progress.check()
            frame = images[i][..., :3]
            if schedule[i]:
                found = segmenter.detect(i, frame)
                result.detections += 1
            else:
                found = segmenter.propagate(i, frame)
                result.propagations += 1
            for obj in sorted(found, key=lambda o: o.obj_id):
                if not _admit(obj, object_prompts, object_slot, settings.max_objects, len(unique)):
                    continue
                mask = _frame_mask(obj, height, width, threshold)
                if not mask.any():
                    continue
                union[i] |= mask
                targets = [object_slot[obj.obj_id]] if per_object else lines_of_prompt[obj.prompt_index]
                for slot in targets:
                    if slot is None:
                        continue
                    if slots[slot] is None:
                        slots[slot] = torch.zeros(num_frames, height, width, dtype=torch.bool)
                    slots[slot][i] |= mask
            progress.step()
    finally:
        segmenter.close()

    result.object_prompts = {o: lines_of_prompt[p][0] for o, p in object_prompts.items()}
    result.masks = [_to_mask(s, num_frames, height, width) for s in slots]
    result.union = _to_mask(union, num_frames, height, width)
    return result


def _admit(obj: TrackedMask, object_prompts: dict, object_slot: dict, max_objects: int, num_prompts: int) -> bool:
    """Keep the first `max_objects` tracks in order of appearance; later ones are ignored for the whole clip."""
    if obj.obj_id in object_prompts:
        return True
    if not 0 <= obj.prompt_index < num_prompts:
        raise RuntimeError(f"segmenter returned prompt index {obj.prompt_index} for {num_prompts} prompts")
    if max_objects and len(object_prompts) >= max_objects:
        return False
    object_slot[obj.obj_id] = len(object_prompts) if len(object_prompts) < MAX_PROMPTS else None
    object_prompts[obj.obj_id] = obj.prompt_index
    return True


def _frame_mask(obj: TrackedMask, height: int, width: int, threshold: float) -> torch.Tensor:
    """An object's logits resized to the frame (bilinear, as SAM3's own post-processing) and thresholded, on CPU."""
    logits = obj.logits
    while logits.dim() > 2:
        logits = logits[0]
    logits = logits.float()
    if logits.shape != (height, width):
        logits = F.interpolate(logits[None, None], size=(height, width), mode="bilinear", align_corners=False)[0, 0]
    return (logits > threshold).cpu()


def _to_mask(buffer: Optional[torch.Tensor], t: int, h: int, w: int) -> torch.Tensor:
    if buffer is None:
        return torch.zeros(t, h, w, dtype=torch.float32)
    return buffer.to(torch.float32)
