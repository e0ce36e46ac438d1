"""The Ditto node chain through a real ComfyUI with the tiny networks: render, export with audio, the packet cache,
streaming to a file, and bad inputs."""
import json
import math

import av
import pytest

from engines.common.cache import ContentCache
from engines.ditto.avatar import NAMESPACE
from engines.export import reader
from tests.fixtures.tiny_ditto import install_tiny_ditto, write_inputs

MOTION = {"steps_preset": "4", "custom_steps": 50, "seed": 3, "emotion": "neutral", "drive_eyes": "auto",
          "blinks": "off", "blink_gap": 80, "delta_pitch": 0.0, "delta_yaw": 0.0, "delta_roll": 0.0,
          "pose_smoothing": 0, "loop_mode": "mirror"}
RENDER = {"batch_size": 4, "cadence_stride": 2, "silence_bypass": True, "silence_threshold": 0.008, "ease_frames": 3,
          "stream_to_file": False, "filename_prefix": "broadcast/ditto_test"}
EXPORT = {"fps": 25.0, "encoder": "auto", "preset": "auto", "tune": "auto", "rate_control": "cq", "quality": 19,
          "bitrate_kbps": 8000, "gop_seconds": 1.0, "bit_depth": "8", "faststart": True, "audio_mode": "match_video",
          "audio_bitrate_kbps": 192}


@pytest.fixture(scope="module")
def inputs(comfy):
    install_tiny_ditto(comfy.models_dir)
    return write_inputs(comfy.input_dir, seconds=1.6)


def chain(portrait_file, speech_file, *, motion=None, render=None, export_prefix=None):
    prompt = {
        "1": {"class_type": "LoadImage", "inputs": {"image": portrait_file}},
        "2": {"class_type": "BroadcastLoadAudio",
              "inputs": {"audio_file": speech_file, "start_seconds": 0.0, "duration_seconds": 0.0}},
        "3": {"class_type": "BroadcastDittoLoader", "inputs": {"model_name": "tiny-ditto", "precision": "auto"}},
        "4": {"class_type": "BroadcastDittoAvatar",
              "inputs": {"ditto_model": ["3", 0], "images": ["1", 0], "crop_scale": 2.3, "crop_vy_ratio": -0.125,
                         "loop_smoothing": 13, "batch_size": 4}},
        "5": {"class_type": "BroadcastDittoAudioFeatures", "inputs": {"ditto_model": ["3", 0], "audio": ["2", 0]}},
        "6": {"class_type": "BroadcastDittoMotion",
              "inputs": {**MOTION, **(motion or {}), "ditto_model": ["3", 0], "avatar": ["4", 0],
                         "audio_features": ["5", 0]}},
        "7": {"class_type": "BroadcastDittoRender",
              "inputs": {**RENDER, **(render or {}), "ditto_model": ["3", 0], "avatar": ["4", 0],
                         "motion": ["6", 0], "audio": ["2", 0]}},
    }
    if export_prefix:
        prompt["8"] = {"class_type": "BroadcastExportVideo",
                       "inputs": {**EXPORT, "filename_prefix": export_prefix, "images": ["7", 0], "audio": ["7", 1]}}
    return prompt


def _packets(comfy):
    root = comfy.models_dir / "broadcast_cache" / NAMESPACE
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


def test_nodes_are_listed_with_their_types(comfy, inputs):
    info = comfy.object_info()
    assert info["BroadcastDittoLoader"]["output"] == ["BROADCAST_DITTO_MODEL"]
    assert info["BroadcastDittoAvatar"]["output"] == ["BROADCAST_DITTO_AVATAR"]
    assert info["BroadcastDittoAudioFeatures"]["output"] == ["BROADCAST_DITTO_AUDIO_FEATURES"]
    assert info["BroadcastDittoMotion"]["output"] == ["BROADCAST_DITTO_MOTION"]
    assert info["BroadcastDittoRender"]["output"][:2] == ["IMAGE", "AUDIO"]
    assert info["BroadcastDittoRender"]["input"]["optional"]["audio"][0] == "AUDIO"
    assert "tiny-ditto" in info["BroadcastDittoLoader"]["input"]["required"]["model_name"][1]["options"]


def test_chain_exports_a_talking_head_with_audio_and_reuses_the_packet(comfy, inputs):
    portrait_file, speech_file = inputs
    # The server's cache is shared by the whole session (the broadcast and fuzz tests make packets too): start from
    # an empty packet namespace so the count below is this test's own.
    ContentCache(comfy.models_dir / "broadcast_cache").clear(NAMESPACE)
    entry = comfy.run(chain(portrait_file, speech_file, export_prefix="broadcast/ditto_chain"))
    item = entry["outputs"]["8"]["images"][0]
    path = comfy.output_dir / item["subfolder"] / item["filename"]
    info = reader.probe(path)
    assert (info.width, info.height) == (128, 160)
    assert info.frame_count == math.ceil(1.6 * 25)
    with av.open(str(path)) as c:
        assert c.streams.audio[0].codec_context.name == "aac"
    packets = _packets(comfy)
    assert len(packets) == 1
    # another seed: motion and render run again, the avatar packet is loaded, not rebuilt
    comfy.run(chain(portrait_file, speech_file, motion={"seed": 4}, export_prefix="broadcast/ditto_chain2"))
    assert _packets(comfy) == packets


def test_streaming_render_writes_the_mp4_itself(comfy, inputs):
    portrait_file, speech_file = inputs
    entry = comfy.run(chain(portrait_file, speech_file,
                            render={"stream_to_file": True, "filename_prefix": "broadcast/ditto_stream",
                                    "cadence_stride": 1}))
    files = sorted((comfy.output_dir / "broadcast").glob("ditto_stream_*.mp4"))
    assert len(files) == 1
    info = reader.probe(files[0])
    assert info.frame_count == math.ceil(1.6 * 25) and (info.width, info.height) == (128, 160)
    assert not list((comfy.output_dir / "broadcast").glob(".*partial*"))
    assert entry["status"]["status_str"] == "success"
    assert "auto picked" in "\n".join(entry["outputs"]["7"]["text"])      # the backend summary, as in batch mode
    shown = entry["outputs"]["7"]["images"][0]          # previewed in the node, as Export Video does
    assert (shown["filename"], shown["subfolder"], shown["type"]) == (files[0].name, "broadcast", "output")
    with av.open(str(files[0])) as c:                   # and the workflow is embedded, as Export Video does
        assert json.loads(c.metadata["prompt"])["7"]["class_type"] == "BroadcastDittoRender"


def test_streaming_to_export_hands_the_frames_to_export_video(comfy, inputs):
    """stream_to_export: the render runs while Export Video encodes (its 'frames' into the export's 'images')."""
    portrait_file, speech_file = inputs
    prompt = chain(portrait_file, speech_file, render={"stream_to_export": True, "cadence_stride": 1},
                   export_prefix="broadcast/ditto_handed")
    prompt["8"]["inputs"]["images"] = ["7", 3]
    prompt["8"]["inputs"]["fps"] = 30.0          # e.g. linked from a 30 fps loop: the stream's own rate must win
    entry = comfy.run(prompt)
    item = entry["outputs"]["8"]["images"][0]
    info = reader.probe(comfy.output_dir / item["subfolder"] / item["filename"])
    assert info.frame_count == math.ceil(1.6 * 25) and (info.width, info.height) == (128, 160)
    assert abs(info.fps - 25.0) < 1e-6 and abs(info.duration - 1.6) <= 1 / 25   # lips stay on the speech
    assert f"{math.ceil(1.6 * 25)} frames at 25 fps" in entry["outputs"]["7"]["text"][0]
    assert "auto picked" in entry["outputs"]["7"]["text"][0]
    assert "fps 30 ignored: Ditto Render streams its frames at 25 fps" in entry["outputs"]["8"]["text"][0]


def test_render_says_its_rate_for_the_export(comfy, inputs):
    """The fps output (what broadcast_ditto links into Export Video, so Load Video need not run on a packet hit)."""
    portrait_file, speech_file = inputs
    prompt = chain(portrait_file, speech_file, render={"cadence_stride": 2}, export_prefix="broadcast/ditto_rate")
    prompt["8"]["inputs"]["fps"] = ["7", 4]
    entry = comfy.run(prompt)
    item = entry["outputs"]["8"]["images"][0]
    assert abs(reader.probe(comfy.output_dir / item["subfolder"] / item["filename"]).fps - 25.0) < 1e-6


def test_a_portrait_without_a_face_is_refused_by_name(comfy, inputs):
    import cv2
    import numpy as np

    dark = comfy.input_dir / "ditto_dark.png"
    if not dark.exists():
        cv2.imwrite(str(dark), np.full((160, 128, 3), 20, np.uint8))
    before = _packets(comfy)
    err = comfy.run_error(chain(dark.name, inputs[1]))
    assert err["node_type"] == "BroadcastDittoAvatar"
    assert "images: expected frames showing a face" in err["exception_message"]
    assert _packets(comfy) == before


def test_interrupting_a_streaming_render_leaves_no_file(comfy, inputs):
    import time

    import soundfile

    from tests.fixtures.tiny_ditto import speech

    long_wav = comfy.input_dir / "ditto_long.wav"
    if not long_wav.exists():
        soundfile.write(str(long_wav), speech(12.0)["waveform"][0, 0].numpy(), 16000)
    folder = comfy.output_dir / "ditto_interrupt"
    prompt = chain(inputs[0], long_wav.name, render={"stream_to_file": True, "cadence_stride": 1,
                                                     "filename_prefix": "ditto_interrupt/clip"})
    prompt_id = comfy.queue(prompt)
    deadline = time.monotonic() + 240
    while not (folder.is_dir() and any(".partial" in p.name for p in folder.iterdir())):
        assert time.monotonic() < deadline, "the streaming render never started writing"
        time.sleep(0.05)
    comfy.interrupt()
    entry = comfy.wait(prompt_id, timeout=240)
    assert entry["status"]["status_str"] == "error"
    assert any(kind == "execution_interrupted" for kind, _ in entry["status"]["messages"])
    assert list(folder.iterdir()) == []


def test_a_streaming_prefix_outside_the_output_folder_is_refused_when_queued(comfy, inputs):
    status, body = comfy.request("POST", "/prompt", {"prompt": chain(
        *inputs, render={"stream_to_file": True, "filename_prefix": "../../escape"})})
    assert status == 400
    assert "filename_prefix" in str(body)
    assert not any(comfy.base_dir.rglob("escape_*.mp4"))


def test_living_face_emotion_steering_and_head_lock_run_from_the_motion_node(comfy, inputs):
    info = comfy.object_info()["BroadcastDittoMotion"]["input"]
    assert "natural" in info["required"]["blinks"][1]["options"]
    assert {"blinks_per_minute", "saccades", "emotion_steering", "head_lock"} <= set(info["optional"])
    assert "angry, disgust, fear, happy, neutral" in info["required"]["emotion"][1]["tooltip"]  # the order
    portrait_file, speech_file = inputs
    motion = {"drive_eyes": "on", "blinks": "natural", "blinks_per_minute": 40.0, "saccades": True,
              "emotion_steering": 1.0, "head_lock": True}
    entry = comfy.run(chain(portrait_file, speech_file, motion=motion, export_prefix="broadcast/ditto_living"))
    item = entry["outputs"]["8"]["images"][0]
    assert reader.probe(comfy.output_dir / item["subfolder"] / item["filename"]).frame_count == math.ceil(1.6 * 25)
    status, body = comfy.request("POST", "/prompt", {"prompt": chain(*inputs, motion={"emotion_steering": 9.0})})
    assert status == 400 and "6" in body.get("node_errors", {}), body


def test_putback_blend_modes_through_the_render_node(comfy, inputs):
    import numpy as np
    from PIL import Image

    portrait_file, speech_file = inputs
    info = comfy.object_info()["BroadcastDittoRender"]["input"]["optional"]["blend"]
    assert info[0] == ["feather", "reinhard", "poisson"] or info[1]["options"] == ["feather", "reinhard", "poisson"]
    frames = {}
    for mode in ("feather", "reinhard", "poisson"):
        prompt = chain(portrait_file, speech_file, render={"blend": mode, "silence_bypass": False})
        prompt["9"] = {"class_type": "SaveImage", "inputs": {"images": ["7", 0], "filename_prefix": f"dt_{mode}"}}
        entry = comfy.run(prompt)
        item = entry["outputs"]["9"]["images"][3]
        frames[mode] = np.asarray(Image.open(comfy.output_dir / item["subfolder"] / item["filename"]))
    for mode in ("reinhard", "poisson"):
        changed = np.any(frames[mode] != frames["feather"], axis=2)
        assert changed.any() and not changed.all(), mode          # the face changes, not the whole frame
    status, body = comfy.request("POST", "/prompt", {"prompt": chain(*inputs, render={"blend": "multiply"})})
    assert status == 400 and "blend" in str(body)
