"""Core's SAM3 into the pack's chain: track data packed by core's own code (needs a core with SAM3: 0.33.0).

Core's SAM3 model cannot be built small (its loader reads only "SAM3" from the file and builds the fixed 1008-px
ViT-L detector and tracker), so this pins the adapter against core's own functions instead: track data packed with
core's `pack_masks` (what SAM3_VideoTrack outputs) goes through the pack's Broadcast SAM3 Track To Masks engine,
and each object must equal core's own SAM3_TrackToMask thresholded at 0.5 (same bilinear resize); the pack's union
(objects thresholded, then joined) lies inside core's soft union thresholded (joined, then resized).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engines.sam3.core_track import parse_groups, track_data_to_masks, unpack_bits

PROBE = Path(__file__).resolve().parents[1] / "fixtures" / "core_sam3_probe.py"


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    root = os.environ.get("COMFYUI_PATH")
    if not root or not (Path(root) / "comfy" / "ldm" / "sam3" / "tracker.py").is_file():
        pytest.skip("this ComfyUI core has no SAM3 nodes (scripts/test.sh runs the whole suite on 0.33.0)")
    tmp = tmp_path_factory.mktemp("sam3probe")
    g = torch.Generator().manual_seed(5)
    masks = torch.zeros(3, 3, 32, 32, dtype=torch.bool)
    for t in range(3):
        for k in range(3):
            y, x = (int(v) for v in torch.randint(0, 20, (2,), generator=g))
            masks[t, k, y:y + 9 + k, x:x + 7 + 2 * k] = True
    masks[0, 2] = False  # object 2 appears on frame 1
    torch.save({"masks": masks, "orig_size": [48, 80]}, tmp / "in.pt")
    proc = subprocess.run([sys.executable, str(PROBE), "--comfyui", root, "--masks", str(tmp / "in.pt"),
                           "--out", str(tmp / "out.pt")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return masks, torch.load(tmp / "out.pt", weights_only=True)


def test_bits_packed_by_core_unpack_exactly(core):
    masks, out = core
    assert torch.equal(unpack_bits(out["track_data"]["packed_masks"]), masks)


def test_each_object_equals_cores_track_to_mask(core):
    masks, out = core
    union, per_object = track_data_to_masks(out["track_data"], parse_groups("0\n1\n2"))
    assert union.shape == out["union"].shape == (3, 48, 80)
    for k in range(3):
        assert torch.equal(per_object[k], (out["objects"][k] > 0.5).float()), k
    assert per_object[2][0].sum() == 0 and per_object[2][1:].sum() > 0
    core_union = out["union"] > 0.5
    assert bool((union.bool() <= core_union).all()) and union.sum() > 0.9 * core_union.sum()
