"""The VACE sampler-side mask: pixel frames -> per-latent-frame token unions -> vace_mask and LATENT noise mask.

`core_vace_read` below is core's own mapping (comfy_extras/nodes_wan.py, WanVaceToVideo.execute in ComfyUI 0.3.75,
the lines after `vae_stride = 8`), used as the oracle the pack's tensors must agree with.
"""
import pytest
import torch

from engines.common.errors import InputError
from engines.wardrobe import vace


def core_vace_read(mask: torch.Tensor, length: int) -> torch.Tensor:
    """What core's WanVaceToVideo stores as `vace_mask` (without reference) for a [length, H, W] pixel mask."""
    latent_length = ((length - 1) // 4) + 1
    h, w = mask.shape[1] // 8, mask.shape[2] // 8
    m = mask.view(length, h, 8, w, 8).permute(2, 4, 0, 1, 3).reshape(64, length, h, w)
    m = torch.nn.functional.interpolate(m.unsqueeze(0), size=(latent_length, h, w), mode="nearest-exact")
    return m


def garment_with_sweeping_hand(length=9, h=64, w=64):
    """A garment rectangle; a hand covers its left part in every frame except frame 3 (group 1 = frames 1-4)."""
    garment = torch.zeros((length, h, w))
    garment[:, 16:48, 8:56] = 1.0
    for f in range(length):
        if f != 3:
            garment[f, 16:48, 8:24] = 0.0  # the hand hides this part of the garment
    return garment


def test_frame_arithmetic_matches_core_and_the_vae():
    assert [vace.latent_frame_count(n) for n in (1, 2, 5, 9, 10, 17, 175)] == [1, 1, 2, 3, 3, 5, 44]
    assert [vace.padded_length(n) for n in (1, 2, 5, 9, 10, 175)] == [1, 5, 5, 9, 13, 177]
    assert list(vace.frame_group(0)) == [0] and list(vace.frame_group(1)) == [1, 2, 3, 4]
    assert list(vace.frame_group(2)) == [5, 6, 7, 8]
    for length in (1, 5, 9, 13, 17, 81, 177):
        t_count = vace.latent_frame_count(length)
        index = torch.arange(length, dtype=torch.float32).view(1, 1, length)
        read = torch.nn.functional.interpolate(index, size=t_count, mode="nearest-exact").flatten().long().tolist()
        assert read == [vace.nearest_read_frame(t, length, t_count) for t in range(t_count)]
    # The documented mismatch: latent frame 0 is built from pixel frame 0 but core reads pixel frame 1.
    assert vace.nearest_read_frame(0, 9, 3) == 1 and vace.nearest_read_frame(1, 17, 5) == 5


def test_union_keeps_a_region_uncovered_for_only_one_frame_of_a_group():
    garment = garment_with_sweeping_hand()
    unions = vace.token_unions(garment)[:, ::2, ::2]  # one value per 16 x 16 token
    assert unions.shape == (3, 4, 4)
    # Latent frame 1 (frames 1-4) must regenerate the hand-covered part, uncovered only at frame 3.
    assert unions[1, 1:3, 0:4].eq(1).all()
    # Latent frames 0 and 2 never see that part uncovered: tokens fully under the hand stay kept
    # (x 8..24 spans tokens 0 and 1; token 0 also holds garment x 8..16 only under the hand).
    assert unions[0, 1:3, 0].eq(0).all() and unions[2, 1:3, 0].eq(0).all()
    assert unions[0, 1:3, 1:4].eq(1).all()
    # Rows outside the garment are never regenerated.
    assert unions[:, 0].eq(0).all() and unions[:, 3].eq(0).all()
    # Core's own reading of the raw pixel mask loses it: latent 1 reads pixel frame 4 (hand present).
    raw_read = core_vace_read(garment, 9)
    assert raw_read[0, :, 1, 2:6, 1:3].eq(0).all()


def test_snapping_covers_whole_tokens_from_a_single_pixel():
    mask = torch.zeros((1, 32, 48))
    mask[0, 17, 33] = 0.01  # one faint pixel in token (1, 2)
    unions = vace.token_unions(mask)
    expected = torch.zeros((1, 4, 6))
    expected[0, 2:4, 4:6] = 1  # the token's 2 x 2 latent cells
    assert torch.equal(unions, expected)
    pixels = vace.cells_to_pixels(unions)
    assert pixels[0, 16:32, 32:48].eq(1).all() and pixels.sum() == 256


@pytest.mark.parametrize("length", [9, 13, 17])
def test_vace_mask_is_what_core_reads_from_the_nearest_read_layout(length):
    garment = garment_with_sweeping_hand(length)
    unions = vace.token_unions(garment)
    layout = vace.nearest_read_layout(unions, length)
    assert layout.shape == garment.shape
    ours = vace.vace_mask(unions)
    assert torch.equal(core_vace_read(layout, length), ours)
    # And every latent frame holds its group's union, snapped to tokens, in all 64 channels.
    for t in range(unions.shape[0]):
        group = list(vace.frame_group(t))
        direct = (garment[group].amax(0).view(4, 16, 4, 16).amax(dim=(1, 3)) > 0).float()
        assert torch.equal(ours[0, 0, t, ::2, ::2], direct) and torch.equal(ours[0, 0, t, 1::2, 1::2], direct)
        assert torch.equal(ours[0, :, t], ours[0, :1, t].expand(64, -1, -1))


def test_reference_slot_stays_zero_in_vace_mask_and_free_in_noise_mask():
    unions = vace.token_unions(garment_with_sweeping_hand())
    plain = vace.vace_mask(unions)
    with_ref = vace.vace_mask(unions, reference_frames=1)
    assert with_ref.shape == (1, 64, 4, 8, 8)
    assert with_ref[:, :, 0].eq(0).all() and torch.equal(with_ref[:, :, 1:], plain)

    nm = vace.noise_mask(unions, reference_frames=1)
    assert nm.shape == (1, 1, 4, 8, 8)
    assert nm[0, 0, 0].eq(1).all()
    assert torch.equal(nm[0, 0, 1:], plain[0, 0])
    # Core's sampler reshapes the noise mask to the latent shape trilinearly: at the exact shape it is the identity.
    assert torch.equal(torch.nn.functional.interpolate(nm, size=nm.shape[2:], mode="trilinear"), nm)


def test_padded_video_repeats_the_last_mask_frame_and_far_off_counts_are_refused():
    mask = torch.zeros((10, 16, 32))
    mask[9, :, 16:] = 1  # only the last real frame shows the right token
    # WanVaceToVideo length 13 for 10 frames: latent frame 3 covers frames 9-12, of which only 9 exists.
    unions = vace.token_unions(mask, latent_frames=4)
    assert unions[:, 0, 2].tolist() == [0, 0, 0, 1]
    with pytest.raises(InputError, match=r"about 13 frames for a latent of 4 frames"):
        vace.token_unions(mask[:7], latent_frames=4)


def test_bad_masks_name_the_input_and_inputs_are_not_modified():
    with pytest.raises(InputError, match=r"^sampler_mask: .*multiples of 16.*got 40x32"):
        vace.token_unions(torch.zeros((3, 32, 40)), input_name="sampler_mask")
    with pytest.raises(InputError, match=r"mask: expected a MASK batch"):
        vace.token_unions(torch.zeros((32, 32)))
    with pytest.raises(InputError, match=r"at least 1 mask frame"):
        vace.token_unions(torch.zeros((0, 32, 32)))
    garment = garment_with_sweeping_hand()
    before = garment.clone()
    unions = vace.token_unions(garment)
    vace.vace_mask(unions, 1), vace.noise_mask(unions, 1), vace.nearest_read_layout(unions, 9)
    assert torch.equal(garment, before)
