"""Re-paste layer: protected pixels equal the source exactly, the ramp stays outside, nothing else changes."""
import pytest
import torch

from engines.common.errors import InputError
from engines.wardrobe import morphology as M
from engines.wardrobe import repaste as R


def test_region_work_equals_the_full_frame_formula():
    g = torch.Generator().manual_seed(0)
    res, src = torch.rand(3, 60, 70, 3, generator=g), torch.rand(3, 60, 70, 3, generator=g)
    m = torch.zeros(3, 60, 70)
    m[0, 20:30, 30:40] = 1
    m[2, 0:5, 0:8] = 1  # at the frame corner; frame 1 has nothing to protect
    out = R.repaste(res, src, m, feather=4.0, expand=2)
    alpha = M.feather_outward(M.grow(m, 2, True), 4.0)[..., None]
    ref = torch.where(alpha >= 1, src, torch.where(alpha > 0, res + (src - res) * alpha, res))
    assert torch.equal(out, ref)
    assert torch.equal(out[1], res[1])
    assert torch.equal(out[0, 20:30, 30:40], src[0, 20:30, 30:40])
    far = torch.ones(60, 70, dtype=torch.bool)
    far[12:38, 22:48] = False
    assert torch.equal(out[0][far], res[0][far])


def test_bad_inputs():
    with pytest.raises(InputError, match="source_images"):
        R.repaste(torch.rand(2, 8, 8, 3), torch.rand(2, 8, 9, 3), torch.zeros(2, 8, 8))
    with pytest.raises(InputError, match="protected_mask: expected 2 mask frames"):
        R.repaste(torch.rand(2, 8, 8, 3), torch.rand(2, 8, 8, 3), torch.zeros(3, 8, 8))
