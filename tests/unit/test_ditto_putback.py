"""Putback with grid_sample on the frame's device against upstream's OpenCV procedure."""
import cv2
import numpy as np
import torch

from engines.ditto import crop, putback


def opencv_reference(frame_u8, render_u8, m_c2o):
    """Upstream PutBack: mask and render warped with cv2.warpAffine (bilinear), blended in float, clipped."""
    h, w = frame_u8.shape[:2]
    mask = putback.feather_mask(512)
    mask_w = cv2.warpAffine(mask, m_c2o[:2], (w, h), flags=cv2.INTER_LINEAR).clip(0, 1)[:, :, None]
    render_w = cv2.warpAffine(render_u8, m_c2o[:2], (w, h), flags=cv2.INTER_LINEAR)
    return np.clip(mask_w * render_w + (1 - mask_w) * frame_u8, 0, 255)


def smooth_image(h, w, seed):
    rng = np.random.default_rng(seed)
    img = cv2.GaussianBlur(rng.uniform(0, 255, (h, w, 3)).astype(np.float32), (0, 0), 6)
    img = (img - img.min()) / (img.max() - img.min()) * 255
    return img.round().astype(np.uint8)


def test_putback_matches_opencv_within_one_level():
    frames, renders, mo2c, mc2o, refs = [], [], [], [], []
    for i, (angle, scale) in enumerate([(0.0, 1.0), (0.3, 0.8), (-0.2, 1.3)]):
        frame = smooth_image(300, 280, i)
        render = smooth_image(512, 512, 10 + i)
        # a rotated, scaled crop-to-frame similarity, partly outside the frame for the last one
        m_c2o = np.array([[0.0, 0.0, 20.0 + 40 * i], [0.0, 0.0, 30.0], [0, 0, 1]])
        m_c2o[:2, :2] = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]) * 0.45 * scale
        frames.append(frame), renders.append(render), mc2o.append(m_c2o), mo2c.append(np.linalg.inv(m_c2o))
        refs.append(opencv_reference(frame, render, m_c2o))
    crops = torch.from_numpy(np.stack(renders)).permute(0, 3, 1, 2).float() / 255
    out = putback.putback(torch.from_numpy(np.stack(frames)), crops, np.stack(mo2c), np.stack(mc2o))
    diff = np.abs(out.numpy() * 255 - np.stack(refs))
    assert diff.max() <= 1.0, diff.max()
    assert diff.mean() < 0.3      # OpenCV rounds the warped render to uint8; this path keeps floats


def test_feather_mask_profile():
    m = putback.feather_mask(512)
    assert m.shape == (512, 512) and m[256, 256] == 1.0 and m[26:486, 26:486].min() == 1.0
    assert m[0, 256] == 0.0 and m[256, 0] == 0.0 and m[0, 0] == 0.0
    np.testing.assert_allclose(m[:26, 256], np.linspace(0, 1, 26), rtol=1e-6)


def test_crop_transform_round_trip():
    pts = np.random.default_rng(0).uniform(50, 150, (106, 2))
    m = crop.crop_transform(pts, 512, 2.3, -0.125)
    back = crop.apply(crop.apply(pts, m), np.linalg.inv(m))
    np.testing.assert_allclose(back, pts, atol=1e-9)


def _scene(n=2):
    """Frames, rendered crops and affines: a face about 230 px wide inside 300x280 frames."""
    frames, renders, mo2c, mc2o = [], [], [], []
    for i in range(n):
        frames.append(smooth_image(300, 280, 20 + i))
        render = smooth_image(512, 512, 30 + i).astype(np.float32)
        render[..., 0] = np.clip(render[..., 0] * 0.7 + 60, 0, 255)        # a colour cast to correct
        renders.append(render.astype(np.uint8))
        m_c2o = np.array([[0.45, -0.05 * i, 25.0 + 10 * i], [0.05 * i, 0.45, 30.0], [0, 0, 1]])
        mc2o.append(m_c2o), mo2c.append(np.linalg.inv(m_c2o))
    crops = torch.from_numpy(np.stack(renders)).permute(0, 3, 1, 2).float() / 255
    return torch.from_numpy(np.stack(frames)), crops, np.stack(mo2c), np.stack(mc2o)


def _warped(mask, m_c2o, h, w):
    return np.stack([cv2.warpAffine(mask, m[:2], (w, h), flags=cv2.INTER_LINEAR) for m in m_c2o])


def test_mouth_weight_is_the_posts_region_softened():
    w = putback.mouth_weight(512)
    assert w[345, 256] == 1.0 and w[280 + 16, 181 + 16] == 1.0
    assert w[:280 - 16].max() == 0.0 and w[410 + 16:].max() == 0.0            # beyond the 31 px kernel: 0
    assert w[:, :181 - 16].max() == 0.0 and w[:, 331 + 16:].max() == 0.0
    assert 0.3 < w[280, 256] < 0.7                                             # the edge is half way


def test_blends_leave_every_frame_pixel_outside_the_face_mask_bit_identical():
    frames, crops, mo2c, mc2o = _scene()
    feather = putback.putback(frames, crops, mo2c, mc2o)
    # the warped mask itself: black frames, white renders -> out = 0 + m * (1 - 0) = m
    alpha = putback.putback(torch.zeros_like(frames), torch.ones_like(crops), mo2c, mc2o)[..., 0]
    outside = alpha == 0
    assert 0.3 < outside.float().mean() < 0.9              # body and background around a face
    base = frames.float() * (1.0 / 255.0)                  # the putback's own uint8 -> float (a multiply)
    for mode in ("feather", "reinhard", "poisson"):
        out = putback.putback(frames, crops, mo2c, mc2o, blend=mode)
        assert torch.equal(out[outside], base[outside]), mode
        if mode != "feather":
            assert not torch.equal(out, feather), mode


def test_reinhard_recolours_only_the_mouth_and_moves_it_to_the_frame():
    frames, crops, mo2c, mc2o = _scene()
    h, w = frames.shape[1:3]
    feather = putback.putback(frames, crops, mo2c, mc2o)
    lab = putback.putback(frames, crops, mo2c, mc2o, blend="reinhard")
    mouth = _warped(putback.mouth_weight(512), mc2o, h, w)
    # one pixel of margin: OpenCV's and grid_sample's bilinear footprints differ by rounding at the very edge
    away = torch.from_numpy(np.stack([cv2.dilate((m > 0).astype(np.uint8), np.ones((5, 5), np.uint8)) == 0
                                      for m in mouth]))
    assert torch.equal(lab[away], feather[away])                 # eyes, nose, brow: the feather result exactly
    core = torch.from_numpy(mouth >= 0.99)
    base = frames.float() / 255.0
    # the mouth's mean colour moves towards the frame's there (the render has a red cast)
    assert (lab[core].mean(0) - base[core].mean(0)).abs().sum() < (feather[core].mean(0) - base[core].mean(0)).abs().sum()


def test_an_unknown_blend_is_refused():
    import pytest

    frames, crops, mo2c, mc2o = _scene(1)
    with pytest.raises(ValueError, match="blend"):
        putback.putback(frames, crops, mo2c, mc2o, blend="multiply")
