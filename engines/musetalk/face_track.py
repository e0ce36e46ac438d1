"""Face boxes for every frame of an avatar loop.

Detection is the slow part, and a presenter's head moves slowly: the detector runs on every `every`-th frame (plus
the last one) of a proxy scaled down to `proxy_size`, and boxes in between are interpolated linearly between the
frames where a face was actually found, using their true frame numbers (so a last frame off the stride, or a
keyframe without a face, is handled right). Frames before the first or after the last hit hold the nearest box.

All boxes share one convention, that of a frontal face detector: brows to just below the mouth, about as wide as
tall. Each detector converts its own output into it. Boxes are ``(x1, y1, x2, y2)`` float pixels of the full frame.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..common.errors import InputError
from ..common.progress import Progress, ensure

MIN_BOX = 8.0   # pixels: a box never collapses below this, whatever the detector or mask says

Detector = Callable[[np.ndarray], np.ndarray]   # RGB uint8 [H, W, 3] -> [K, 5] (x1, y1, x2, y2, score)


@dataclass(frozen=True)
class FaceTrack:
    """Per-frame face boxes of a clip.

    Attributes:
        boxes: ``[N, 4]`` float32 ``(x1, y1, x2, y2)`` in frame pixels, never smaller than `MIN_BOX`.
        found: ``[N]`` bool, True where the box came from an actual detection (or mask), not interpolation.
        width, height: frame size the boxes belong to.
        method: how the boxes were made ("haar", "scrfd", "mask", "box").
    """

    boxes: torch.Tensor
    found: torch.Tensor
    width: int
    height: int
    method: str

    def __len__(self) -> int:
        return int(self.boxes.shape[0])


class HaarDetector:
    """OpenCV's bundled frontal-face Haar cascade: no weight files needed (opencv-python-headless below 5)."""

    name = "haar"

    def __init__(self, min_neighbors: int = 4):
        import cv2

        path = getattr(getattr(cv2, "data", None), "haarcascades", "") + "haarcascade_frontalface_default.xml"
        self._cascade = cv2.CascadeClassifier(path) if hasattr(cv2, "CascadeClassifier") else None
        if self._cascade is None or self._cascade.empty():
            raise InputError("detector", "OpenCV's bundled Haar cascade (opencv-python-headless below 5)",
                             f"OpenCV {cv2.__version__} without it",
                             "pip install 'opencv-python-headless<5', or put an SCRFD .onnx file in models/.")
        self._min_neighbors = min_neighbors

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        import cv2

        gray = cv2.equalizeHist(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))
        side = max(16, min(gray.shape) // 12)
        found = self._cascade.detectMultiScale(gray, scaleFactor=1.1, minNeighbors=self._min_neighbors,
                                               minSize=(side, side))
        if len(found) == 0:
            return np.zeros((0, 5), np.float32)
        xywh = np.asarray(found, np.float32).reshape(-1, 4)
        return np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:], np.ones((len(xywh), 1), np.float32)], 1)


def frame_uint8(frame: torch.Tensor) -> np.ndarray:
    """ComfyUI IMAGE frame ``[H, W, 3]`` 0..1 -> RGB uint8 numpy."""
    return (frame.detach().to("cpu", torch.float32).clamp(0, 1) * 255.0 + 0.5).to(torch.uint8).numpy()


def keyframes(n_frames: int, every: int) -> list[int]:
    """``0, every, 2·every, …`` plus the last frame."""
    keys = list(range(0, n_frames, max(1, every)))
    if keys[-1] != n_frames - 1:
        keys.append(n_frames - 1)
    return keys


def pick_face(dets: np.ndarray, previous: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """The detection overlapping `previous` (the last keyframe's face) the most, else the most prominent one
    (area x score), or None. Following the face keeps a larger false detection (a badge, a face on a screen) from
    taking over the track halfway through a loop."""
    if dets is None or len(dets) == 0:
        return None
    area = (dets[:, 2] - dets[:, 0]) * (dets[:, 3] - dets[:, 1])
    if previous is not None:
        ix = np.clip(np.minimum(dets[:, 2], previous[2]) - np.maximum(dets[:, 0], previous[0]), 0, None)
        iy = np.clip(np.minimum(dets[:, 3], previous[3]) - np.maximum(dets[:, 1], previous[1]), 0, None)
        inter = ix * iy
        iou = inter / (area + (previous[2] - previous[0]) * (previous[3] - previous[1]) - inter)
        if iou.max() > 0:
            return dets[int(np.argmax(iou))][:4]
    return dets[int(np.argmax(area * dets[:, 4]))][:4]


def interpolate_boxes(key_frames: Sequence[int], key_boxes: np.ndarray, n_frames: int) -> np.ndarray:
    """Boxes for frames ``0..n-1`` from boxes at (sorted, unique) `key_frames`: linear between them, held outside."""
    x = np.asarray(key_frames, np.float64)
    kb = np.asarray(key_boxes, np.float64).reshape(-1, 4)
    frames = np.arange(n_frames, dtype=np.float64)
    return np.stack([np.interp(frames, x, kb[:, c]) for c in range(4)], axis=1)


def sanitize_boxes(boxes: np.ndarray, width: int, height: int, min_size: float = MIN_BOX) -> np.ndarray:
    """Order corners, keep inside the frame, and grow any box below `min_size` around its centre."""
    b = np.asarray(boxes, np.float64).copy()
    x1, x2 = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    y1, y2 = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    out = []
    for lo, hi, limit in ((x1, x2, width), (y1, y2, height)):
        size = np.clip(hi - lo, min(min_size, limit), limit)
        centre = np.clip((lo + hi) / 2, size / 2, limit - size / 2)
        out.append((centre - size / 2, centre + size / 2))
    (x1, x2), (y1, y2) = out
    return np.stack([x1, y1, x2, y2], axis=1).astype(np.float32)


def track_faces(frames: torch.Tensor, detector: Detector, every: int = 5, proxy_size: int = 384,
                method: str = "haar", progress: Optional[Progress] = None) -> FaceTrack:
    """Detect on keyframes of a downscaled proxy, interpolate the rest. Refuses a clip with no face anywhere."""
    import cv2

    progress = ensure(progress)
    n, h, w = int(frames.shape[0]), int(frames.shape[1]), int(frames.shape[2])
    scale = min(1.0, proxy_size / max(h, w)) if proxy_size > 0 else 1.0
    keys = keyframes(n, every)
    progress.reset(len(keys))
    hit_frames, hit_boxes = [], []
    for k in keys:
        img = frame_uint8(frames[k])
        if scale < 1.0:
            img = cv2.resize(img, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
        box = pick_face(detector(img), hit_boxes[-1] * scale if hit_boxes else None)
        if box is not None:
            hit_frames.append(k)
            hit_boxes.append(np.asarray(box, np.float64) / scale)
        progress.step()
    if not hit_frames:
        raise InputError("images", "a clip where the face detector finds a face on at least one frame",
                         f"no face on any of the {len(keys)} frames checked ({method} detector)",
                         "Use a frontal, well-lit shot, lower detect_every, or supply a face mask or box.")
    boxes = sanitize_boxes(interpolate_boxes(hit_frames, np.stack(hit_boxes), n), w, h)
    found = torch.zeros(n, dtype=torch.bool)
    found[hit_frames] = True
    return FaceTrack(torch.from_numpy(boxes), found, w, h, method)


def track_from_masks(masks: torch.Tensor, n_frames: int, width: int, height: int,
                     threshold: float = 0.5) -> FaceTrack:
    """Boxes from the bounding box of each mask (frames with an empty mask are interpolated).

    A single mask applies to every frame. Masks must have the frames' size.
    """
    if masks.dim() == 2:
        masks = masks[None]
    if masks.dim() != 3 or tuple(masks.shape[1:]) != (height, width):
        raise InputError("mask", f"a MASK of {height}x{width} pixels (the frames' size)", f"shape {tuple(masks.shape)}")
    if masks.shape[0] not in (1, n_frames):
        raise InputError("mask", f"1 mask or one per frame ({n_frames})", f"{masks.shape[0]} masks")
    hit_frames, hit_boxes = [], []
    for i in range(masks.shape[0]):
        on = masks[i] > threshold
        rows = torch.nonzero(on.any(dim=1)).flatten()
        if rows.numel() == 0:
            continue
        cols = torch.nonzero(on.any(dim=0)).flatten()
        hit_frames.append(i)
        hit_boxes.append([float(cols[0]), float(rows[0]), float(cols[-1]) + 1, float(rows[-1]) + 1])
    if not hit_frames:
        raise InputError("mask", "a face mask with pixels above 0.5 on at least one frame", "an empty mask everywhere")
    if masks.shape[0] == 1:
        boxes = np.repeat(np.asarray(hit_boxes, np.float64), n_frames, axis=0)
        found = torch.ones(n_frames, dtype=torch.bool)
    else:
        boxes = interpolate_boxes(hit_frames, np.asarray(hit_boxes), n_frames)
        found = torch.zeros(n_frames, dtype=torch.bool)
        found[hit_frames] = True
    return FaceTrack(torch.from_numpy(sanitize_boxes(boxes, width, height)), found, width, height, "mask")


def parse_box(text: str, input_name: str = "box") -> tuple[float, float, float, float]:
    """``"x1, y1, x2, y2"`` in pixels."""
    parts = [p for p in text.replace(";", ",").replace(" ", ",").split(",") if p]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 4 or values[2] <= values[0] or values[3] <= values[1]:
        raise InputError(input_name, "four pixel numbers 'x1, y1, x2, y2' with x2 > x1 and y2 > y1", repr(text))
    return values  # type: ignore[return-value]


def track_from_box(box: Sequence[float], n_frames: int, width: int, height: int) -> FaceTrack:
    """One fixed box for every frame."""
    boxes = sanitize_boxes(np.repeat(np.asarray([box], np.float64), n_frames, axis=0), width, height)
    return FaceTrack(torch.from_numpy(boxes), torch.ones(n_frames, dtype=torch.bool), width, height, "box")


def preview(frames: torch.Tensor, track: FaceTrack, count: int = 4, max_side: int = 256) -> torch.Tensor:
    """Up to `count` evenly spaced frames, scaled to `max_side`, with their box drawn (green where a face was
    found on that frame, yellow where the box was interpolated): ``[k, h, w, 3]`` for a preview image."""
    import torch.nn.functional as F

    n = int(frames.shape[0])
    picks = sorted({round(i * (n - 1) / max(1, count - 1)) for i in range(min(count, n))})
    scale = min(1.0, max_side / max(track.width, track.height))
    h, w = max(1, round(track.height * scale)), max(1, round(track.width * scale))
    out = []
    for k in picks:
        img = frames[k].detach().to("cpu", torch.float32).permute(2, 0, 1)[None]
        img = F.interpolate(img, size=(h, w), mode="area")[0].permute(1, 2, 0).clone()
        x1, y1, x2, y2 = (track.boxes[k] * scale).round().long().tolist()
        x1, y1 = max(0, min(x1, w - 1)), max(0, min(y1, h - 1))
        x2, y2 = max(x1 + 1, min(x2, w)), max(y1 + 1, min(y2, h))
        colour = torch.tensor([0.1, 1.0, 0.1] if bool(track.found[k]) else [1.0, 0.9, 0.1])
        for t in range(2):   # a 2-pixel outline
            img[min(y1 + t, h - 1), x1:x2] = colour
            img[max(y2 - 1 - t, 0), x1:x2] = colour
            img[y1:y2, min(x1 + t, w - 1)] = colour
            img[y1:y2, max(x2 - 1 - t, 0)] = colour
        out.append(img)
    return torch.stack(out)
