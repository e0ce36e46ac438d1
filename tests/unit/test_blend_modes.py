"""Paste-back blends (engines/common/blend_modes.py) and the MuseTalk mouth paster with each of them: colour
transfer lands on the frame's statistics, Poisson follows the frame's border values, and every pixel outside the
blend region is the source frame bit for bit."""
import numpy as np
import pytest
import torch

from engines.common import blend_modes as B
from engines.musetalk.blend import MouthPaster, mouth_mask


def _texture(h, w, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(3, 1, 1, generator=g) * 0.5 + 0.25
    yy, xx = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
    return (base + 0.1 * torch.sin(8 * xx + 5 * yy)[None] + 0.03 * torch.rand(3, h, w, generator=g)).clamp(0, 1)


def _alpha(h, w):
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    r = torch.sqrt(((xx - w / 2) / (w / 3)) ** 2 + ((yy - h / 2) / (h / 3)) ** 2)
    return (1 - r).clamp(0, 0.3) / 0.3


def test_lab_round_trip():
    rgb = torch.rand(3, 20, 20, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(B.lab_to_rgb(B.rgb_to_lab(rgb)), rgb.double(), atol=1e-6)
    white = B.rgb_to_lab(torch.ones(3, 1, 1))
    assert white[0].item() == pytest.approx(100.0, abs=1e-3) and abs(white[1].item()) < 1e-3


@pytest.mark.parametrize("mode", B.MODES)
def test_outside_the_region_the_frame_is_bit_identical(mode):
    bg, fg, alpha = _texture(60, 80, 0), _texture(60, 80, 1), _alpha(60, 80)
    out = B.composite(fg, bg, alpha, mode)
    outside = alpha == 0
    assert outside.any() and (~outside).any()
    assert torch.equal(out[:, outside], bg[:, outside])
    assert not torch.equal(out[:, ~outside], bg[:, ~outside])


def test_reinhard_moves_the_patch_colours_to_the_frames():
    bg = _texture(60, 80, 0)
    fg = (bg * torch.tensor([1.0, 0.8, 0.7]).view(3, 1, 1) + 0.05).clamp(0, 1)  # a reddish, brighter mouth
    alpha = _alpha(60, 80)
    matched = B.reinhard_transfer(fg, bg, alpha)
    w = alpha > 0
    lab_bg, lab_fg, lab_m = B.rgb_to_lab(bg), B.rgb_to_lab(fg), B.rgb_to_lab(matched)
    for c in range(3):
        before = abs(lab_fg[c][w].mean() - lab_bg[c][w].mean())
        after = abs(lab_m[c][w].mean() - lab_bg[c][w].mean())
        assert after < 0.15 * before + 0.2
    assert torch.equal(B.reinhard_transfer(fg, bg, torch.zeros(60, 80)), fg)


def test_poisson_takes_the_frames_level_and_keeps_the_patchs_detail():
    bg = _texture(60, 80, 0)
    fg = (bg + 0.2).clamp(0, 1)  # the same detail, brighter
    alpha = _alpha(60, 80)
    inside = alpha > 0.5
    poisson = B.composite(fg, bg, alpha, "poisson")
    feather = B.composite(fg, bg, alpha, "feather")
    assert (feather - bg)[:, inside].abs().mean() > 0.15  # a feathered paste keeps the offset
    assert (poisson - bg)[:, inside].abs().mean() < 0.03   # Poisson follows the frame's border values


@pytest.mark.parametrize("mode", B.MODES)
def test_mouth_paster_modes_change_only_the_mouth(mode):
    frame = _texture(200, 180, 3).permute(1, 2, 0).contiguous()
    face = _texture(256, 256, 4)
    box = (30, 20, 158, 148)
    out = frame.clone()
    MouthPaster(mouth_mask(), mode=mode).paste(out, face, box)
    changed = (out != frame).any(dim=2)
    ys, xs = torch.nonzero(changed, as_tuple=True)
    assert changed.any()
    plan = MouthPaster(mouth_mask()).plan(128, 128, frame.device)
    rows = (box[1] + plan.rows[0], box[1] + plan.rows[1])
    cols = (box[0] + plan.cols[0], box[0] + plan.cols[1])
    assert rows[0] <= ys.min() and ys.max() < rows[1] and cols[0] <= xs.min() and xs.max() < cols[1]
    window_alpha = torch.zeros(200, 180)
    window_alpha[rows[0]:rows[1], cols[0]:cols[1]] = plan.alpha
    assert not changed[window_alpha == 0].any()  # body, hands, background: the source frame bit for bit


def test_feather_mode_is_the_old_paste_exactly():
    frame = _texture(200, 180, 3).permute(1, 2, 0).contiguous()
    face = _texture(256, 256, 4)
    a, b = frame.clone(), frame.clone()
    MouthPaster(mouth_mask()).paste(a, face, (30, 20, 158, 148))
    p = MouthPaster(mouth_mask()).plan(128, 128, frame.device)
    (a0, a1), (b0, b1), (s0, s1), (t0, t1) = p.rows, p.cols, p.src_rows, p.src_cols
    fg = p.ry @ face[:, s0:s1, t0:t1] @ p.rx.T
    region = b[20 + a0:20 + a1, 30 + b0:30 + b1]
    bg = region.permute(2, 0, 1)
    region.copy_((bg + p.alpha[None] * (fg - bg)).permute(1, 2, 0))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="blend mode"):
        MouthPaster(mouth_mask(), mode="multiply")
