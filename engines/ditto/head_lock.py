"""Head lock for full-body action loops: the head stays on the body.

On a loop, Ditto drives only the expression; the pose comes from each source frame, so the head already follows
the body. The expression offsets (63 = 21 keypoints x 3) can still carry a rigid turn of the whole face: a small
rotation of the keypoints about their centre is a linear displacement ``w x (k - c)``, three directions in the
63-d space. Head lock projects every expression offset onto the complement of that subspace (the posts' subspace
projection: ``d - B B^T d`` with ``B`` an orthonormal basis of the three infinitesimal rotations of the source's
posed keypoints, restricted to the keypoints the motion drives), and, on a still image, also keeps pitch, yaw and
roll at the source's. What is left moves the lips and
eyes, not the head.

`rigid_angles` measures what it removes: the Kabsch rotation between source and driven keypoints, as pitch/yaw/roll
in degrees per frame.
"""
from __future__ import annotations

import numpy as np


def rotation_basis(points: np.ndarray, mask: np.ndarray = None) -> np.ndarray:
    """Orthonormal basis (63, 3) of the displacements that rotate `points` (21 x 3) about their centre.

    With `mask` (63 flags), only the masked coordinates move: the basis of the rotations' restriction to them.
    """
    pts = np.asarray(points, np.float64).reshape(-1, 3)
    centred = pts - pts.mean(axis=0)
    cols = np.stack([np.cross(axis, centred).reshape(-1) for axis in np.eye(3)], axis=1)  # d/dw R(w) p at w = 0
    if mask is not None:
        cols = cols * np.asarray(mask, np.float64).reshape(-1, 1)
    q, r = np.linalg.qr(cols)
    keep = np.abs(np.diag(r)) > 1e-9  # a mask of too few points spans fewer directions
    q = q[:, keep]
    if mask is not None:
        q[np.asarray(mask).reshape(-1) == 0] = 0.0  # exactly: rounding must not move an undriven keypoint
    return q


def lock_expression(offsets: np.ndarray, points: np.ndarray, mask: np.ndarray = None) -> np.ndarray:
    """(n, 63) expression offsets without their rigid-rotation part about `points` (one (21, 3) or one per row)."""
    offsets = np.asarray(offsets, np.float64).reshape(len(offsets), -1)
    points = np.asarray(points, np.float64).reshape(-1, 63)
    out = np.empty_like(offsets)
    basis = rotation_basis(points[0], mask) if len(points) == 1 else None
    for i, row in enumerate(offsets):
        b = basis if basis is not None else rotation_basis(points[i], mask)
        out[i] = row - b @ (b.T @ row)
    return out.astype(np.float32)


def rigid_angles(source: np.ndarray, driven: np.ndarray) -> np.ndarray:
    """(n, 3) pitch, yaw, roll in degrees of the best rigid rotation taking `source` to `driven` keypoints.

    Both are (n, 21, 3) (or one (21, 3) source for all frames); Kabsch on centred points, then the angles of
    R = Rz(roll) Ry(yaw) Rx(pitch).
    """
    driven = np.asarray(driven, np.float64)
    source = np.broadcast_to(np.asarray(source, np.float64), driven.shape)
    out = np.zeros((len(driven), 3))
    for i, (a, b) in enumerate(zip(source, driven)):
        a, b = a - a.mean(0), b - b.mean(0)
        u, _, vt = np.linalg.svd(a.T @ b)
        d = np.sign(np.linalg.det(vt.T @ u.T))
        r = vt.T @ np.diag([1.0, 1.0, d]) @ u.T  # b ~ r @ a
        out[i] = [np.degrees(np.arctan2(r[2, 1], r[2, 2])), np.degrees(np.arcsin(np.clip(-r[2, 0], -1, 1))),
                  np.degrees(np.arctan2(r[1, 0], r[0, 0]))]
    return out
