"""Paste-back: mouth-only mask rows, exact window resizes, untouched pixels outside the mask, loop indexing."""
import math

import pytest
import torch
import torch.nn.functional as F

from engines.musetalk.blend import (MouthEllipse, crop_resize, mouth_mask, paste_face, resize_matrix,
                                    source_indices)


def test_mouth_mask_is_zero_above_the_nose_base_and_below_the_chin():
    mask = mouth_mask()
    assert mask.shape == (256, 256)
    assert torch.count_nonzero(mask[:159]) == 0        # rows <= 158: nose, cheeks
    assert torch.count_nonzero(mask[234:]) == 0        # rows >= 234: chin, jaw
    assert mask[196, 127] == 1.0                       # full opacity on the lips
    assert mask.min() >= 0 and mask.max() <= 1
    assert torch.count_nonzero(mask[:, :60]) == 0 and torch.count_nonzero(mask[:, 194:]) == 0


def test_mouth_mask_feathers_smoothly():
    mask = mouth_mask(MouthEllipse(feather=0.5))
    column = mask[:, 127]
    inside = column[159:234]
    # rises monotonically to the centre and falls after it: no step inside the feather
    centre = 196 - 159
    assert (inside[1:centre + 1] >= inside[:centre]).all()
    assert (inside[centre + 1:] <= inside[centre:-1]).all()
    assert (inside[1:] - inside[:-1]).abs().max() < 0.1


def test_mask_rows_follow_a_moved_ellipse():
    mask = mouth_mask(MouthEllipse(cy=180, ry=30))
    assert torch.count_nonzero(mask[:151]) == 0 and torch.count_nonzero(mask[210:]) == 0
    assert torch.count_nonzero(mask[151:210]) > 0


@pytest.mark.parametrize("src,dst", [(256, 512), (256, 100), (37, 256), (256, 256)])
def test_resize_matrix_rows_sum_to_one_and_match_bilinear_upscaling(src, dst):
    r = resize_matrix(src, dst)
    assert r.shape == (dst, src)
    assert torch.allclose(r.sum(dim=1), torch.ones(dst))
    if dst >= src:
        x = torch.rand(1, 1, src, 5)
        ref = F.interpolate(x, size=(dst, 5), mode="bilinear", align_corners=False)[0, 0]
        assert torch.allclose(r @ x[0, 0], ref, atol=1e-5)


def test_crop_resize_shape_and_range():
    frame = torch.rand(60, 80, 3)
    crop = crop_resize(frame, (10, 5, 50, 55))
    assert crop.shape == (3, 256, 256)
    assert crop.min() >= 0 and crop.max() <= 1


@pytest.mark.parametrize("box", [(20, 30, 120, 150), (0, 0, 64, 64), (50, 10, 230, 190), (100, 100, 140, 160)])
def test_paste_leaves_every_pixel_outside_the_mask_bit_identical(box):
    torch.manual_seed(0)
    frame = torch.rand(200, 240, 3)
    source = frame.clone()
    face = torch.rand(3, 256, 256)
    mask = mouth_mask()
    paste_face(frame, face, mask, box)
    x1, y1, x2, y2 = box
    alpha = resize_matrix(256, y2 - y1) @ mask @ resize_matrix(256, x2 - x1).T
    outside = torch.ones(200, 240, dtype=torch.bool)
    outside[y1:y2, x1:x2] = alpha == 0
    assert torch.equal(frame[outside], source[outside])
    changed = ~outside
    assert changed.any() and not torch.equal(frame[changed], source[changed])
    # rows above the scaled nose base are never touched (less the resize filter's reach when shrinking)
    reach = max(256 / (y2 - y1), 1.0)
    nose = y1 + int(math.floor((158 - reach) * (y2 - y1) / 256))
    assert torch.equal(frame[:nose], source[:nose])


def test_paste_equals_a_full_resize_and_blend():
    torch.manual_seed(1)
    frame = torch.rand(120, 100, 3)
    face = torch.rand(3, 256, 256)
    mask = mouth_mask()
    box = (10, 20, 90, 110)
    expected = frame.clone()
    ry, rx = resize_matrix(256, 90), resize_matrix(256, 80)
    fg = (ry @ face @ rx.T).permute(1, 2, 0)
    a = (ry @ mask @ rx.T)[..., None]
    region = expected[20:110, 10:90]
    expected[20:110, 10:90] = region + a * (fg - region)
    paste_face(frame, face, mask, box)
    assert torch.allclose(frame, expected, atol=1e-6)


def test_loop_index_follows_video_time_modulo_the_loop():
    assert source_indices(7, 25, 25, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    # output at 50 fps over a 25 fps loop: each loop frame shows twice
    assert source_indices(6, 50, 25, 4).tolist() == [0, 0, 1, 1, 2, 2]
    # a 30 fps loop under 25 fps output: floor(k / 25 * 30)
    assert source_indices(6, 25, 30, 100).tolist() == [math.floor(k / 25 * 30) for k in range(6)]
    # a window later in the clip (streaming) gives the same indices as the whole
    assert source_indices(5, 25, 25, 4, start=6).tolist() == source_indices(11, 25, 25, 4).tolist()[6:]


def test_ping_pong_plays_back_and_forth():
    assert source_indices(9, 25, 25, 4, "ping-pong").tolist() == [0, 1, 2, 3, 2, 1, 0, 1, 2]
    assert source_indices(3, 25, 25, 1, "ping-pong").tolist() == [0, 0, 0]


def test_unknown_loop_mode_is_refused():
    with pytest.raises(ValueError):
        source_indices(3, 25, 25, 4, "shuffle")


def test_resize_matrix_cache_is_bounded_by_bytes_and_evicts_the_least_recently_used():
    from engines.musetalk.blend import RESIZE_CACHE_BYTES, ResizeMatrixCache, _MATRICES, _build_resize_matrix
    one = 256 * 300 * 4                                 # a [300, 256] float32 matrix
    cache = ResizeMatrixCache(max_bytes=3 * one)
    a = cache.get(256, 300)
    assert torch.equal(a, _build_resize_matrix(256, 300)) and cache.nbytes == one
    cache.get(300, 256)
    cache.get(256, 300)                                 # a is now the most recently used
    assert cache.get(256, 300) is a and cache.hits == 2
    cache.get(256, 301)                                 # 3 * one + 1024 bytes: over the cap, the LRU (300, 256) goes
    assert cache.evictions == 1 and cache.nbytes <= cache.max_bytes
    assert (300, 256) not in cache._entries and (256, 300) in cache._entries
    for dst in range(400, 440):                         # many sizes never pass the cap
        cache.get(256, dst)
        assert cache.nbytes <= cache.max_bytes and cache.nbytes == sum(m.nbytes for m in cache._entries.values())
    huge = ResizeMatrixCache(max_bytes=one - 1).get(256, 300)   # larger than the whole cap: built, not kept
    assert torch.equal(huge, a)
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    # the module's cache (the one resize_matrix uses) is bounded by bytes, not by a count
    assert _MATRICES.max_bytes == RESIZE_CACHE_BYTES <= 64 << 20
    with pytest.raises(ValueError, match="max_bytes"):
        ResizeMatrixCache(max_bytes=-1)
