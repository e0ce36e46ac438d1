"""SCRFD face detection from a local ONNX file (e.g. insightface's det_10g.onnx / scrfd_*.onnx) via onnxruntime.

The decoding and the non-maximum suppression are `engines/common/scrfd.py` (shared with Ditto's landmarker). Here
the image is scaled to fit the network input (aspect kept, top-left, rounded sizes, area interpolation when
shrinking), fed in RGB order, and the boxes are scaled back; NMS measures boxes as continuous (not +1 pixel).

Boxes are returned in the pack's face-box convention (that of a frontal Haar detector: brows to below the mouth),
derived from the five keypoints (eyes, nose, mouth corners) when the model has them, else from the box.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
import torch

from ..common.onnx import onnx_session
from ..common.scrfd import blob, decode, nms

# Where the frontal-box convention puts the eye line and the mouth line, in box heights from its top (measured on
# the Haar box of a frontal portrait): the box is built from the keypoints by inverting these.
EYE_LINE = 0.37
MOUTH_LINE = 0.83


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
                 nms_threshold: float = 0.4, device: Optional[torch.device] = None):
        self.session = onnx_session(path, device, input_name="detector", expected="a readable SCRFD .onnx file")
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
        outputs = self.session.run(None, {self.input_name: blob(canvas, "rgb")})
        boxes, scores, kps = decode(outputs, self.input_h, self.input_w, self.score_threshold)
        if len(boxes) == 0:
            return np.zeros((0, 5), np.float32)
        keep = nms(boxes, scores, self.nms_threshold)
        out = [np.append(frontal_box(boxes[i] / scale, None if kps is None else kps[i] / scale), scores[i])
               for i in keep]
        return np.stack(out).astype(np.float32)
