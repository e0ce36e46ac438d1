"""SCRFD face detection from a local ONNX file (e.g. insightface's det_10g.onnx / scrfd_*.onnx) via onnxruntime.

SCRFD is anchor-free per stride: for strides 8, 16, 32 (or 5 strides) it outputs a score, four distances to the box
sides and optionally ten keypoint offsets per anchor, two anchors per grid cell at the cell's corner, all in units
of the stride. The image is scaled to fit the network input (aspect kept, top-left), normalised as
``(pixel − 127.5) / 128`` in RGB order, and the decoded boxes are scaled back and filtered by non-maximum
suppression.

Boxes are returned in the pack's face-box convention (that of a frontal Haar detector: brows to below the mouth),
derived from the five keypoints (eyes, nose, mouth corners) when the model has them, else from the box.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from ..common.errors import InputError

# Where the frontal-box convention puts the eye line and the mouth line, in box heights from its top (measured on
# the Haar box of a frontal portrait): the box is built from the keypoints by inverting these.
EYE_LINE = 0.37
MOUTH_LINE = 0.83


def anchor_centres(height: int, width: int, stride: int, num_anchors: int) -> np.ndarray:
    """``[height·width·num_anchors, 2]`` (x, y) of each anchor: cell corners, row-major, anchors consecutive."""
    ys, xs = np.mgrid[:height, :width]
    centres = (np.stack([xs, ys], axis=-1).reshape(-1, 2) * stride).astype(np.float32)
    return np.repeat(centres, num_anchors, axis=0) if num_anchors > 1 else centres


def nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> list[int]:
    """Indices kept by greedy non-maximum suppression (highest score first)."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size:
        i = order[0]
        keep.append(int(i))
        xx1, yy1 = np.maximum(x1[i], x1[order[1:]]), np.maximum(y1[i], y1[order[1:]])
        xx2, yy2 = np.minimum(x2[i], x2[order[1:]]), np.minimum(y2[i], y2[order[1:]])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)
        iou = inter / np.maximum(areas[i] + areas[order[1:]] - inter, 1e-9)
        order = order[1:][iou <= threshold]
    return keep


def decode(outputs: list, input_h: int, input_w: int,
           threshold: float) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Raw SCRFD outputs -> ``(boxes [K, 4], scores [K], keypoints [K, 5, 2] or None)`` in network-input pixels."""
    outs = [o[0] if o.ndim == 3 else o for o in outputs]
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


def frontal_box(box: np.ndarray, kps: Optional[np.ndarray]) -> np.ndarray:
    """Convert an SCRFD detection to the frontal-detector box convention (see module docstring)."""
    if kps is not None:
        eyes_y = float(kps[:2, 1].mean())
        mouth_y = float(kps[3:5, 1].mean())
        h = max((mouth_y - eyes_y) / (MOUTH_LINE - EYE_LINE), 1.0)
        cx = float(np.mean([kps[:2, 0].mean(), kps[3:5, 0].mean()]))
        top = eyes_y - EYE_LINE * h
        return np.array([cx - h / 2, top, cx + h / 2, top + h], np.float32)
    x1, y1, x2, y2 = box                       # forehead-to-chin box: drop the forehead and the chin
    h = y2 - y1
    return np.array([x1, y1 + 0.15 * h, x2, y2 - 0.05 * h], np.float32)


class ScrfdDetector:
    """A callable face detector: RGB uint8 ``[H, W, 3]`` -> ``[K, 5]`` frontal boxes + scores."""

    name = "scrfd"

    def __init__(self, path: os.PathLike | str, input_size: int = 640, score_threshold: float = 0.5,
                 nms_threshold: float = 0.4):
        import onnxruntime as ort

        try:
            available = ort.get_available_providers()
            providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]
            self.session = ort.InferenceSession(str(path), providers=providers)
        except Exception as exc:  # onnxruntime's own errors are not user-facing text
            raise InputError("detector", "a readable SCRFD .onnx file",
                             f"'{path}' ({type(exc).__name__}: {exc})") from None
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        shape = list(inp.shape)
        fixed = len(shape) == 4 and all(isinstance(v, int) and v > 0 for v in shape[2:])
        self.input_h, self.input_w = (int(shape[2]), int(shape[3])) if fixed else (input_size, input_size)
        self.score_threshold = score_threshold
        self.nms_threshold = nms_threshold

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        import cv2

        h, w = rgb.shape[:2]
        scale = min(self.input_h / h, self.input_w / w)
        nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
        canvas = np.zeros((self.input_h, self.input_w, 3), np.float32)
        interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
        canvas[:nh, :nw] = cv2.resize(rgb, (nw, nh), interpolation=interpolation)
        blob = ((canvas - 127.5) / 128.0).transpose(2, 0, 1)[None].astype(np.float32)
        outputs = self.session.run(None, {self.input_name: blob})
        boxes, scores, kps = decode(outputs, self.input_h, self.input_w, self.score_threshold)
        if len(boxes) == 0:
            return np.zeros((0, 5), np.float32)
        keep = nms(boxes, scores, self.nms_threshold)
        out = [np.append(frontal_box(boxes[i] / scale, None if kps is None else kps[i] / scale), scores[i])
               for i in keep]
        return np.stack(out).astype(np.float32)
