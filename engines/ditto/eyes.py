"""Eye openness and gaze of a 512 face crop without MediaPipe.

Upstream measures both on MediaPipe's 478-point face mesh (FaceLandmarker task). MediaPipe's wheel pulls
``opencv-contrib-python``, which clashes with the headless OpenCV ComfyUI installs, so the pack does not depend on
it. Instead the same two measures are taken from what registration already has:
- openness: upstream's formula, the sum of three lid gaps over the eye width, on the 24-point eye contours of the
  203 landmarks (corners at contour points 0 and 12; lid pairs 6/18, 3/21, 9/15);
- eye ball: the iris centre as the darkness-weighted centroid of the pixels inside the eye contour, turned into
  upstream's "ball move" vector (direction from the eye centre minus the eye axis, times the distance, in
  crop-normalised units, z = 0), interleaved left/right into 6 values.
The values feed the motion model's condition only; they are close to, not equal to, MediaPipe's.
"""
from __future__ import annotations

import cv2
import numpy as np

EYE_CONTOURS = (range(0, 24), range(24, 48))
CORNERS = (0, 12)
LID_PAIRS = ((6, 18), (3, 21), (9, 15))


def _unit(v: np.ndarray) -> np.ndarray:
    return v / (np.linalg.norm(v) + 1e-8)


def eye_measures(crop_rgb: np.ndarray, lmk203_crop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(open (2,), ball (6,)) for one crop with its landmarks in crop pixels."""
    size = crop_rgb.shape[0]
    gray = cv2.cvtColor(crop_rgb, cv2.COLOR_RGB2GRAY).astype(np.float32) / 255.0
    opens, moves = [], []
    for contour in EYE_CONTOURS:
        pts = lmk203_crop[list(contour)].astype(np.float32)
        outer, inner = pts[CORNERS[0]], pts[CORNERS[1]]
        width = np.linalg.norm(outer - inner)
        gaps = sum(np.linalg.norm(pts[a] - pts[b]) for a, b in LID_PAIRS)
        opens.append(gaps / (width + 1e-8))
        mask = np.zeros(gray.shape, np.uint8)
        cv2.fillPoly(mask, [np.round(pts).astype(np.int32)], 1)
        ys, xs = np.nonzero(mask)
        centre = (outer + inner) / 2
        if len(xs):
            wgt = (1.0 - gray[ys, xs]) ** 4 + 1e-6
            ball = np.array([(xs * wgt).sum() / wgt.sum(), (ys * wgt).sum() / wgt.sum()], np.float32)
        else:
            ball = centre
        ball_n, centre_n = ball / size, centre / size
        dist = np.linalg.norm(ball_n - centre_n)
        move = (_unit(ball_n - centre_n) - _unit(outer - inner)) * dist
        moves.append(np.array([move[0], move[1], 0.0], np.float32))
    ball6 = np.stack(moves, axis=-1).reshape(-1)          # (3, 2) -> [Lx, Rx, Ly, Ry, Lz, Rz]
    return np.asarray(opens, np.float32), ball6.astype(np.float32)
