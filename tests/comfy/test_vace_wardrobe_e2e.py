"""The shipped Wan 2.1 VACE wardrobe workflow, sampled for real on tiny random Wan weights.

The SHIPPED API twin (workflows/api/wardrobe_vace.api.json) is queued through the pack's runner
(`scripts/run_workflow.run`) with the overrides of its WorkflowCase (model names, length, steps; see
tests/fixtures/vace_wardrobe.py). Nothing of its graph changes; the test only adds core PreviewImage taps (output
nodes that read four of its outputs as lossless PNGs), because the exported MP4 is 4:2:0 H.264 and cannot show
pixel-exact equality. The masks come from the clip's ground truth through the mask sequence cache; the SAM3 loader
names an empty folder, so the run would fail had the segmenter been reached.
"""
from __future__ import annotations

import io
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from scripts.run_workflow import prepare_prompt, run
from tests.fixtures import vace_wardrobe
from tests.workflow_cases import case_for

TAPS = {"source": ("Load Video", 0), "crops": ("Subject Crop", 0), "decoded": ("Trim Padding", 0),
        "final": ("Re-paste Hands", 0)}


def _with_taps(prompt: dict) -> tuple[dict, dict]:
    """The prompt plus one PreviewImage per tap; returns it and {tap: node id}."""
    out, ids = dict(prompt), {}
    for i, (tap, (title, slot)) in enumerate(TAPS.items()):
        nid = f"tap{i}"
        out[nid] = {"class_type": "PreviewImage",
                    "inputs": {"images": [vace_wardrobe.node_by_title(prompt, title), slot]},
                    "_meta": {"title": f"test tap: {tap}"}}
        ids[tap] = nid
    return out, ids


def _frames(comfy, entry: dict, node_id: str) -> np.ndarray:
    """A tap's PNGs, fetched through the server's /view (where ComfyUI keeps temp files is its business)."""
    from PIL import Image

    frames = []
    for it in entry["outputs"][node_id]["images"]:
        query = urllib.parse.urlencode({"filename": it["filename"], "subfolder": it["subfolder"], "type": it["type"]})
        with urllib.request.urlopen(f"{comfy.url}/view?{query}", timeout=60) as resp:
            frames.append(np.asarray(Image.open(io.BytesIO(resp.read())).convert("RGB")))
    return np.stack(frames)


def _find_box(crop: np.ndarray, frame: np.ndarray) -> tuple[int, int]:
    """Top-left of `crop` inside `frame` (a fixed crop is an exact copy of source pixels where it overlaps)."""
    ch, cw = crop.shape[:2]
    H, W = frame.shape[:2]
    for y0 in range(-ch + 1, H):
        for x0 in range(-cw + 1, W):
            sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + ch), max(0, x0), min(W, x0 + cw)
            if sy1 - sy0 < ch // 2 or sx1 - sx0 < cw // 2:
                continue
            if np.array_equal(crop[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0], frame[sy0:sy1, sx0:sx1]):
                return y0, x0
    raise AssertionError("the cropped frames are not a copy of the source frames")


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
            "frames": {tap: _frames(comfy, entry, nid) for tap, nid in taps.items()}}


def test_vace_wardrobe_workflow_keeps_hands_and_everything_outside_the_garment(vace_run):
    truth = vace_wardrobe.clip()
    garment, hands, gaps = (truth[k].numpy() > 0.5 for k in ("garment", "hands", "gaps"))
    src, out = vace_run["frames"]["source"], vace_run["frames"]["final"]
    assert src.shape == out.shape == (vace_wardrobe.FRAMES, vace_wardrobe.HEIGHT, vace_wardrobe.WIDTH, 3)
    # The compositor's pixel mask lies inside the garment (the lean refine only feathers inward): outside it,
    # and on every hand pixel, the output is the source exactly.
    assert np.array_equal(out[~garment], src[~garment])
    assert np.array_equal(out[hands], src[hands])
    # The sampler really painted the garment.
    diff = np.abs(out.astype(np.int16) - src.astype(np.int16)).max(axis=-1)
    assert (diff[garment] > 0).mean() > 0.9, (diff[garment] > 0).mean()
    # The 3-6 px gaps between fingers stay garment and are repainted (not closed, not left as the old garment).
    assert gaps.sum() > 0
    assert (diff[gaps] > 0).mean() > 0.9, (diff[gaps] > 0).mean()


def test_sampler_painted_whole_tokens_that_never_reach_the_output(vace_run):
    """The sampler's 16-px token blocks spill past the garment; the compositor leaves no block edge outside it."""
    truth = vace_wardrobe.clip()
    garment = truth["garment"].numpy() > 0.5
    src, crops, decoded = (vace_run["frames"][k] for k in ("source", "crops", "decoded"))
    assert decoded.shape == crops.shape, "frames in must equal frames out (length padding trimmed)"
    ch, cw = crops.shape[1:3]
    assert ch % 16 == 0 and cw % 16 == 0
    y0, x0 = _find_box(crops[0], src[0])
    spill = np.zeros((ch, cw), dtype=bool)  # inside the crop, inside the frame, outside every frame's garment
    H, W = garment.shape[1:]
    sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + ch), max(0, x0), min(W, x0 + cw)
    spill[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = ~garment[:, sy0:sy1, sx0:sx1].any(axis=0)
    changed = np.abs(decoded.astype(np.int16) - crops.astype(np.int16)).max(axis=-1) > 0
    assert changed[:, spill].mean() > 0.2, "the sampler changed nothing outside the garment: the test proves nothing"
    # Outside the garment the output equals the source, so none of those token blocks (nor their edges) got through.
    out = vace_run["frames"]["final"]
    assert np.array_equal(out[:, ~garment.any(axis=0)], src[:, ~garment.any(axis=0)])


def test_segmenter_skipped_and_export_written(vace_run, comfy):
    from engines.export import reader

    entry = vace_run["entry"]
    prompt = entry["prompt"][2]
    assert not list((Path(comfy.models_dir) / "sam3" / vace_wardrobe.NO_SAM3).iterdir())
    assert {n["class_type"] for n in prompt.values()} >= {"BroadcastSam3Loader", "BroadcastSam3VideoMask"}
    videos = [Path(comfy.output_dir) / it["subfolder"] / it["filename"]
              for out in entry["outputs"].values() for it in out.get("images", []) if it.get("type") == "output"
              and it["filename"].endswith(".mp4")]
    assert len(videos) == 1, entry["outputs"]
    info = reader.probe(videos[0], "video")
    assert info.frame_count == vace_wardrobe.FRAMES and (info.width, info.height) == (vace_wardrobe.WIDTH,
                                                                                      vace_wardrobe.HEIGHT)
    assert reader.read_audio(videos[0]) is not None, "the source audio must be in the export"
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
    decoded, out = _frames(comfy, entry, taps["decoded"]), _frames(comfy, entry, taps["final"])
    src = vace_run["frames"]["source"]
    truth = vace_wardrobe.clip()
    garment, hands = truth["garment"].numpy() > 0.5, truth["hands"].numpy() > 0.5
    assert not np.array_equal(decoded, vace_run["frames"]["decoded"]), "the noise mask changed nothing"
    assert np.array_equal(out[~garment], src[~garment]) and np.array_equal(out[hands], src[hands])
