"""The shipped core-SAM3 mask workflow (core's SAM3_VideoTrack -> Broadcast Sam3 Track To Masks -> Mask Sequence
Cache) on a core that has SAM3 (0.33.0), queued through the runner with its case's overrides.

Core's SAM3 cannot be made small, blocked on core: its checkpoint loader reads only "SAM3.1" from the file
(`comfy/model_detection.py`, `detect_unet_config`) and builds `SAM3Model`'s fixed 32-block, 1024-wide, 1008-px ViTDet,
200-query detector and 1008-px `SAM31Tracker` (520 M parameters) plus a fixed 24-layer CLIP, so a tiny file fails
with size mismatches (docs/sam3.md; pinned by tests/unit/test_sam3_core_pin.py::test_cores_loader_cannot_take_a_tiny_sam3).
So the masks come from the cache under the key the workflow computes; the checkpoint it names is not a model, so the run would fail had SAM3 been reached. What
this pins on the server: the workflow validates on core's real SAM3 schemas (the SAM3_TRACK_DATA links into the
pack's adapter), its cache key covers the core segmenter's settings, and the masks reach its outputs exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

from scripts.run_workflow import run
from scripts.workflow.api import apply_overrides
from tests.comfy.wardrobe_checks import tap_frames
from tests.fixtures import core_sam3_wardrobe
from tests.workflow_cases import case_for


def _node(prompt, title):
    return next(k for k, n in prompt.items() if (n.get("_meta") or {}).get("title") == title)


@pytest.fixture(scope="module")
def sam3_run(comfy):
    if "SAM3_VideoTrack" not in comfy.object_info():
        pytest.skip("this ComfyUI core has no SAM3 nodes (scripts/test.sh runs this on 0.33.0)")
    overrides = case_for("wardrobe_core_sam3_masks").prepare(comfy)
    prompt = core_sam3_wardrobe.shipped_workflow()
    return prompt, overrides, run(prompt, overrides, comfy, timeout=300)


def test_cached_masks_reach_the_outputs_exactly(sam3_run, comfy):
    prompt, _, entry = sam3_run
    truth = core_sam3_wardrobe.clip()
    for title, key in (("Save Garment Mask", "garment"), ("Save Hands Mask", "hands")):
        frames = tap_frames(comfy, entry, _node(prompt, title))
        want = (truth[key].numpy() > 0.5).astype(np.uint8) * 255
        assert frames.shape[:3] == want.shape and np.array_equal(frames[..., 0], want), title


def test_a_changed_core_sam3_setting_is_a_miss(sam3_run, comfy):
    """The key covers the core segmenter's settings: another threshold misses, reaches core's SAM3 loader and fails
    there on the placeholder checkpoint (nothing is stored)."""
    prompt, overrides, _ = sam3_run
    changed = apply_overrides(prompt, dict(overrides, **{"Track Garment.detection_threshold": 0.3}),
                              comfy.object_info())
    error = comfy.run_error(changed)
    assert error["node_type"] in ("CheckpointLoaderSimple", "SAM3_VideoTrack"), error
