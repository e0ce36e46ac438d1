"""Shield, refine, grow and combine: exact against reference implementations, finger gaps kept where promised."""
import numpy as np
import pytest
import torch
from scipy import ndimage

from engines.common.errors import InputError
from engines.wardrobe import morphology as M
from engines.wardrobe.checks import check_same_masks
from tests.fixtures.wardrobe_clip import make_clip


def _random_masks(seed=0, shape=(3, 57, 71), p=0.03):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) < p).float()


@pytest.mark.parametrize("r", [1, 2, 5, 8, 13])
def test_box_dilation_equals_repeated_3x3(r):
    m = _random_masks(r)
    assert torch.equal(M.dilate_binary(m > 0.5, r).float(), M.dilate_square_repeated(m, r))


@pytest.mark.parametrize("r,s,t", [(8, 2, 0.45), (3, 1, 0.5), (0, 0, 0.45), (5, 5, 0.2)])
def test_shield_matches_scipy_reference_on_soft_masks(r, s, t):
    g = torch.Generator().manual_seed(1)
    soft = torch.rand(2, 48, 64, generator=g) * (_random_masks(2, (2, 48, 64), 0.05) + 0.3).clamp(max=1)
    got = M.shield(soft, r, s, t)
    for i in range(2):
        ref = ndimage.grey_dilation(soft[i].numpy(), size=(2 * r + 1, 2 * r + 1), mode="constant", cval=0.0) \
            if r else soft[i].numpy()
        if s:
            ref = ndimage.grey_erosion(ref, size=(2 * s + 1, 2 * s + 1), mode="constant", cval=np.inf)
        assert np.array_equal(got[i].numpy(), (ref >= t).astype(np.float32))


def test_shield_closes_finger_gaps_so_it_is_sampler_only():
    clip = make_clip(frames=3)
    shielded = M.shield(clip["garment"], 8, 2, 0.45)
    # Every finger pixel (a hole in the garment mask) inside the panel is swallowed: the reason the lint exists.
    fingers_in_panel = (clip["hands"] > 0) & (clip["garment"].sum(0, keepdim=True) >= 0)
    gap_neighbours = M.dilate_binary(clip["gaps"] > 0, 3) & (clip["hands"] > 0)
    assert bool((shielded[gap_neighbours] == 1).all())
    assert fingers_in_panel.any()


def test_refine_defaults_keep_finger_gaps_and_never_grow():
    clip = make_clip(frames=4)
    garment = clip["garment"]
    refined = M.refine(garment)  # expand 0, feather 4, fill holes off
    assert bool((refined[clip["gaps"] > 0] > 0).all()), "a gap between fingers was lost"
    assert bool((refined[clip["hands"] > 0] == 0).all()), "the mask spread onto a finger"
    assert bool((refined[garment == 0] == 0).all())
    assert float(refined.max()) == 1.0 and bool(((refined > 0) & (refined < 1)).any())


def test_fill_holes_is_the_option_that_closes_them():
    clip = make_clip(frames=2)
    ring = torch.zeros(1, 40, 40)
    ring[0, 5:35, 5:35] = 1
    ring[0, 15:25, 15:25] = 0
    filled = M.refine(ring, feather=0, fill=True)
    assert bool((filled[0, 15:25, 15:25] == 1).all())
    assert torch.equal(M.refine(ring, feather=0), ring)
    assert clip["gaps"].sum() > 0


@pytest.mark.parametrize("px", [3, 6, -2, -4])
def test_tapered_grow_matches_distance_transform(px):
    m = torch.zeros(2, 50, 60)
    m[0, 10:30, 20:35] = 1
    m[1, 0:20, 0:12] = 1  # touches the frame edge
    got = M.grow(m, px, tapered=True)
    for i in range(2):
        b = m[i].numpy() > 0.5
        if px > 0:
            ref = ndimage.distance_transform_edt(~b) <= px
        else:
            ref = ndimage.distance_transform_edt(np.pad(b, 1, mode="edge"))[1:-1, 1:-1] > -px
        assert np.array_equal(got[i].numpy() > 0.5, ref)


def test_shrink_does_not_erode_from_the_frame_edge():
    m = torch.zeros(1, 30, 30)
    m[0, :, :10] = 1  # a garment cut by the left edge
    for tapered in (True, False):
        out = M.grow(m, -3, tapered=tapered)
        assert bool((out[0, 3:-3, 0] == 1).all())  # the left column stays
        assert bool((out[0, :, 7:] == 0).all())     # the right edge moved in by 3


def test_square_grow_and_soft_values():
    m = torch.zeros(1, 20, 20)
    m[0, 8:12, 8:12] = 0.7
    m[0, 0, 0] = 0.3  # soft value outside the grown region: kept
    out = M.grow(m, 2, tapered=False)
    assert bool((out[0, 6:14, 6:14] == 1).all()) and float(out[0, 0, 0]) == pytest.approx(0.3)
    assert bool((out[0, 15:, 15:] == 0).all())
    shrunk = M.grow(out, -1, tapered=False)
    assert float(shrunk[0, 10, 10]) == 1.0 and float(shrunk[0, 6, 6]) == 0.0


def test_combine_ops_and_broadcast():
    a = torch.tensor([[[0.0, 0.5, 1.0]]]).expand(2, 1, 3).contiguous()
    b = torch.tensor([[[1.0, 0.25, 0.5]]])
    bb = check_same_masks(a, b, "mask_a", "mask_b")
    assert torch.equal(M.combine(a, bb, "subtract")[0, 0], torch.tensor([0.0, 0.25, 0.5]))
    assert torch.equal(M.combine(a, bb, "union")[1, 0], torch.tensor([1.0, 0.5, 1.0]))
    assert torch.equal(M.combine(a, bb, "intersect")[0, 0], torch.tensor([0.0, 0.25, 0.5]))


def test_combine_refuses_mismatched_masks():
    with pytest.raises(InputError, match="mask_b: expected masks of 3x1"):
        check_same_masks(torch.zeros(2, 1, 3), torch.zeros(2, 1, 4), "mask_a", "mask_b")
    with pytest.raises(InputError, match="2 frames"):
        check_same_masks(torch.zeros(2, 1, 3), torch.zeros(3, 1, 3), "mask_a", "mask_b")


def test_inputs_are_never_modified():
    m = _random_masks(4)
    before = m.clone()
    M.shield(m), M.refine(m, 2, 3, True), M.grow(m, 3), M.grow(m, -2, tapered=False)
    assert torch.equal(m, before)


@pytest.mark.parametrize("expand,feather,fill", [(0, 4.0, False), (5, 3.0, True), (-3, 6.0, False), (2, 0.0, True)])
def test_refine_on_the_mask_box_equals_the_full_frame(expand, feather, fill):
    m = torch.zeros(3, 70, 90)
    m[0, 20:40, 30:60] = 1
    m[0, 28:32, 40:45] = 0  # a hole
    m[1, 0:15, 70:90] = 0.8  # at the frame corner
    ref = m
    if fill:
        ref = M.fill_holes(ref)
    if expand:
        ref = M.grow(ref, expand, tapered=True)
    if feather:
        ref = M.feather_inward(ref, feather)
    assert torch.equal(M.refine(m, expand, feather, fill), ref)
