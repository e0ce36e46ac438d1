"""SCRFD (InsightFace det_10g / scrfd_*.onnx) output decoding and non-maximum suppression, shared by MuseTalk's
face tracker and Ditto's face landmarker (both run the same det_10g file).

SCRFD is anchor-free per stride: for strides 8, 16, 32 (or 5 strides) it outputs a score, four distances to the box
sides and optionally ten keypoint offsets per anchor, two anchors per grid cell at the cell's corner, all in units
of the stride. Each caller letterboxes the frame its own way (the two upstreams differ in resize rounding and in
channel order, which their parity tests pin), then calls `blob`, runs the session, `decode` and `nms`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .errors import InputError


def blob(canvas: np.ndarray, channel_order: str = "rgb") -> np.ndarray:
    """A letterboxed ``[H, W, 3]`` RGB canvas -> the network input ``[1, 3, H, W]`` float32, ``(x − 127.5) / 128``.

    ``channel_order="bgr"`` feeds the channels reversed, as InsightFace's own pipeline (and so Ditto upstream) does;
    MuseTalk's tracker feeds RGB.
    """
    if channel_order not in ("rgb", "bgr"):
        raise ValueError(f"channel_order must be 'rgb' or 'bgr', not {channel_order!r}")
    pixels = canvas[:, :, ::-1] if channel_order == "bgr" else canvas
    return np.ascontiguousarray(((pixels.astype(np.float32) - 127.5) / 128.0).transpose(2, 0, 1)[None])


def anchor_centres(height: int, width: int, stride: int, num_anchors: int) -> np.ndarray:
    """``[height·width·num_anchors, 2]`` (x, y) of each anchor: cell corners, row-major, anchors consecutive."""
    ys, xs = np.mgrid[:height, :width]
    centres = (np.stack([xs, ys], axis=-1).reshape(-1, 2) * stride).astype(np.float32)
    return np.repeat(centres, num_anchors, axis=0) if num_anchors > 1 else centres


def decode(outputs: list, input_h: int, input_w: int,
           threshold: float) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Raw SCRFD outputs (in the file's order: scores per stride, boxes per stride, keypoints per stride) ->
    ``(boxes [K, 4], scores [K], keypoints [K, 5, 2] or None)`` in network-input pixels, score >= threshold."""
    outs = [np.asarray(o) for o in outputs]
    outs = [o[0] if o.ndim == 3 else o for o in outs]
    n = len(outs)
    if n not in (6, 9, 10, 15):
        raise InputError("detector", "an SCRFD model with 6, 9, 10 or 15 outputs", f"{n} outputs")
    fmc = 3 if n in (6, 9) else 5
    strides = [8, 16, 32] if fmc == 3 else [8, 16, 32, 64, 128]
    use_kps = n in (9, 15)
    boxes, scores, kps = [], [], []
    for i, stride in enumerate(strides):
        h, w = input_h // stride, input_w // stride
        s = outs[i].reshape(-1)
        num_anchors = max(1, s.shape[0] // (h * w))
        centres = anchor_centres(h, w, stride, num_anchors)
        d = outs[i + fmc].reshape(-1, 4) * stride
        keep = np.nonzero(s >= threshold)[0]
        c = centres[keep]
        boxes.append(np.concatenate([c - d[keep, :2], c + d[keep, 2:]], axis=1))
        scores.append(s[keep])
        if use_kps:
            k = outs[i + 2 * fmc].reshape(-1, 5, 2) * stride
            kps.append(c[:, None, :] + k[keep])
    boxes_a = np.concatenate(boxes).astype(np.float32)
    scores_a = np.concatenate(scores).astype(np.float32)
    return boxes_a, scores_a, (np.concatenate(kps).astype(np.float32) if use_kps else None)


def nms(boxes: np.ndarray, scores: np.ndarray, threshold: float, pixel_inclusive: bool = False) -> list[int]:
    """Indices kept by greedy non-maximum suppression, highest score first (ties keep their input order).

    ``pixel_inclusive`` measures a box as ``x2 − x1 + 1`` pixels wide (the integer-pixel rule InsightFace and Ditto
    upstream use); off, as the continuous ``x2 − x1`` (MuseTalk's tracker). The rule changes which near-threshold
    overlaps survive, so each caller keeps the one its parity was measured with.
    """
    x1, y1, x2, y2 = np.asarray(boxes)[:, :4].T
    one = 1 if pixel_inclusive else 0
    areas = (x2 - x1 + one) * (y2 - y1 + one)
    order = np.argsort(-np.asarray(scores), kind="stable")
    keep = []
    while order.size:
        i = order[0]
        keep.append(int(i))
        xx1, yy1 = np.maximum(x1[i], x1[order[1:]]), np.maximum(y1[i], y1[order[1:]])
        xx2, yy2 = np.minimum(x2[i], x2[order[1:]]), np.minimum(y2[i], y2[order[1:]])
        inter = np.clip(xx2 - xx1 + one, 0, None) * np.clip(yy2 - yy1 + one, 0, None)
        iou = inter / np.maximum(areas[i] + areas[order[1:]] - inter, 1e-9)
        order = order[1:][iou <= threshold]
    return keep
