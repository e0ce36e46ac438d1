"""The sampler's mask lands exactly on the token grid of real core latent shapes, incl. uneven frame counts."""
import math

import pytest
import torch

from engines.common.errors import InputError
from engines.wardrobe import tokengrid as TG


def wan21_latent_shape(frames, height, width):
    """Core's Wan 2.1 latent (EmptyHunyuanLatentVideo / WanImageToVideo / VAE Encode): 16 ch, 1 + (F-1)//4, /8."""
    return (1, 16, (frames - 1) // 4 + 1, height // 8, width // 8)


def ltxv_latent_shape(frames, height, width):
    return (1, 128, (frames - 1) // 8 + 1, height // 32, width // 32)


def h3_latent_shapes(frames, height, width):
    """Core's MiniMax H3 AV latent: frames snapped up to 17k+5, video [1, 24, 5k+2, H/16, W/16], audio at 40 Hz."""
    n = max(5, frames)
    while n % 17 != 5:
        n += 1
    t = 2 if n <= 5 else ((n - 5) // 17) * 5 + 2
    return (1, 24, t, height // 16, width // 16), (1, 32, 2, round(n / 24 * 40))


# Core's Wan VAE temporal compression, as comfy/sd.py declares it.
WAN_DOWNSCALE = (lambda a: max(0, math.floor((a + 3) / 4)), 8, 8)


def _is_on_grid(mask_thw, patch):
    T, h, w = mask_thw.shape
    for y in range(0, h, patch):
        for x in range(0, w, patch):
            block = mask_thw[:, y:y + patch, x:x + patch]
            if not bool((block == block[:, :1, :1]).all()):
                return False
    return True


@pytest.mark.parametrize("frames", [9, 13, 175, 174, 12])
def test_wan21_shapes_and_groups(frames):
    H, W = 96, 64
    shape = wan21_latent_shape(frames, H, W)
    grid = TG.grid_from_vae(WAN_DOWNSCALE, 2)
    assert grid.block == 16 and grid.latent_frames_for(frames) == shape[2]
    g = torch.Generator().manual_seed(frames)
    masks = (torch.rand(frames, H, W, generator=g) > 0.995).float()
    out = TG.snap_to_grid(masks, grid, shape[2], shape[3], shape[4])
    assert out.shape == shape[2:]
    assert _is_on_grid(out, 2)
    # Each latent frame is exactly the union of its group's pixel frames, snapped to 16 px tokens.
    for k, (a, b) in enumerate(TG.frame_groups(grid, shape[2], frames)):
        union = (masks[a:b] > 0.5).any(0).float()
        tokens = torch.nn.functional.max_pool2d(union[None, None], 16)[0, 0]
        assert torch.equal(out[k], tokens.repeat_interleave(2, 0).repeat_interleave(2, 1))
    groups = TG.frame_groups(grid, shape[2], frames)
    assert groups[0] == (0, 1) and groups[-1][1] == frames  # uneven last group takes the remaining frames


def test_region_uncovered_for_one_frame_of_a_group_is_regenerated():
    grid = TG.PRESETS["wan2.1"]
    masks = torch.zeros(9, 32, 32)
    masks[6, 20, 20] = 1  # only frame 6 (group 2: frames 5-8)
    out = TG.snap_to_grid(masks, grid, 3, 4, 4)
    assert out[2].sum() == 4 and out[0].sum() == 0 and out[1].sum() == 0
    assert bool((out[2, 2:4, 2:4] == 1).all())


def test_minimax_h3_cycle_175_frames():
    video, audio = h3_latent_shapes(175, 128, 96)
    grid = TG.PRESETS["minimax-h3"]
    assert grid.block == 32 and video[2] == 52 == grid.latent_frames_for(175)
    groups = TG.frame_groups(grid, video[2], 175)
    assert groups[:7] == [(0, 1), (1, 5), (5, 9), (9, 13), (13, 17), (17, 18), (18, 22)]
    assert groups[-1] == (171, 175)
    masks = torch.zeros(175, 128, 96)
    masks[17, 40, 40] = 1
    out = TG.snap_to_grid(masks, grid, video[2], video[3], video[4])
    assert out.sum() == 4 and out[5].sum() == 4 and _is_on_grid(out, 2)
    am = TG.audio_mask(audio, regenerate=False)
    assert am.shape == (1, 1, 2, audio[3]) and float(am.abs().sum()) == 0.0
    assert float(TG.audio_mask(audio, regenerate=True).min()) == 1.0


def test_minimax_h3_padded_clip():
    video, _ = h3_latent_shapes(170, 64, 64)  # 170 -> 175 frames, 52 latent frames
    groups = TG.frame_groups(TG.PRESETS["minimax-h3"], video[2], 170)
    assert groups[-1] == (169, 170) and len(groups) == 52


def test_ltxv_grid():
    shape = ltxv_latent_shape(17, 64, 96)
    grid = TG.PRESETS["ltxv"]
    masks = torch.zeros(17, 64, 96)
    masks[16, 63, 95] = 1
    out = TG.snap_to_grid(masks, grid, shape[2], shape[3], shape[4])
    assert out.shape == (3, 2, 3) and out[2, 1, 2] == 1 and out.sum() == 1


def test_coverage_threshold():
    grid = TG.PRESETS["wan2.1"]
    masks = torch.zeros(1, 16, 32)
    masks[0, :4, :16] = 1  # 25 % of the first token
    masks[0, :, 16:] = 1   # all of the second
    any_px = TG.snap_to_grid(masks, grid, 1, 2, 4)
    half = TG.snap_to_grid(masks, grid, 1, 2, 4, coverage=0.5)
    assert any_px.sum() == 8 and half.sum() == 4 and bool((half[0, :, 2:] == 1).all())


def test_uneven_token_at_the_edge():
    grid = TG.PRESETS["wan2.1"]
    masks = torch.zeros(1, 24, 24)  # 3x3 latent cells: the last token row/column holds one cell
    masks[0, 20, 20] = 1
    out = TG.snap_to_grid(masks, grid, 1, 3, 3)
    assert out[0, 2, 2] == 1 and out.sum() == 1


def test_mismatches_are_refused_not_resized():
    grid = TG.PRESETS["wan2.1"]
    with pytest.raises(InputError, match="mask: expected masks of 64x96 pixels"):
        TG.snap_to_grid(torch.zeros(9, 90, 64), grid, 3, 12, 8)
    with pytest.raises(InputError, match="about 9 frames for a latent of 3 frames"):
        TG.snap_to_grid(torch.zeros(20, 96, 64), grid, 3, 12, 8)
    with pytest.raises(InputError, match="got 3 frames"):
        TG.frame_groups(grid, 5, 3)


def test_empty_mask_gives_an_all_keep_grid():
    out = TG.snap_to_grid(torch.zeros(5, 32, 32), TG.PRESETS["wan2.1"], 2, 4, 4)
    assert out.shape == (2, 4, 4) and float(out.sum()) == 0.0


def test_grid_to_pixels_and_preview():
    grid = TG.PRESETS["wan2.1"]
    masks = torch.zeros(5, 32, 32)
    masks[3, 1, 1] = 1
    gm = TG.snap_to_grid(masks, grid, 2, 4, 4)
    px = TG.grid_to_pixels(gm, grid, 5)
    assert px.shape == (5, 32, 32) and bool((px[1:, :16, :16] == 1).all()) and px[0].sum() == 0
    prev = TG.preview(gm, grid, 5, torch.rand(5, 32, 32, 3))
    assert prev.shape == (2, 32, 32, 3) and float(prev.max()) <= 1.0
    assert TG.noise_mask_5d(gm).shape == (1, 1, 2, 4, 4)
