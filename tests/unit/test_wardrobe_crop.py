"""Subject crop / uncrop: one box per clip, edges handled, pixels outside the record's mask untouched."""
import pytest
import torch

from engines.common.errors import InputError
from engines.wardrobe import crop as C
from tests.fixtures.wardrobe_clip import make_clip


def test_round_trip_without_inpainting_is_identity():
    clip = make_clip(frames=5)
    crops, cmask, rec = C.crop(clip["images"], clip["garment"], padding=8, multiple=16)
    assert crops.shape[1] % 16 == 0 and crops.shape[2] % 16 == 0
    assert torch.equal(C.uncrop(clip["images"], crops, rec), clip["images"])


def test_outside_the_pixel_mask_is_bit_identical():
    clip = make_clip(frames=5)
    crops, _, rec = C.crop(clip["images"], clip["garment"], padding=8, multiple=16, feather=6)
    out = C.uncrop(clip["images"], torch.zeros_like(crops), rec)  # paint everything black
    changed = (out != clip["images"]).any(-1)
    for i in range(5):
        full = C.full_frame_mask(rec, i)
        assert not bool((changed[i] & (full == 0)).any())
        assert bool((changed[i] == (C.full_frame_mask(rec, i, alpha=True) > 0)).all())


def test_fixed_box_holds_every_frame_and_the_multiple():
    clip = make_clip(frames=6)
    _, _, rec = C.crop(clip["images"], clip["garment"], padding=4, multiple=32, mode="fixed")
    assert len(set(rec.box_origins)) == 1 and rec.box_size[0] % 32 == 0 and rec.box_size[1] % 32 == 0


def test_tracked_box_contains_each_frames_garment():
    m = torch.zeros(7, 100, 120)
    for i in range(7):
        m[i, 30:50, 10 + 12 * i:30 + 12 * i] = 1
    _, cm, rec = C.crop(torch.rand(7, 100, 120, 3), m, padding=2, multiple=8, mode="tracked", smooth_frames=5)
    for i in range(7):
        y0, x0 = rec.box_origins[i]
        assert y0 <= 30 and y0 + rec.box_size[0] >= 50 and x0 <= 10 + 12 * i and x0 + rec.box_size[1] >= 30 + 12 * i
        assert float(rec.blend_masks[i].sum()) == float(m[i].sum())  # nothing of the mask lost


def test_box_at_the_frame_edge_and_larger_than_the_frame():
    img = torch.rand(3, 40, 50, 3)
    m = torch.zeros(3, 40, 50)
    m[:, 30:40, 0:12] = 1  # garment in the bottom-left corner
    crops, cm, rec = C.crop(img, m, padding=6, multiple=16)
    y0, x0 = rec.box_origins[0]
    assert y0 + rec.box_size[0] <= 40 and x0 == 0  # clamped inside the frame
    assert torch.equal(C.uncrop(img, crops, rec), img)
    # A box bigger than the frame: padded with repeated edge pixels, never written back.
    m2 = torch.ones(3, 40, 50)
    crops2, cm2, rec2 = C.crop(img, m2, padding=8, multiple=32)
    assert rec2.box_size == (64, 96) and rec2.box_origins[0][0] < 0
    assert float(rec2.blend_masks[0].sum()) == 40 * 50  # the repeated border is not in the blend mask
    out = C.uncrop(img, torch.zeros_like(crops2), rec2)
    assert out.shape == img.shape and float(out.abs().sum()) < float(img.abs().sum())


def test_upscale_keeps_the_source_resolution_mask():
    clip = make_clip(frames=3)
    crops, cm, rec = C.crop(clip["images"], clip["garment"], padding=0, multiple=16, upscale_to=256)
    assert max(crops.shape[1:3]) >= 256 and rec.blend_masks.shape[1:] == rec.box_size
    out = C.uncrop(clip["images"], crops, rec)
    outside = torch.stack([C.full_frame_mask(rec, i) for i in range(3)]) == 0
    assert torch.equal(out[outside], clip["images"][outside])


def test_bad_inputs():
    clip = make_clip(frames=4)
    with pytest.raises(InputError, match="mask: expected at least one non-zero|garment mask with at least one"):
        C.crop(clip["images"], torch.zeros(4, 160, 128))
    with pytest.raises(InputError, match="mask: expected 4 mask frames"):
        C.crop(clip["images"], clip["garment"][:3])
    with pytest.raises(InputError, match="mask: expected masks of 128x160"):
        C.crop(clip["images"], clip["garment"][:, :100])
    crops, _, rec = C.crop(clip["images"], clip["garment"])
    with pytest.raises(InputError, match="cropped_images: expected 4 inpainted crops"):
        C.uncrop(clip["images"], crops[:3], rec)
    with pytest.raises(InputError, match="source_images: expected the same source frames"):
        C.uncrop(torch.rand_like(clip["images"]), crops, rec)
    with pytest.raises(InputError, match="source_images: expected the 4 source frames"):
        C.uncrop(clip["images"][:2], crops, rec)


def test_empty_frames_borrow_the_previous_box():
    m = torch.zeros(4, 60, 60)
    m[1, 10:20, 10:20] = 1
    m[3, 30:40, 30:40] = 1
    _, _, rec = C.crop(torch.rand(4, 60, 60, 3), m, padding=0, multiple=1, mode="tracked", smooth_frames=1)
    # frame 0 (leading, empty) takes the next box; frame 2 the previous one
    assert rec.box_origins[0] == rec.box_origins[1] == rec.box_origins[2] == (10, 10)
    assert rec.box_origins[3] == (30, 30)
    assert float(rec.blend_masks[2].sum()) == 0.0


def _inpainted(clip, crops, rec, new_colour=(0.1, 0.4, 0.2), cast=(0.06, -0.03, 0.04)):
    """What a sampler returns: the crop with the garment re-dressed in `new_colour` and a colour cast everywhere."""
    out = crops.clone()
    for i in range(crops.shape[0]):
        m = torch.nn.functional.interpolate(rec.blend_masks[i][None, None], size=crops.shape[1:3], mode="nearest")[0, 0]
        out[i] = torch.where(m[..., None] > 0, torch.tensor(new_colour) + 0.5 * (crops[i] - crops[i].mean()), out[i])
    return (out + torch.tensor(cast)).clamp(0, 1)


@pytest.mark.parametrize("blend", ["feather", "reinhard", "poisson"])
def test_every_blend_leaves_body_hands_and_background_bit_identical(blend):
    clip = make_clip(frames=3)
    crops, _, rec = C.crop(clip["images"], clip["garment"], padding=12, multiple=16, feather=4)
    out = C.uncrop(clip["images"], _inpainted(clip, crops, rec), rec, blend=blend)
    for i in range(3):
        outside = C.full_frame_mask(rec, i, alpha=True) == 0
        assert torch.equal(out[i][outside], clip["images"][i][outside])
        hands = clip["hands"][i] > 0
        assert hands.any() and torch.equal(out[i][hands], clip["images"][i][hands])    # the hands cut out
        assert not torch.equal(out[i], clip["images"][i])


def test_reinhard_removes_the_samplers_cast_and_keeps_the_new_garment():
    clip = make_clip(frames=2)
    crops, _, rec = C.crop(clip["images"], clip["garment"], padding=12, multiple=16, feather=0)
    truth = C.uncrop(clip["images"], _inpainted(clip, crops, rec, cast=(0.0, 0.0, 0.0)), rec)   # no cast
    gen = _inpainted(clip, crops, rec)
    feather = C.uncrop(clip["images"], gen, rec)
    lab = C.uncrop(clip["images"], gen, rec, blend="reinhard")
    for i in range(2):
        inside = C.full_frame_mask(rec, i, alpha=True) >= 1
        err_feather = (feather[i][inside] - truth[i][inside]).abs().mean()
        err_lab = (lab[i][inside] - truth[i][inside]).abs().mean()
        assert err_lab < 0.5 * err_feather                       # the cast (0.13 in all) is mostly gone
        assert (lab[i][inside] - clip["images"][i][inside]).abs().mean() > 0.1   # and the garment is still new


def test_an_unknown_blend_is_refused_by_name():
    clip = make_clip(frames=2)
    crops, _, rec = C.crop(clip["images"], clip["garment"], padding=8, multiple=16)
    with pytest.raises(InputError, match="blend"):
        C.uncrop(clip["images"], crops, rec, blend="multiply")
