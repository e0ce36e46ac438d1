"""The pack's MiniMax H3 latent mask, pinned against core's own H3 read-back (needs a core with H3: 0.33.0).

Time: core's H3 stand-in VAE (TAEHV, loaded by core with H3's clip layout) is probed frame by frame
(tests/fixtures/core_h3_probe.py) for clips on and off H3's 17k + 5 grid, so uneven last groups are covered: a
clip with frames past the last kept latent frame (core drops them; the pack folds them into the last latent frame,
so their garment is still regenerated), and a clip shorter than its latent (the VAE repeats the last frame into the
padded latent frames; the pack reads the last real frame there).
Space: core's H3 DiT reads the noise mask per 2x2-cell patch row (`mask_row_values`); the pack's token-grid mask
must come back from it exactly, 0 or 1 per 32-px token, including an odd number of latent cells (core replicates
the last row/column to a whole patch).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from engines.wardrobe import tokengrid as TG
from tests.fixtures import core_build

GRID = TG.PRESETS["minimax-h3"]
# On the grid (5, 22: two clips), with frames the VAE drops (25: 3 past the last group; 17: 12 past it, more than a
# group), and shorter than the latent covers (18: the VAE pads 18 -> 22).
LENGTHS = [5, 17, 18, 22, 25]


def _core() -> str:
    root = os.environ.get("COMFYUI_PATH")
    if not root or not (Path(root) / "comfy" / "ldm" / "minimax" / "model.py").is_file():
        pytest.skip("this ComfyUI core has no MiniMax H3 (scripts/test.sh runs the whole suite on 0.33.0)")
    return root


def _masks():
    """Pixel masks [F, H, W] and their latent shape: one garment blob per frame, moving, odd cell count (h = 5)."""
    g = torch.Generator().manual_seed(3)
    frames, h, w = 22, 5, 6
    m = torch.zeros(frames, h * 16, w * 16)
    for f in range(frames):
        y, x = int(torch.randint(0, h * 16 - 12, (1,), generator=g)), int(torch.randint(0, w * 16 - 12, (1,), generator=g))
        m[f, y:y + 12, x:x + 12] = 1.0
    return m, (GRID.latent_frames_for(frames), h, w)  # 22 frames -> 7 latent frames


@pytest.fixture(scope="module")
def core_readback(tmp_path_factory):
    root = _core()
    tmp = tmp_path_factory.mktemp("h3probe")
    masks, (T, h, w) = _masks()
    grid_masks = [TG.snap_to_grid(masks, GRID, T, h, w)]
    torch.save(grid_masks, tmp / "masks.pt")
    (tmp / "request.json").write_text(json.dumps({"lengths": LENGTHS, "masks": str(tmp / "masks.pt")}))
    proc = core_build.run_in_core("core_h3_probe", "--request", str(tmp / "request.json"), timeout=900, capture=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), masks, grid_masks, (T, h, w)


@pytest.mark.parametrize("length", LENGTHS)
def test_time_groups_match_core(core_readback, length):
    readback = core_readback[0]["groups"][str(length)]
    T, first = readback["latent_frames"], readback["first_latent"]
    kept = [j for j, k in enumerate(first) if k is not None]
    if length == 17:
        # 12 frames past the last group: more than one group off, so the pack refuses (the workflow would have
        # made a 7-frame latent for it: H3 snaps 17 up to 22, and the crops encode to 2 latent frames).
        assert T == 2 and kept == list(range(5))
        with pytest.raises(Exception, match="mask: expected a mask sequence of about 5 frames"):
            TG.frame_groups(GRID, T, length)
        return
    groups = TG.frame_groups(GRID, T, length)
    pack_first = {}
    for k, (a, b) in enumerate(groups):
        for j in range(a, b):
            pack_first.setdefault(j, k)
    for j in kept:  # every frame core codes lands in the same latent frame in the pack
        assert pack_first.get(j) == first[j], (length, j, pack_first.get(j), first[j])
    for j in (j for j, k in enumerate(first) if k is None):  # dropped by core: folded into the last latent frame
        assert pack_first.get(j) == T - 1, (length, j)
    for k in set(range(T)) - {first[j] for j in kept}:  # padded latent frames: the last real frame repeated
        assert groups[k] == (length - 1, length), (length, k, groups[k])


def test_counts_follow_core(core_readback):
    groups = core_readback[0]["groups"]
    assert {int(n): g["latent_frames"] for n, g in groups.items()} == {5: 2, 17: 2, 18: 7, 22: 7, 25: 7}
    assert all(g["vae_latent_frames"] == g["latent_frames"] for g in groups.values())  # core's own count agrees
    for n in (5, 22):  # on the grid, the pack's floor-style count is core's
        assert GRID.latent_frames_for(n) == groups[str(n)]["latent_frames"]


def test_token_mask_survives_cores_patch_read_back(core_readback):
    readback, masks, grid_masks, (T, h, w) = core_readback
    (rows,) = readback["rows"]
    assert rows is not None, "core read the mask as 'regenerate everything'"
    got = torch.tensor(rows).reshape(T, -(-h // 2), -(-w // 2))
    # The pack's tokens, straight from the pixels: a 32-px block of a group's frames touched by the mask.
    want = torch.zeros_like(got)
    for k, (a, b) in enumerate(TG.frame_groups(GRID, T, masks.shape[0])):
        union = (masks[a:b] > 0.5).any(dim=0)
        for i in range(want.shape[1]):
            for j in range(want.shape[2]):
                want[k, i, j] = float(union[i * 32:(i + 1) * 32, j * 32:(j + 1) * 32].any())
    assert torch.equal(got, want)
    assert set(got.unique().tolist()) == {0.0, 1.0}
