"""The broadcast graphs end to end on the tiny models: script -> cloned voice -> master -> lip-sync -> one MP4 -> QC.

The shipped API twins are queued with the case's overrides (tiny models). The shipped graphs stream: the lip-sync
hands its frames to Export Video as a stream (`stream_to_export`), so no IMAGE batch of the clip exists to tap. The
pixel checks therefore run on the same graph with the lip-sync's IMAGE batch wired into the export instead, plus
taps that save, losslessly, exactly what the graph hands on: the presenter loop as Load Video decoded it and the
lip-synced frames as they go into Export Video (core Save Image, 8-bit PNG; both sides quantised the same way); and
the streamed MP4 is checked to show the frames of that batch MP4. On those:
- the MP4 lasts as long as the mastered speech (within one frame) and its audio is that speech (correlation);
- at the shipped 25 fps, with the shipped Face Track's detector finding the moving face (no box given), every pixel
  outside the mouth region the pack pastes (the mouth ellipse of the crop made from where the face really is in
  that frame, plus the detector's error) equals the loop frame it came from, and the loop frame is chosen by video
  time (mirror, upstream's cycle, or wrap), for a script that outlasts the loop and one that ends inside it;
- Broadcast QC's verdict on the file is in the history as the batch runner's ledger records it, every check
  reported, the checks any broadcast must pass passed (`tests/fixtures/broadcast.check_qc`).
(The editor run and the `comfy run` run of the same files are in test_workflows_browser / _comfy_cli.)
"""
from __future__ import annotations

import numpy as np
import pytest

from scripts.workflow.api import apply_overrides, load_workflow
from tests.fixtures import broadcast
from tests.workflow_cases import case_for, shipped_api_twin

# The mouth region on MuseTalk's 256-px crop as docs/musetalk.md states it: an ellipse centred at (127, 196) with
# radii 66 and 38; outside it the paste-back leaves the frame as it was.
MOUTH = dict(cx=127.0, cy=196.0, rx=66.0, ry=38.0)
# How far (px) the region is widened: the detector's boxes (on the decoded H.264 loop) are within about 5 px of the
# true face on these loops (tests/unit/test_musetalk_face_track.py: 4 px on keyframes), the crop's bottom moves by
# another 22 % of the box height's error, the crop box is rounded to whole pixels and the area resize into it
# reaches up to 2 px further.
DETECTOR_SLACK = 10


def _png_frames(comfy, entry, node_id):
    from PIL import Image

    items = entry["outputs"][node_id]["images"]
    return np.stack([np.asarray(Image.open(comfy.output_dir / i["subfolder"] / i["filename"]).convert("RGB"))
                     for i in items])


def _loop_index(i: int, n_loop: int, mode: str) -> int:
    """Upstream MuseTalk's cycle (scripts/realtime_inference.py: ``frame_list + frame_list[::-1]``, indexed modulo
    its length) for the shipped mirror, or restarting for wrap; the output runs at the loop's rate here."""
    if mode == "wrap":
        return i % n_loop
    assert mode == "mirror", mode
    cycle = list(range(n_loop)) + list(range(n_loop))[::-1]
    return cycle[i % len(cycle)]


def _run_musetalk(comfy, tag, script=None, loop_mode="mirror", loop_frames=None, batch=False):
    prompt, _ = load_workflow(shipped_api_twin("broadcast_musetalk"))
    info = comfy.object_info()
    overrides = case_for("broadcast_musetalk").prepare(comfy)
    if loop_frames is not None:     # the same moving astronaut, over more frames (at the same 25 fps)
        overrides["Presenter Loop.video"] = broadcast.write_musetalk_loop(
            comfy.input_dir, f"broadcast_presenter_25fps_{loop_frames}.mp4", frames=loop_frames)
    # The first run is exactly the case's graph (plus the taps), so the editor's and comfy-cli's runs of the same
    # file later in the session are served from ComfyUI's cache; the others vary the script, loop and mode.
    if loop_mode != "mirror":
        overrides["MuseTalk Lip Sync.loop_mode"] = loop_mode
    if script is not None:
        overrides["News Script.text"] = script
    prompt = apply_overrides(prompt, overrides, info)
    ids = {n["_meta"]["title"]: k for k, n in prompt.items()}
    prompt["tap_loop"] = {"class_type": "SaveImage", "_meta": {"title": "tap loop"},
                          "inputs": {"images": [ids["Presenter Loop"], 0], "filename_prefix": f"tap/{tag}_loop"}}
    if batch:   # the lip-sync's IMAGE batch into the export (and the tap) instead of the shipped stream
        prompt[ids["MuseTalk Lip Sync"]]["inputs"]["stream_to_export"] = False
        prompt[ids["Export Broadcast"]]["inputs"]["images"] = [ids["MuseTalk Lip Sync"], 0]
        prompt["tap_frames"] = {"class_type": "SaveImage", "_meta": {"title": "tap frames"},
                                "inputs": {"images": [ids["MuseTalk Lip Sync"], 0],
                                           "filename_prefix": f"tap/{tag}_out"}}
    else:
        assert prompt[ids["Export Broadcast"]]["inputs"]["images"] == [ids["MuseTalk Lip Sync"], 4], \
            "the shipped graph streams the lip-sync's frames into the export"
    return comfy.run(prompt, timeout=600)


def _decoded(comfy, entry):
    import av

    mp4, _ = broadcast.broadcast_files(comfy, entry)
    with av.open(str(mp4)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])])


def _same_picture(comfy, streamed, batch):
    """The streamed export shows the frames of the batch export: same encoder and settings, so they differ only
    where rendering noise (CPU float rounding of the tiny networks, run to run) tips the encoder's decisions: above
    40 dB PSNR (here about 49), where a frame taken from the wrong loop position or order gives about 30."""
    a, b = _decoded(comfy, streamed).astype(np.float64), _decoded(comfy, batch).astype(np.float64)
    assert a.shape == b.shape, f"streamed {a.shape} vs batch {b.shape}"
    psnr = 10 * np.log10(255.0 ** 2 / max(float(((a - b) ** 2).mean()), 1e-12))
    assert psnr > 40.0, f"the streamed export differs from the batch export: PSNR {psnr:.1f} dB"


def _mouth_region(face_box, shape, margins):
    """Pixels of a frame that MuseTalk may repaint: the mouth ellipse of the 256-px crop, mapped into the crop box
    that the shipped Avatar margins make of `face_box`, widened by DETECTOR_SLACK; and the crop box itself."""
    from scipy.ndimage import binary_dilation

    x1, y1, x2, y2 = face_box
    w, h = x2 - x1, y2 - y1
    cx1, cy1 = x1 - margins["crop_side"] * w, y1 - margins["crop_top"] * h
    cx2, cy2 = x2 + margins["crop_side"] * w, y2 + margins["crop_bottom"] * h
    rows, cols = np.mgrid[0:shape[0], 0:shape[1]] + 0.5
    u = (cols - cx1) / (cx2 - cx1) * 256.0
    v = (rows - cy1) / (cy2 - cy1) * 256.0
    ellipse = ((u - MOUTH["cx"]) / MOUTH["rx"]) ** 2 + ((v - MOUTH["cy"]) / MOUTH["ry"]) ** 2 < 1.0
    crop = (u >= 0) & (u < 256) & (v >= 0) & (v < 256)
    return binary_dilation(ellipse, iterations=DETECTOR_SLACK), crop


def _face_track(entry):
    """The Face Track node's inputs and its summary line (None when ComfyUI served it from its cache)."""
    prompt = entry["prompt"][2]
    (node_id,) = [k for k, n in prompt.items() if n["class_type"] == "BroadcastFaceTrack"]
    shown = entry["outputs"].get(node_id, {}).get("text")
    return prompt[node_id]["inputs"], shown[0] if shown else None


def _check_mouth_only(comfy, entry, loop_mode):
    loop = _png_frames(comfy, entry, "tap_loop")
    out = _png_frames(comfy, entry, "tap_frames")
    track_inputs, summary = _face_track(entry)
    assert not track_inputs["box"].strip() and "mask" not in track_inputs, "the face track must come from the detector"
    assert summary is None or (f"{len(loop)} frames" in summary and "(haar)" in summary), summary
    prompt = entry["prompt"][2]
    (avatar_id,) = [k for k, n in prompt.items() if n["class_type"] == "BroadcastMuseTalkAvatar"]
    margins = prompt[avatar_id]["inputs"]
    truth = broadcast.musetalk_loop_face_boxes(len(loop))
    changed = 0
    for i, frame in enumerate(out):
        k = _loop_index(i, len(loop), loop_mode)
        mouth, crop = _mouth_region(truth[k], frame.shape[:2], margins)
        assert mouth.sum() < 0.5 * crop.sum(), "the mouth region should be well inside the face crop"
        diff = np.any(frame != loop[k], axis=-1)
        assert not diff[~mouth].any(), (
            f"frame {i}: {int(diff[~mouth].sum())} pixels outside the mouth region differ from loop frame {k} "
            f"({loop_mode}), {int(diff[crop & ~mouth].sum())} of them inside the face crop")
        changed += int(diff[mouth].sum())
    assert changed > 0, "no pixel inside the mouth region changed: nothing was lip-synced"
    return len(out), len(loop)


def test_musetalk_broadcast_longer_than_the_loop_mirrors(comfy):
    spec = comfy.object_info()["BroadcastMuseTalkLipSync"]["input"]["required"]["loop_mode"]
    assert spec[-1]["default"] == "mirror", "MuseTalk's default loop order is upstream's"
    streamed = _run_musetalk(comfy, "long")
    broadcast.check_output(comfy, streamed)
    entry = _run_musetalk(comfy, "long_batch", batch=True)
    broadcast.check_output(comfy, entry)
    n_out, n_loop = _check_mouth_only(comfy, entry, "mirror")
    assert n_out > n_loop, f"the default script ({n_out} frames) should outlast the {n_loop}-frame loop"
    _same_picture(comfy, streamed, entry)


def test_musetalk_broadcast_shorter_than_the_loop_wraps(comfy):
    entry = _run_musetalk(comfy, "short", script="Good evening.", loop_mode="wrap", loop_frames=60, batch=True)
    broadcast.check_output(comfy, entry)
    n_out, n_loop = _check_mouth_only(comfy, entry, "wrap")
    assert n_out < n_loop, f"a one-line script ({n_out} frames) should end inside the {n_loop}-frame loop"


def test_ditto_broadcast(comfy):
    prompt, _ = load_workflow(shipped_api_twin("broadcast_ditto"))
    prompt = apply_overrides(prompt, case_for("broadcast_ditto").prepare(comfy), comfy.object_info())
    broadcast.check_output(comfy, comfy.run(prompt, timeout=600))


@pytest.mark.parametrize("rate", [44100])
def test_every_consumer_takes_speech_at_any_rate(comfy, rate):
    """A voice clip at 44.1 kHz (OmniVoice works at 24 kHz, Whisper at 16 kHz, the MP4's AAC at 48 kHz) needs no
    wiring: each node resamples what it is given."""
    import soundfile

    from tests.fixtures import tiny_omnivoice

    prompt, _ = load_workflow(shipped_api_twin("broadcast_musetalk"))
    overrides = case_for("broadcast_musetalk").prepare(comfy)
    name = f"anchor_reference_{rate}.wav"
    if not (comfy.input_dir / name).exists():
        soundfile.write(str(comfy.input_dir / name), tiny_omnivoice.reference_voice(3.0, sample_rate=rate), rate)
    overrides.update({"Voice Clip.audio_file": name, "News Script.text": "Good evening.",
                      "Export Broadcast.filename_prefix": f"broadcast/e2e_rate_{rate}"})
    prompt = apply_overrides(prompt, overrides, comfy.object_info())
    broadcast.check_output(comfy, comfy.run(prompt, timeout=600))
