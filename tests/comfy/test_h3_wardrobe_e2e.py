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
from tests.comfy.test_vace_wardrobe_e2e import _find_box, _frames
from tests.fixtures import h3_wardrobe
from tests.workflow_cases import H3_CORE_NODES, case_for

TAPS = {"source": ("Load Video", 0), "crops": ("Subject Crop", 0), "decoded": ("Trim to Clip Length", 0),
        "final": ("Re-paste Hands", 0)}
AUDIO_TAPS = {"audio_in": ("Latent Inpaint Mask", 0), "audio_out": ("Sample", 0)}
LOG_LINE = "Broadcast Avatar: workflow wardrobe_minimax_h3 needs core nodes this ComfyUI lacks"


def _has_h3(comfy) -> bool:
    info = comfy.object_info()
    return all(n in info for n in H3_CORE_NODES)


def _with_taps(prompt: dict, run_id: str) -> tuple[dict, dict]:
    out, ids = dict(prompt), {}
    for i, (tap, (title, slot)) in enumerate(TAPS.items()):
        out[f"tap{i}"] = {"class_type": "PreviewImage",
                          "inputs": {"images": [h3_wardrobe.node_by_title(prompt, title), slot]},
                          "_meta": {"title": f"test tap: {tap}"}}
        ids[tap] = f"tap{i}"
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
            "frames": {tap: _frames(comfy, entry, taps[tap]) for tap in TAPS},
            "audio": {tap: _latent(comfy, entry, taps[tap]) for tap in AUDIO_TAPS}}


@pytest.fixture(scope="module")
def h3_run(comfy):
    if not _has_h3(comfy):
        pytest.skip("this ComfyUI core has no MiniMax H3 nodes (scripts/test.sh runs this on 0.33.0); "
                    "test_older_core_says_once_that_the_h3_workflow_needs_a_newer_one covers this core")
    overrides = case_for("wardrobe_minimax_h3").prepare(comfy)
    return {"overrides": overrides, **_run(comfy, overrides, "keep")}


def test_h3_wardrobe_keeps_hands_and_everything_outside_the_garment(h3_run):
    truth = h3_wardrobe.clip()
    garment, hands, gaps = (truth[k].numpy() > 0.5 for k in ("garment", "hands", "gaps"))
    src, out = h3_run["frames"]["source"], h3_run["frames"]["final"]
    assert src.shape == out.shape == (h3_wardrobe.FRAMES, h3_wardrobe.HEIGHT, h3_wardrobe.WIDTH, 3)
    # The compositor's pixel mask lies inside the garment: outside it, and on every hand pixel, the source exactly.
    assert np.array_equal(out[~garment], src[~garment])
    assert np.array_equal(out[hands], src[hands])
    diff = np.abs(out.astype(np.int16) - src.astype(np.int16)).max(axis=-1)
    assert (diff[garment] > 0).mean() > 0.9, (diff[garment] > 0).mean()
    # The 3-6 px gaps between fingers stay garment and are repainted.
    assert gaps.sum() > 0
    assert (diff[gaps] > 0).mean() > 0.9, (diff[gaps] > 0).mean()


def test_h3_token_blocks_never_reach_the_output_outside_the_garment(h3_run):
    """H3's 32-px token blocks spill past the garment in the crops; none of that reaches the output."""
    truth = h3_wardrobe.clip()
    garment = truth["garment"].numpy() > 0.5
    src, crops, decoded = (h3_run["frames"][k] for k in ("source", "crops", "decoded"))
    assert decoded.shape == crops.shape, "frames in must equal frames out"
    ch, cw = crops.shape[1:3]
    assert ch % 32 == 0 and cw % 32 == 0
    y0, x0 = _find_box(crops[0], src[0])
    H, W = garment.shape[1:]
    spill = np.zeros((ch, cw), dtype=bool)
    sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + ch), max(0, x0), min(W, x0 + cw)
    spill[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = ~garment[:, sy0:sy1, sx0:sx1].any(axis=0)
    changed = np.abs(decoded.astype(np.int16) - crops.astype(np.int16)).max(axis=-1) > 0
    assert spill.any() and changed[:, spill].mean() > 0.2, "nothing changed outside the garment: the test proves nothing"
    out = h3_run["frames"]["final"]
    outside = ~garment.any(axis=0)
    assert np.array_equal(out[:, outside], src[:, outside])


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
    from engines.export import reader

    entry = h3_run["entry"]
    assert not list((Path(comfy.models_dir) / "sam3" / h3_wardrobe.NO_SAM3).iterdir())
    prompt = entry["prompt"][2]
    assert {n["class_type"] for n in prompt.values()} >= {"CLIPLoader", "MiniMaxH3ReferenceToVideo",
                                                           "BroadcastConditioningCache", "LoraLoaderModelOnly"}
    log = h3_run["log"]
    # The LoRA patched real keys, and no tensor was left uninitialised (NaN frames).
    assert "lora key not loaded" not in log and "invalid value encountered" not in log, log[-3000:]
    assert "Missing VAE keys" not in log, log[-3000:]
    videos = [Path(comfy.output_dir) / it["subfolder"] / it["filename"]
              for out in entry["outputs"].values() for it in out.get("images", []) if it.get("type") == "output"
              and it["filename"].endswith(".mp4")]
    assert len(videos) == 1, entry["outputs"]
    info = reader.probe(videos[0], "video")
    assert info.frame_count == h3_wardrobe.FRAMES and (info.width, info.height) == (h3_wardrobe.WIDTH,
                                                                                    h3_wardrobe.HEIGHT)
    assert reader.read_audio(videos[0]) is not None, "the source audio must be in the export"
    print(f"wardrobe_minimax_h3 workflow: {h3_run['seconds']:.1f} s on the test server")


def test_a_changed_encoder_setting_misses_the_conditioning_cache(h3_run, comfy):
    """The H3 Prompt Cache's key covers every setting of the nodes feeding its conditioning (no hand-typed text):
    another text-encoder device misses, so core's CLIPLoader runs and fails on the file that is not a text encoder,
    and nothing is stored."""
    from scripts.workflow_api import apply_overrides

    entries = Path(comfy.models_dir) / "broadcast_cache" / "conditioning"
    before = sorted(p.name for p in entries.iterdir())
    changed = apply_overrides(h3_wardrobe.shipped_workflow(),
                              dict(h3_run["overrides"], **{"H3 Text Encoder.device": "cpu"}), comfy.object_info())
    error = comfy.run_error(changed)
    assert error["node_type"] in ("CLIPLoader", "MiniMaxH3ReferenceToVideo"), error
    assert sorted(p.name for p in entries.iterdir()) == before


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
