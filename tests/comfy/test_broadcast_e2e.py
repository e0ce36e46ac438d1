"""The broadcast graphs end to end on the tiny models: script -> cloned voice -> master -> lip-sync -> one MP4 -> QC.

The shipped API twins are queued with the case's overrides (tiny models). The shipped graphs stream: the lip-sync
hands its frames to Export Video as a stream (`stream_to_export`), so no IMAGE batch of the clip exists to tap. The
pixel checks therefore run on the same graph with the lip-sync's IMAGE batch wired into the export instead, plus
taps that save, losslessly, exactly what the graph hands on: the presenter loop as Load Video decoded it and the
lip-synced frames as they go into Export Video (core Save Image, 8-bit PNG; both sides quantised the same way); and
the streamed MP4 is checked to show the frames of that batch MP4. On those:
- the MP4 lasts as long as the mastered speech (within one frame) and its audio is that speech (correlation);
- every pixel outside the mouth crop of a fixed face box equals the loop frame it came from, and the loop frame is
  chosen by video time (mirror, upstream's cycle, or wrap), for a script that outlasts the loop and one that ends inside it;
- Broadcast QC's verdict on the file is in the history as the batch runner's ledger records it, every check
  reported, the checks any broadcast must pass passed (`tests/fixtures/broadcast.check_qc`).
(The editor run and the `comfy run` run of the same files are in test_workflows_browser / _comfy_cli.)
"""
from __future__ import annotations

import numpy as np
import pytest

from scripts.workflow_api import apply_overrides, load_workflow
from tests.fixtures import broadcast
from tests.workflow_cases import case_for, shipped_api_twin

FACE_BOX = broadcast.MUSETALK_FACE_BOX     # the astronaut's face in the fixture loop, x1, y1, x2, y2
CROP = dict(top=0.08, bottom=0.22, side=0.0)   # the shipped MuseTalk Avatar margins


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
    if loop_frames is not None:
        overrides["Presenter Loop.video"] = broadcast.write_musetalk_loop(
            comfy.input_dir, f"broadcast_presenter_{loop_frames}.mp4", frames=loop_frames)
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


def _check_mouth_only(comfy, entry, loop_mode):
    loop = _png_frames(comfy, entry, "tap_loop")
    out = _png_frames(comfy, entry, "tap_frames")
    x1, y1, x2, y2 = FACE_BOX
    h = y2 - y1
    inside = np.zeros(out.shape[1:3], bool)
    inside[max(0, int(y1 - CROP["top"] * h)):int(np.ceil(y2 + CROP["bottom"] * h)) + 1, x1:x2 + 1] = True
    changed = 0
    for i, frame in enumerate(out):
        src = loop[_loop_index(i, len(loop), loop_mode)]
        diff = np.any(frame != src, axis=-1)
        assert not diff[~inside].any(), (
            f"frame {i}: {int(diff[~inside].sum())} pixels outside the mouth crop differ from loop frame "
            f"{_loop_index(i, len(loop), loop_mode)} ({loop_mode})")
        changed += int(diff[inside].sum())
    assert changed > 0, "no pixel inside the mouth crop changed: nothing was lip-synced"
    return len(out), len(loop)


def test_musetalk_broadcast_longer_than_the_loop_mirrors(comfy):
    streamed = _run_musetalk(comfy, "long")
    broadcast.check_output(comfy, streamed)
    entry = _run_musetalk(comfy, "long_batch", batch=True)
    broadcast.check_output(comfy, entry)
    n_out, n_loop = _check_mouth_only(comfy, entry, "mirror")
    assert n_out > n_loop, f"the default script ({n_out} frames) should outlast the {n_loop}-frame loop"
    _same_picture(comfy, streamed, entry)


def test_musetalk_broadcast_shorter_than_the_loop_wraps(comfy):
    entry = _run_musetalk(comfy, "short", script="Good evening.", loop_mode="wrap", loop_frames=30, batch=True)
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
