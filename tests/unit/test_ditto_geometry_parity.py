"""Crop geometry, the putback mask and the keypoint drive against reference values recorded by running upstream's
own functions (antgroup/ditto-talkinghead e9191cf: utils/crop.py, utils/get_mask.py, MotionStitch without its
network) on the same inputs (tests/data/ditto_upstream_geometry.json)."""
import json
from pathlib import Path

import numpy as np
import pytest

from engines.ditto import crop, keypoints, putback

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "ditto_upstream_geometry.json").read_text())


def landmarks(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = np.stack([200 + 60 * np.cos(np.linspace(0, 6.28, n)), 240 + 80 * np.sin(np.linspace(0, 6.28, n))], 1)
    return (base + rng.normal(0, 3, (n, 2))).astype(np.float32)


def source_info(seed: int = 5) -> dict:
    rng = np.random.default_rng(seed)
    info = {k: rng.standard_normal((1, n)).astype(np.float32) for k, n in
            (("pitch", 66), ("yaw", 66), ("roll", 66), ("t", 3), ("exp", 63), ("kp", 63))}
    info["exp"] *= 0.02
    info["kp"] *= 0.3
    info["scale"] = np.array([[1.4]], np.float32)
    return info


def motion_rows(seed: int = 6) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((3, 265)).astype(np.float32) * 0.5


@pytest.mark.parametrize("n, dsize, scale, vy", [(203, 512, 2.3, -0.125), (106, 224, 1.5, -0.1)])
def test_crop_matrix_matches_upstream(n, dsize, scale, vy):
    m = crop.crop_transform(landmarks(n, n), dsize, scale, vy)
    np.testing.assert_allclose(m[:2], np.array(REFERENCE[f"crop_{n}"]), rtol=1e-5, atol=1e-3)


def test_mask_matches_upstream():
    m = putback.feather_mask(512)
    ref = REFERENCE["mask"]
    assert abs(float(m.sum()) - ref["sum"]) < 1e-2
    np.testing.assert_allclose(m[10], ref["row10"], atol=1e-6)
    np.testing.assert_allclose(np.diag(m), ref["diag"], atol=1e-6)


@pytest.mark.parametrize("case", ["portrait_eyes", "portrait_no_eyes_offsets"])
def test_keypoint_drive_matches_upstream_motion_stitch(case):
    settings = {"portrait_eyes": keypoints.DriveSettings(drive_eyes=True),
                "portrait_no_eyes_offsets": keypoints.DriveSettings(drive_eyes=False, delta_pitch=3.0, delta_yaw=-4.0,
                                                                    delta_roll=2.0)}[case]
    info = source_info()
    _, kp_d = keypoints.driven_keypoints(motion_rows(), info, settings)
    ref = REFERENCE[case]
    np.testing.assert_allclose(kp_d, np.array(ref["x_d"]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(keypoints.source_keypoints(info)[0], np.array(ref["x_s"])[0], rtol=1e-4, atol=1e-5)
