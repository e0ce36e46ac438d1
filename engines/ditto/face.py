"""Face detection and landmarks with Ditto's auxiliary ONNX models (InsightFace det_10g + 2d106det, LivePortrait
landmark203), without InsightFace or MediaPipe installed.

- det_10g (SCRFD, decoded by `engines/common/scrfd.py`): the frame letterboxed top-left into 512x512 (sizes
  truncated, as upstream), fed as BGR (x - 127.5) / 128; score threshold 0.5, NMS 0.4 with upstream's +1-pixel box
  rule; the largest box wins.
- 2d106det: a 192x192 crop scaled to 1.5x the box, raw 0-255 BGR; 212 values in [-1, 1] -> (p + 1) * 96.
- landmark203: a 224x224 crop (scale 1.5, vy -0.1) from the 106 points, RGB / 255; the last output, x 224.
"""
from __future__ import annotations

from typing import Optional

import cv2
import numpy as np

from ..common import scrfd
from . import crop

DET_SIZE = 512


class FaceLandmarker:
    def __init__(self, det_session, lmk106_session, lmk203_session, det_threshold: float = 0.5,
                 nms_threshold: float = 0.4):
        self.det = det_session
        self.lmk106 = lmk106_session
        self.lmk203 = lmk203_session
        self.det_threshold = det_threshold
        self.nms_threshold = nms_threshold
        self._det_in = det_session.get_inputs()[0].name
        self._l106_in = lmk106_session.get_inputs()[0].name
        self._l203_in = lmk203_session.get_inputs()[0].name

    # --- detection -------------------------------------------------------------------------------------------
    def detect(self, rgb: np.ndarray) -> np.ndarray:
        """(n, 5) boxes [x1, y1, x2, y2, score] in frame pixels, best first after NMS."""
        h, w = rgb.shape[:2]
        ratio = h / w
        if ratio > 1:
            nh, nw = DET_SIZE, int(DET_SIZE / ratio)
        else:
            nw, nh = DET_SIZE, int(DET_SIZE * ratio)
        scale = nh / h
        canvas = np.zeros((DET_SIZE, DET_SIZE, 3), np.uint8)
        canvas[:nh, :nw] = cv2.resize(rgb, (nw, nh))
        outs = self.det.run(None, {self._det_in: scrfd.blob(canvas, "bgr")})
        boxes, scores, _ = scrfd.decode(outs, DET_SIZE, DET_SIZE, self.det_threshold)
        boxes = boxes / scale
        if len(scores) == 0:
            return np.zeros((0, 5), np.float32)
        order = scores.argsort()[::-1]
        dets = np.concatenate([boxes, scores[:, None]], axis=1)[order]
        return dets[scrfd.nms(dets, dets[:, 4], self.nms_threshold, pixel_inclusive=True)]

    # --- landmarks -------------------------------------------------------------------------------------------
    def landmarks106(self, rgb: np.ndarray, box: np.ndarray) -> np.ndarray:
        size = 192
        w, h = box[2] - box[0], box[3] - box[1]
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        s = size / (max(w, h) * 1.5)
        m = np.array([[s, 0, size / 2 - s * cx], [0, s, size / 2 - s * cy]], np.float64)
        patch = cv2.warpAffine(rgb, m, (size, size), borderValue=0.0)
        blob = patch[:, :, ::-1].astype(np.float32).transpose(2, 0, 1)[None]
        pred = np.asarray(self.lmk106.run(None, {self._l106_in: np.ascontiguousarray(blob)})[0]).reshape(-1, 2)
        pred = (pred[-106:] + 1) * (size // 2)
        return crop.apply(pred, cv2.invertAffineTransform(m))

    def landmarks203(self, rgb: np.ndarray, pts: np.ndarray) -> np.ndarray:
        m_o2c = crop.crop_transform(pts, 224, scale=1.5, vy_ratio=-0.1)
        patch = crop.warp(rgb, m_o2c, 224)
        inp = (patch.astype(np.float32) / 255.0).transpose(2, 0, 1)[None]
        out = self.lmk203.run(None, {self._l203_in: np.ascontiguousarray(inp)})[-1]
        lmk = np.asarray(out)[0].reshape(-1, 2) * 224
        return crop.apply(lmk, np.linalg.inv(m_o2c))

    def __call__(self, rgb: np.ndarray, last_lmk203: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
        """203 landmarks of the largest face, or None when no face is found. With `last_lmk203` (tracking, as
        upstream does for loops) the detector still has to confirm a face in the frame."""
        dets = self.detect(rgb)
        if len(dets) == 0:
            return None
        if last_lmk203 is not None:
            return self.landmarks203(rgb, last_lmk203)
        areas = (dets[:, 2] - dets[:, 0]) * (dets[:, 3] - dets[:, 1])
        box = dets[int(np.argmax(areas))]
        return self.landmarks203(rgb, self.landmarks106(rgb, box))
