"""Face crop geometry (LivePortrait's similarity crop, as Ditto uses it).

From landmarks, an axis from the eye centre to the lip centre fixes the rotation; the box is the landmarks' extent
in that rotated frame, squared and scaled, shifted along the axis by ``vy_ratio`` of its size. Matrices are 3x3:
``M_o2c`` maps frame pixels to crop pixels and ``M_c2o`` back (OpenCV's pixel-centre convention).
"""
from __future__ import annotations

import math

import cv2
import numpy as np


def eye_lip_axis(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(eye centre, lip centre) from 106 (InsightFace) or 203 (LivePortrait) landmarks."""
    if len(pts) == 106:
        left, right = pts[[33, 35, 40, 39]].mean(0), pts[[87, 89, 94, 93]].mean(0)
        lip = (pts[52] + pts[61]) / 2
    elif len(pts) == 203:
        left, right = pts[[0, 6, 12, 18]].mean(0), pts[[24, 30, 36, 42]].mean(0)
        lip = (pts[48] + pts[66]) / 2
    else:
        raise ValueError(f"expected 106 or 203 landmarks, got {len(pts)}")
    return (left + right) / 2, lip


def crop_transform(pts: np.ndarray, dsize: int, scale: float, vy_ratio: float, rotate: bool = True) -> np.ndarray:
    """3x3 M_o2c of the square crop of side `dsize` around the landmarks."""
    pts = pts.astype(np.float64)
    eye, lip = eye_lip_axis(pts)
    uy = lip - eye
    length = np.linalg.norm(uy)
    uy = uy / length if length > 1e-3 else np.array([0.0, 1.0])
    ux = np.array([uy[1], -uy[0]])
    angle = math.acos(np.clip(ux[0], -1, 1)) * (-1 if ux[1] < 0 else 1)
    rot = np.stack([ux, uy])
    c0 = pts.mean(0)
    r = (pts - c0) @ rot.T
    lo, hi = r.min(0), r.max(0)
    mid = (lo + hi) / 2
    size = max(hi - lo) * scale
    center = c0 + ux * mid[0] + uy * mid[1] + uy * (vy_ratio * size)
    s = dsize / size
    if rotate:
        cos, sin = math.cos(angle), math.sin(angle)
    else:
        cos, sin = 1.0, 0.0
    half = dsize / 2
    m = np.array([[s * cos, s * sin, half - s * (cos * center[0] + sin * center[1])],
                  [-s * sin, s * cos, half - s * (-sin * center[0] + cos * center[1])],
                  [0.0, 0.0, 1.0]])
    return m


def warp(img: np.ndarray, m_o2c: np.ndarray, dsize: int) -> np.ndarray:
    return cv2.warpAffine(img, m_o2c[:2].astype(np.float64), (dsize, dsize), flags=cv2.INTER_LINEAR)


def apply(pts: np.ndarray, m: np.ndarray) -> np.ndarray:
    return pts @ m[:2, :2].T + m[:2, 2]
