"""The shipped Wan 2.1 VACE wardrobe workflow, sampled for real on tiny random Wan weights.

The SHIPPED API twin (workflows/api/wardrobe_vace.api.json) is queued through the pack's runner
(`scripts/run_workflow.run`) with the overrides of its WorkflowCase (model names, length, steps; see
tests/fixtures/vace_wardrobe.py). Nothing of its graph changes; the test only adds core PreviewImage taps (output
nodes that read four of its outputs as lossless PNGs), because the exported MP4 is 4:2:0 H.264 and cannot show
pixel-exact equality. The masks come from the clip's ground truth through the mask sequence cache; the SAM3 loader
names an empty folder, so the run would fail had the segmenter been reached.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from scripts.run_workflow import prepare_prompt, run
from tests.comfy.wardrobe_checks import (check_swap_keeps_source, check_token_blocks_stay_inside, exported_video,
                                         tap_frames, with_image_taps)
from tests.fixtures import vace_wardrobe
from tests.workflow_cases import case_for

TAPS = {"source": ("Load Video", 0), "crops": ("Subject Crop", 0), "decoded": ("Trim Padding", 0),
        "final": ("Re-paste Hands", 0)}


def _with_taps(prompt: dict) -> tuple[dict, dict]:
    return with_image_taps(prompt, TAPS, vace_wardrobe.node_by_title)


@pytest.fixture(scope="module")
def vace_run(comfy):
    overrides = case_for("wardrobe_vace").prepare(comfy)
    prompt, taps = _with_taps(vace_wardrobe.shipped_workflow())
    log_start = len(comfy.log_text())
    start = time.monotonic()
    entry = run(prompt, overrides, comfy, timeout=240)
    seconds = time.monotonic() - start
    return {"entry": entry, "taps": taps, "overrides": overrides, "seconds": seconds,
            "log": comfy.log_text()[log_start:],
            "frames": {tap: tap_frames(comfy, entry, nid) for tap, nid in taps.items()}}


def test_vace_wardrobe_workflow_keeps_hands_and_everything_outside_the_garment(vace_run):
    src, out = vace_run["frames"]["source"], vace_run["frames"]["final"]
    assert src.shape == (vace_wardrobe.FRAMES, vace_wardrobe.HEIGHT, vace_wardrobe.WIDTH, 3)
    check_swap_keeps_source(src, out, vace_wardrobe.clip())


def test_sampler_painted_whole_tokens_that_never_reach_the_output(vace_run):
    """The sampler's 16-px token blocks spill past the garment; the compositor leaves no block edge outside it."""
    garment = vace_wardrobe.clip()["garment"].numpy() > 0.5
    frames = vace_run["frames"]
    check_token_blocks_stay_inside(frames["source"], frames["crops"], frames["decoded"], frames["final"], garment, 16)


def test_segmenter_skipped_and_export_written(vace_run, comfy):
    entry = vace_run["entry"]
    prompt = entry["prompt"][2]
    assert not list((Path(comfy.models_dir) / "sam3" / vace_wardrobe.NO_SAM3).iterdir())
    assert {n["class_type"] for n in prompt.values()} >= {"BroadcastSam3Loader", "BroadcastSam3VideoMask"}
    exported_video(comfy, entry, vace_wardrobe.FRAMES, vace_wardrobe.WIDTH, vace_wardrobe.HEIGHT)
    # Tiny weights must load completely: a missing tensor would be uninitialised memory (NaN frames).
    log = vace_run["log"]
    assert "Missing VAE keys" not in log and "invalid value encountered" not in log, log[-3000:]
    # Timing is reported, not asserted (a shared CI machine would make it flaky); docs/wardrobe_vace.md has numbers.
    print(f"wardrobe_vace workflow: {vace_run['seconds']:.1f} s on the test server")


def test_too_short_length_is_refused_with_the_value_to_use(vace_run, comfy):
    # (A too long one is refused the same way; not run here: it re-encodes a longer video, about 5x this test.)
    length, expected = vace_wardrobe.FRAMES - 4, "at most {length} frames"  # one latent frame short
    overrides = dict(vace_run["overrides"], **{"WanVaceToVideo.length": length})
    prompt = prepare_prompt(vace_wardrobe.shipped_workflow(), overrides, comfy.object_info())
    error = comfy.run_error(prompt)
    assert error["node_type"] == "BroadcastVaceSamplerMask"
    assert "sampler_mask: expected " + expected.format(length=length) in error["exception_message"]
    assert f"length to {vace_wardrobe.FRAMES}" in error["exception_message"]


def test_latent_noise_mask_option_samples_and_keeps_the_output_exact(vace_run, comfy):
    """set_noise_mask writes [1, 1, reference + T, h, w] into the LATENT; core's sampler takes it as it is."""
    overrides = dict(vace_run["overrides"], **{"Vace Sampler Mask.set_noise_mask": True})
    prompt, taps = _with_taps(vace_wardrobe.shipped_workflow())
    entry = run(prompt, overrides, comfy, timeout=240)
    decoded, out = tap_frames(comfy, entry, taps["decoded"]), tap_frames(comfy, entry, taps["final"])
    src = vace_run["frames"]["source"]
    truth = vace_wardrobe.clip()
    garment, hands = truth["garment"].numpy() > 0.5, truth["hands"].numpy() > 0.5
    assert not np.array_equal(decoded, vace_run["frames"]["decoded"]), "the noise mask changed nothing"
    assert np.array_equal(out[~garment], src[~garment]) and np.array_equal(out[hands], src[hands])
