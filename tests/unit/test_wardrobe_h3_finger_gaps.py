"""What the shipped MiniMax H3 wardrobe graph's compositor mask does to the gaps between fingers.

The mask is built as the graph builds it (garment minus Grow Hands, then Pixel Mask (compositor)), with the values
read from workflows/api/wardrobe_minimax_h3.api.json, on the synthetic clip whose gaps are known (3-6 px). The
oracle is geometry, not the pack: growing each finger by a disk of radius r closes every gap up to 2r wide. So at
the shipped growth the gaps are outside the mask (they keep the source), and with the hands subtracted as they are
(Grow Hands 0) they are inside it (repainted): docs/wardrobe.md says which.
"""
from engines.wardrobe import morphology
from tests.fixtures import h3_wardrobe
from tests.fixtures.wardrobe_clip import GAP_WIDTHS, make_clip


def _compositor_mask(clip, grow_px):
    grow = h3_wardrobe.shipped_inputs("Grow Hands")
    refine = h3_wardrobe.shipped_inputs("Pixel Mask (compositor)")
    grown = morphology.grow(clip["hands"], grow_px, grow["tapered_corners"])
    return morphology.refine(morphology.combine(clip["garment"], grown, "subtract"), refine["expand"],
                             refine["feather"], refine["fill_holes"], refine["tapered_corners"])


def test_the_shipped_growth_closes_the_finger_gaps_and_no_growth_keeps_them():
    clip = make_clip(frames=3, height=h3_wardrobe.HEIGHT, width=h3_wardrobe.WIDTH, seed=1)
    gaps = clip["gaps"] > 0.5
    shipped = h3_wardrobe.shipped_inputs("Grow Hands")["expand"]
    assert 2 * shipped >= max(GAP_WIDTHS), "the shipped growth no longer closes the gaps: update docs/wardrobe.md"
    assert float(_compositor_mask(clip, shipped)[gaps].max()) == 0.0
    exact = _compositor_mask(clip, 0)[gaps]
    assert float((exact > 0).float().mean()) > 0.9
