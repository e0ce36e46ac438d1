"""Window overlap fusion, smoothing, emotion condition and the keypoint drive of the motion stage."""
import numpy as np

from engines.ditto import keypoints
from engines.ditto import motion as ditto_motion


def test_fuse_blends_overlap_and_appends_the_rest():
    seq_frames, overlap = 8, 3
    valid = seq_frames - overlap
    result = np.zeros((8, 2), np.float32)
    window = np.ones((8, 2), np.float32)
    out = ditto_motion.fuse(result.copy(), window, overlap, valid)
    assert out.shape == (8 + valid, 2)
    np.testing.assert_allclose(out[5:8, 0], [0.0, 1 / 3, 2 / 3], rtol=1e-6)   # alpha = k / overlap
    np.testing.assert_array_equal(out[8:], 1.0)
    np.testing.assert_array_equal(out[:5], 0.0)


def test_mean_smooth_matches_upstream_loop_and_skips_expression():
    rng = np.random.default_rng(0)
    seq = rng.standard_normal((12, 265)).astype(np.float32)
    want = seq.copy()
    for i in range(3, 9):
        lo, hi = max(0, i - 1), min(12, i + 2)
        want[i, :202] = seq[lo:hi, :202].mean(0)
    got = ditto_motion.mean_smooth(seq.copy(), 3, 9, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[:, 202:], seq[:, 202:])


def test_emotion_vector_is_upstream_soft_one_hot():
    v = ditto_motion.emotion_vector(ditto_motion.NEUTRAL)
    assert ditto_motion.EMOTIONS[4] == "neutral" and abs(v.sum() - 1) < 1e-6
    assert abs(v[4] - 0.99765) < 1e-4 and np.allclose(v[[0, 1, 2, 3, 5, 6, 7]], v[0])


def test_condition_layout():
    info = {"eye_open": np.ones((3, 2), np.float32), "eye_ball": np.full((3, 6), 2, np.float32),
            "kp": np.full((3, 63), 3, np.float32)}
    cond = ditto_motion.build_condition(np.zeros((5, 1024), np.float32), info, 4, eye_f0_mode=False)
    assert cond.shape == (5, 1103)
    assert np.all(cond[:, 1032:1034] == 1) and np.all(cond[:, 1034:1040] == 2) and np.all(cond[:, 1040:] == 3)


def test_mirror_index_ping_pongs():
    assert ditto_motion.mirror_index(np.arange(8), 3).tolist() == [0, 1, 2, 2, 1, 0, 0, 1]


def test_savgol_touches_pose_only():
    rng = np.random.default_rng(1)
    seq = rng.standard_normal((30, 265)).astype(np.float32)
    out = ditto_motion.savgol_pose(seq, 7)
    np.testing.assert_array_equal(out[:, 0], seq[:, 0])
    np.testing.assert_array_equal(out[:, 202:], seq[:, 202:])
    assert np.abs(np.diff(out[:, 1:202], axis=0)).mean() < np.abs(np.diff(seq[:, 1:202], axis=0)).mean()


def test_degrees_and_identity_transform():
    logits = np.full((1, 66), -50.0, np.float32)
    logits[0, 33] = 50.0                       # bin 33 -> 33 * 3 - 97.5 = 1.5 degrees
    assert abs(keypoints.bins_to_degrees(logits)[0] - 1.5) < 1e-4
    r = keypoints.rotation(np.zeros(1), np.zeros(1), np.zeros(1))
    np.testing.assert_allclose(r[0], np.eye(3), atol=1e-7)
    kp = np.arange(63, dtype=np.float32)[None] / 63
    x = keypoints.transform(kp, np.zeros(1), np.zeros(1), np.zeros(1), np.array([[0.1, 0.2, 0.3]]), np.zeros((1, 63)),
                            np.array([[2.0]]))
    np.testing.assert_allclose(x[0, :, 0], kp.reshape(21, 3)[:, 0] * 2 + 0.1, rtol=1e-6)
    np.testing.assert_allclose(x[0, :, 2], kp.reshape(21, 3)[:, 2] * 2, rtol=1e-6)   # tz unused


def test_relative_drive_of_a_portrait_keeps_frame_zero_at_the_source():
    rng = np.random.default_rng(2)
    info = {k: rng.standard_normal((1, n)).astype(np.float32) for k, n in
            (("pitch", 66), ("yaw", 66), ("roll", 66), ("t", 3), ("exp", 63), ("kp", 63))}
    info["scale"] = np.array([[1.5]], np.float32)
    motion = rng.standard_normal((4, 265)).astype(np.float32)
    src, kp = keypoints.driven_keypoints(motion, info, keypoints.DriveSettings(drive_eyes=False))
    assert src.tolist() == [0, 0, 0, 0]
    np.testing.assert_allclose(kp[0], keypoints.source_keypoints(info)[0], rtol=1e-4, atol=1e-5)
    assert not np.allclose(kp[1], kp[0])
