"""The shipped MiniMax H3 wardrobe workflow, sampled for real on tiny random H3 weights (a core with H3: 0.33.0).

The SHIPPED API twin is queued through the pack's runner (`scripts/run_workflow.run`) with the overrides of its
WorkflowCase (model names, the clip, steps; see tests/fixtures/h3_wardrobe.py). Nothing of its graph changes; the
test only adds output taps: core PreviewImage nodes on four image outputs (lossless PNGs; the exported MP4 is 4:2:0
H.264 and cannot show pixel-exact equality) and core's LTXVSeparateAVLatent + SaveLatent on the audio part of the
nested audio-video latent before and after sampling. The masks come from the clip's ground truth through the mask
sequence cache and the conditioning from the conditioning cache: the SAM3 loader names an empty folder and the text
encoder file is not a text encoder, so the run would fail had either been reached.

On an older core (0.3.75) the workflow cannot run; there the pack must say so once, by the workflow's name.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch

from scripts.run_workflow import run
from tests.comfy.wardrobe_checks import (check_swap_keeps_source, check_token_blocks_stay_inside, exported_video,
                                         tap_frames, with_image_taps)
from tests.fixtures import h3_wardrobe, tiny_minimax_h3
from tests.workflow_cases import H3_CORE_NODES, case_for

TAPS = {"source": ("Load Video", 0), "crops": ("Subject Crop", 0), "decoded": ("Trim to Clip Length", 0),
        "final": ("Re-paste Hands", 0)}
AUDIO_TAPS = {"audio_in": ("Latent Inpaint Mask", 0), "audio_out": ("Sample", 0)}
LOG_LINE = "Broadcast Avatar: workflow wardrobe_minimax_h3 needs core nodes this ComfyUI lacks"


def _has_h3(comfy) -> bool:
    info = comfy.object_info()
    return all(n in info for n in H3_CORE_NODES)


def _with_taps(prompt: dict, run_id: str) -> tuple[dict, dict]:
    out, ids = with_image_taps(prompt, TAPS, h3_wardrobe.node_by_title)
    for tap, (title, slot) in AUDIO_TAPS.items():
        out[f"{tap}_split"] = {"class_type": "LTXVSeparateAVLatent",
                               "inputs": {"av_latent": [h3_wardrobe.node_by_title(prompt, title), slot]}}
        out[tap] = {"class_type": "SaveLatent",
                    "inputs": {"samples": [f"{tap}_split", 1], "filename_prefix": f"h3_test/{run_id}_{tap}"}}
        ids[tap] = tap
    return out, ids


def _latent(comfy, entry: dict, node_id: str) -> torch.Tensor:
    from safetensors.torch import load_file

    (item,) = entry["outputs"][node_id]["latents"]
    return load_file(str(Path(comfy.output_dir) / item["subfolder"] / item["filename"]))["latent_tensor"]


def _run(comfy, overrides: dict, run_id: str) -> dict:
    prompt, taps = _with_taps(h3_wardrobe.shipped_workflow(), run_id)
    log_start = len(comfy.log_text())
    start = time.monotonic()
    entry = run(prompt, overrides, comfy, timeout=300)
    return {"entry": entry, "seconds": time.monotonic() - start, "log": comfy.log_text()[log_start:],
            "frames": {tap: tap_frames(comfy, entry, taps[tap]) for tap in TAPS},
            "audio": {tap: _latent(comfy, entry, taps[tap]) for tap in AUDIO_TAPS}}


@pytest.fixture(scope="module")
def h3_run(comfy):
    if not _has_h3(comfy):
        pytest.skip("this ComfyUI core has no MiniMax H3 nodes (scripts/test.sh runs this on 0.33.0); "
                    "test_older_core_says_once_that_the_h3_workflow_needs_a_newer_one covers this core")
    overrides = case_for("wardrobe_minimax_h3").prepare(comfy)
    return {"overrides": overrides, **_run(comfy, overrides, "keep")}


def test_h3_wardrobe_keeps_hands_and_everything_outside_the_garment(h3_run):
    """At the shipped mask settings (the case overrides none of them): hands and background are the source, the
    garment is repainted, and the finger gaps are whatever the shipped Grow Hands makes them (read from the
    workflow: a growth that closes the clip's 3-6 px gaps leaves them the source, the old garment)."""
    src, out = h3_run["frames"]["source"], h3_run["frames"]["final"]
    assert src.shape == (h3_wardrobe.FRAMES, h3_wardrobe.HEIGHT, h3_wardrobe.WIDTH, 3)
    assert not any(k.startswith(("Grow Hands.", "Pixel Mask (compositor).", "Re-paste Hands."))
                   for k in h3_run["overrides"]), h3_run["overrides"]
    check_swap_keeps_source(src, out, h3_wardrobe.clip(), grow_hands=h3_wardrobe.shipped_inputs("Grow Hands")["expand"])


def test_h3_token_blocks_never_reach_the_output_outside_the_garment(h3_run):
    """H3's 32-px token blocks spill past the garment in the crops; none of that reaches the output."""
    garment = h3_wardrobe.clip()["garment"].numpy() > 0.5
    frames = h3_run["frames"]
    check_token_blocks_stay_inside(frames["source"], frames["crops"], frames["decoded"], frames["final"], garment, 32)


def test_h3_audio_latent_keeps_the_soundtrack(h3_run, comfy):
    """audio = keep: the nested latent's audio part leaves the sampler as it went in; regenerate changes it.

    Kept rows come back within float rounding, not bit for bit: core's sampler re-blends the kept latent at every
    step (x * m + x0 * (1 - m) around the sigma-scaled noise), and the last Euler step x + (x - x0) / s * (0 - s)
    leaves about 1e-8 where the noise was of order 1.
    """
    before, after = h3_run["audio"]["audio_in"], h3_run["audio"]["audio_out"]
    assert before.shape == after.shape and before.dim() == 4 and before.shape[1] == 32
    assert float((after - before).abs().max()) < 1e-6
    regen = _run(comfy, dict(h3_run["overrides"], **{"Latent Inpaint Mask.audio": "regenerate"}), "regenerate")
    assert torch.equal(regen["audio"]["audio_in"], before)
    assert float((regen["audio"]["audio_out"] - before).abs().mean()) > 1e-3, "regenerate left the audio as it was"
    # The video side is the same swap either way: the hands and the background stay the source.
    truth = h3_wardrobe.clip()
    garment = truth["garment"].numpy() > 0.5
    assert np.array_equal(regen["frames"]["final"][~garment], h3_run["frames"]["source"][~garment])


def test_h3_models_loaded_completely_and_encoder_skipped(h3_run, comfy):
    entry = h3_run["entry"]
    assert not list((Path(comfy.models_dir) / "sam3" / h3_wardrobe.NO_SAM3).iterdir())
    prompt = entry["prompt"][2]
    assert {n["class_type"] for n in prompt.values()} >= {"CLIPLoader", "MiniMaxH3ReferenceToVideo",
                                                           "BroadcastConditioningCache", "LoraLoaderModelOnly"}
    log = h3_run["log"]
    # The LoRA patched real keys, and no tensor was left uninitialised (NaN frames).
    assert "lora key not loaded" not in log and "invalid value encountered" not in log, log[-3000:]
    assert "Missing VAE keys" not in log, log[-3000:]
    exported_video(comfy, entry, h3_wardrobe.FRAMES, h3_wardrobe.WIDTH, h3_wardrobe.HEIGHT)
    print(f"wardrobe_minimax_h3 workflow: {h3_run['seconds']:.1f} s on the test server")


def test_a_changed_encoder_setting_misses_the_conditioning_cache(h3_run, comfy):
    """The H3 Prompt Cache's key covers every setting of the nodes feeding its conditioning (no hand-typed text):
    another text-encoder device is a miss, so the encoder runs. On the placeholder file core's CLIPLoader builds
    some other text encoder, whose 768-wide conditioning the cache stores under the new key (the first entry stays)
    and the tiny H3 (text width 48) then refuses, so the run fails at the sampler."""
    from engines.common.cache import ContentCache
    from engines.wardrobe import condcache
    from scripts.workflow.api import apply_overrides

    entries = Path(comfy.models_dir) / "broadcast_cache" / condcache.NAMESPACE
    before = {p.name for p in entries.iterdir()}
    changed = apply_overrides(h3_wardrobe.shipped_workflow(),
                              dict(h3_run["overrides"], **{"H3 Text Encoder.device": "cpu"}), comfy.object_info())
    error = comfy.run_error(changed)
    after = {p.name for p in entries.iterdir()}
    assert before <= after and len(after - before) == 1, (error, after - before)
    (new_key,) = after - before
    (cond, _), = condcache.load_conditioning(ContentCache(entries.parent), new_key)
    assert cond.shape[-1] != tiny_minimax_h3.TEXT_DIM, "the miss did not reach the text encoder"
    assert error["node_type"] != "BroadcastConditioningCache", error


def test_older_core_says_once_that_the_h3_workflow_needs_a_newer_one(comfy):
    lines = [line for line in comfy.log_text().splitlines() if LOG_LINE in line]
    if _has_h3(comfy):
        assert lines == []
        return
    assert len(lines) == 1, lines
    for node in H3_CORE_NODES:
        assert node in lines[0]
    assert "ComfyUI 0.33.0 or newer" in lines[0]
    assert comfy.import_failures() == []
