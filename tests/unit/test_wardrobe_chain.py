"""The whole decoupled chain on the synthetic clip, with a stand-in inpainter that hallucinates skin everywhere it
may (the posts' duplicated thumbs, at their worst): hands and everything outside the pixel mask stay the source.

Chain (as in the shipped workflows): hands -> grow 6 (tapered) -> garment - grown hands -> refine (expand 0,
feather 4) -> subject crop -> [shield -> token grid -> stand-in sampler] -> uncrop (record's pixel mask) -> re-paste
hands (feather 4).
"""
import pytest
import torch

from engines.wardrobe import crop as C
from engines.wardrobe import morphology as M
from engines.wardrobe import repaste as R
from engines.wardrobe import tokengrid as TG
from tests.fixtures.wardrobe_clip import make_clip

SKIN = torch.tensor([0.92, 0.72, 0.60])


def stand_in_inpainter(crops, grid_mask, grid):
    """Tests only: paints every pixel of the token-grid (latent) mask with skin, like a sampler hallucinating
    fingers in every block it may touch."""
    px = TG.grid_to_pixels(grid_mask, grid, crops.shape[0])
    return torch.where(px[..., None] > 0, SKIN.expand_as(crops), crops)


def run_chain(clip, grid_name="wan2.1", compositor_gets_grid=False):
    grid = TG.PRESETS[grid_name]
    images, garment, hands = clip["images"], clip["garment"], clip["hands"]
    pixel = M.refine(M.combine(garment, M.grow(hands, 6, tapered=True), "subtract"), expand=0, feather=4)
    crops, crop_mask, record = C.crop(images, pixel, padding=8, multiple=grid.block)
    sampler = M.shield(crop_mask, 8, 2, 0.45)
    T = grid.latent_frames_for(images.shape[0])
    h, w = crops.shape[1] // grid.spatial_stride, crops.shape[2] // grid.spatial_stride
    grid_mask = TG.snap_to_grid(sampler, grid, T, h, w)
    painted = stand_in_inpainter(crops, grid_mask, grid)
    if compositor_gets_grid:  # the posts' bug: the compositor mask came from the blockified mask
        px = TG.grid_to_pixels(grid_mask, grid, crops.shape[0])
        boxed = torch.stack([C._cut(torch.zeros(record.frame_size), *record.box_origins[i], *record.box_size)
                             for i in range(images.shape[0])])
        record = C.CropRecord(record.frame_size, record.frame_count, record.box_size, record.box_origins,
                              record.crop_size, torch.nn.functional.interpolate(px[:, None], size=record.box_size)[:, 0]
                              + boxed, record.feather, record.source_fingerprint)
    out = C.uncrop(images, painted, record)
    out = R.repaste(out, images, hands, feather=4)
    pixel_full = torch.stack([C.full_frame_mask(record, i) for i in range(images.shape[0])])
    return out, pixel_full, grid_mask


@pytest.mark.parametrize("grid_name", ["wan2.1", "minimax-h3"])
def test_hands_and_outside_pixels_equal_the_source(grid_name):
    clip = make_clip(frames=9 if grid_name == "wan2.1" else 22, height=160, width=128)
    out, pixel_full, grid_mask = run_chain(clip, grid_name)
    src = clip["images"]
    hands = clip["hands"] > 0
    assert torch.equal(out[hands], src[hands]), "a hand pixel changed"
    outside = pixel_full == 0
    assert torch.equal(out[outside], src[outside]), "a pixel outside the compositor mask changed"
    changed = (out != src).any(-1)
    assert int(changed.sum()) > 0.5 * float(clip["garment"].sum()) * 0.5, "the stand-in sampler did not paint"
    # No block edge of the token grid outside the garment: every changed pixel is garment.
    assert not bool((changed & (clip["garment"] == 0)).any())
    # The sampler's mask really was coarser than the garment (blocks reached over the hands).
    assert float(grid_mask.sum()) > 0


def test_finger_gaps_survive():
    clip = make_clip(frames=9)
    out, _, _ = run_chain(clip)
    gaps = clip["gaps"] > 0
    # No gap between fingers turns into skin: fingers stay separate (no webbed or duplicated fingers).
    skin_like = ((out - SKIN).abs().max(-1).values < 1e-6)
    assert not bool((skin_like & gaps).any())
    assert bool(gaps.any())


def test_the_posts_miswiring_fails_these_checks():
    """Same chain, but the compositor blends with the token-grid mask: hallucinated skin lands outside the garment
    and in the gaps. Proves the checks above can fail."""
    clip = make_clip(frames=9)
    out, _, _ = run_chain(clip, compositor_gets_grid=True)
    src = clip["images"]
    changed = (out != src).any(-1)
    skin_like = ((out - SKIN).abs().max(-1).values < 1e-6)
    assert bool((changed & (clip["garment"] == 0) & (clip["hands"] == 0)).any())
    assert bool((skin_like & (clip["gaps"] > 0)).any())
