"""The export nodes through a real ComfyUI: load -> export with audio, the preview, interrupts and bad prefixes."""
import json
import time

import av
import pytest

from engines.export import reader
from scripts.sample_clip import SAMPLE_NAME, make_sample_clip

EXPORT_DEFAULTS = {
    "fps": 24.0, "filename_prefix": "broadcast/test", "encoder": "auto", "preset": "auto", "tune": "auto",
    "rate_control": "cq", "quality": 19, "bitrate_kbps": 8000, "gop_seconds": 1.0, "bit_depth": "8",
    "faststart": True, "audio_mode": "match_video", "audio_bitrate_kbps": 192,
}


@pytest.fixture(scope="module")
def sample(comfy):
    path = comfy.input_dir / SAMPLE_NAME
    if not path.exists():
        make_sample_clip(path)
    return SAMPLE_NAME


def load_and_export(video, **export):
    return {
        "1": {"class_type": "BroadcastLoadVideo",
              "inputs": {"video": video, "frame_cap": 0, "skip_first_frames": 0, "target_fps": 0.0}},
        "2": {"class_type": "BroadcastExportVideo",
              "inputs": {**EXPORT_DEFAULTS, "images": ["1", 0], "audio": ["1", 1], "fps": ["1", 2], **export}},
    }


def test_nodes_are_listed_with_their_types(comfy):
    info = comfy.object_info()
    export = info["BroadcastExportVideo"]
    assert export["output"] == ["VIDEO", "STRING"] and export["output_node"] is True
    assert export["input"]["required"]["images"][0] == "IMAGE,BROADCAST_FRAME_STREAM"   # a batch or a renderer's stream
    assert export["input"]["optional"]["audio"][0] == "AUDIO"
    assert info["BroadcastLoadVideo"]["output"] == ["IMAGE", "AUDIO", "FLOAT", "INT"]
    assert info["BroadcastLoadAudio"]["output"] == ["AUDIO"]


def test_export_with_audio_writes_a_playable_mp4_and_previews_it(comfy, sample):
    entry = comfy.run(load_and_export(sample, filename_prefix="broadcast/with_audio"))
    ui = entry["outputs"]["2"]
    item = ui["images"][0]
    assert item["type"] == "output" and item["subfolder"] == "broadcast" and ui["animated"][0] is True
    assert item["filename"].startswith("with_audio_") and item["filename"].endswith(".mp4")
    path = comfy.output_dir / item["subfolder"] / item["filename"]
    assert path.is_file()
    assert "libx264" in ui["text"][0] or "nvenc" in ui["text"][0]
    with av.open(str(path)) as c:
        assert c.streams.video[0].codec_context.name == "h264" and c.streams.audio[0].codec_context.name == "aac"
        assert json.loads(c.metadata["prompt"])["2"]["class_type"] == "BroadcastExportVideo"  # as core Save Video
    info = reader.probe(path)
    assert (info.width, info.height, info.frame_count) == (256, 448, 96)
    samples, rate = reader.read_audio(path)
    assert abs(samples.shape[1] / rate - info.frame_count / float(info.fps)) <= 1 / float(info.fps)
    # Nothing else was left in the output folder (no partial file, no silent intermediate).
    assert sorted(p.name for p in (comfy.output_dir / "broadcast").iterdir() if "with_audio" in p.name) == [path.name]


def test_load_nodes_apply_cap_skip_and_rate(comfy, sample):
    prompt = load_and_export(sample, filename_prefix="broadcast/capped", audio_mode="shortest")
    prompt["1"]["inputs"].update({"frame_cap": 20, "skip_first_frames": 10, "target_fps": 12.0})
    prompt["3"] = {"class_type": "BroadcastLoadAudio",
                   "inputs": {"audio_file": sample, "start_seconds": 0.5, "duration_seconds": 1.0}}
    prompt["2"]["inputs"]["audio"] = ["3", 0]
    entry = comfy.run(prompt)
    item = entry["outputs"]["2"]["images"][0]
    info = reader.probe(comfy.output_dir / item["subfolder"] / item["filename"])
    # 20 frames at 12 fps is 1.67 s; the 1.0 s of audio is shorter, so "shortest" keeps ceil(1.0 * 12) = 12 frames.
    assert (float(info.fps), info.frame_count) == (12.0, 12)


def test_interrupt_during_a_long_export_leaves_no_partial_file(comfy, sample):
    folder = comfy.output_dir / "interrupted"
    # x265 at its slowest preset: slow enough on a CPU to interrupt mid-encode.
    prompt = load_and_export(sample, filename_prefix="interrupted/clip", encoder="x265", preset="veryslow",
                             rate_control="constqp", quality=0, bit_depth="10")
    prompt_id = comfy.queue(prompt)
    deadline = time.monotonic() + 120
    while not (folder.is_dir() and any(p.name.endswith(".partial.mp4") for p in folder.iterdir())):
        assert time.monotonic() < deadline, "the export never started writing"
        time.sleep(0.05)
    comfy.interrupt()
    entry = comfy.wait(prompt_id, timeout=120)
    assert entry["status"]["status_str"] == "error"
    assert any(kind == "execution_interrupted" for kind, _ in entry["status"]["messages"])
    assert list(folder.iterdir()) == []


def test_prefix_leaving_the_output_folder_is_refused(comfy, sample):
    error = comfy.run_error(load_and_export(sample, filename_prefix="../../escape"))
    assert "filename_prefix: expected a relative name inside the output folder" in error["exception_message"]
    assert not (comfy.output_dir.parent / "escape_00001.mp4").exists()
    assert not any(comfy.base_dir.rglob("escape_*.mp4"))
