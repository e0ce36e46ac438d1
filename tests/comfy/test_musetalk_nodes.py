"""The MuseTalk node chain through a real ComfyUI on the CPU with the tiny networks: load video and speech, track,
precompile (then reuse) the avatar, lip-sync, export with audio; streaming to a file; bad inputs."""
import json
import math

import av
import pytest

from engines.common.cache import ContentCache
from engines.export import reader
from engines.musetalk.avatar import CACHE_NAMESPACE
from tests.fixtures.tiny_musetalk import install_tiny_musetalk, write_inputs

EXPORT = {"fps": 10.0, "encoder": "auto", "preset": "auto", "tune": "auto", "rate_control": "cq", "quality": 19,
          "bitrate_kbps": 8000, "gop_seconds": 1.0, "bit_depth": "8", "faststart": True, "audio_mode": "match_video",
          "audio_bitrate_kbps": 192}
AVATAR = {"crop_top": 0.08, "crop_bottom": 0.22, "crop_side": 0.0, "mouth_feather": 0.5, "batch_size": 4}
LIPSYNC = {"batch_size": 4, "stride": 2, "fps": 0.0, "loop_mode": "loop", "stream_to_file": False,
           "filename_prefix": "broadcast/musetalk_test"}


@pytest.fixture(scope="module")
def inputs(comfy):
    install_tiny_musetalk(comfy.models_dir)
    return write_inputs(comfy.input_dir, loop_frames=6, fps=10.0, seconds=1.0)


def chain(loop_file, speech_file, *, track=None, lipsync=None, model="tiny-musetalk",
          export_prefix="broadcast/musetalk_t", frame_cap=0):
    prompt = {
        "1": {"class_type": "BroadcastLoadVideo",
              "inputs": {"video": loop_file, "frame_cap": frame_cap, "skip_first_frames": 0, "target_fps": 0.0}},
        "2": {"class_type": "BroadcastLoadAudio",
              "inputs": {"audio_file": speech_file, "start_seconds": 0.0, "duration_seconds": 0.0}},
        "3": {"class_type": "BroadcastMuseTalkLoader", "inputs": {"model_name": model, "precision": "auto"}},
        "4": {"class_type": "BroadcastFaceTrack",
              "inputs": {"images": ["1", 0], "detector": "auto", "detect_every": 2, "proxy_size": 160, "box": "",
                         **(track or {})}},
        "5": {"class_type": "BroadcastMuseTalkAvatar",
              "inputs": {**AVATAR, "musetalk_model": ["3", 0], "images": ["1", 0], "face_track": ["4", 0],
                         "fps": ["1", 2]}},
        "6": {"class_type": "BroadcastMuseTalkLipSync",
              "inputs": {**LIPSYNC, **(lipsync or {}), "musetalk_model": ["3", 0], "avatar": ["5", 0],
                         "audio": ["2", 0]}},
    }
    if export_prefix:
        prompt["7"] = {"class_type": "BroadcastExportVideo",
                       "inputs": {**EXPORT, "filename_prefix": export_prefix, "images": ["6", 0], "audio": ["6", 1],
                                  "fps": ["6", 2]}}
    return prompt


def _avatars(comfy):
    root = comfy.models_dir / "broadcast_cache" / CACHE_NAMESPACE
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


def test_nodes_are_listed_with_their_types(comfy, inputs):
    info = comfy.object_info()
    assert info["BroadcastMuseTalkLoader"]["output"] == ["BROADCAST_MUSETALK_MODEL"]
    assert info["BroadcastFaceTrack"]["output"] == ["BROADCAST_FACE_TRACK"]
    assert info["BroadcastMuseTalkAvatar"]["output"] == ["BROADCAST_MUSETALK_AVATAR"]
    assert info["BroadcastMuseTalkLipSync"]["output"][:2] == ["IMAGE", "AUDIO"]
    assert info["BroadcastMuseTalkLipSync"]["output_name"][:2] == ["images", "audio"]
    assert "tiny-musetalk" in info["BroadcastMuseTalkLoader"]["input"]["required"]["model_name"][1]["options"]
    assert info["BroadcastFaceTrack"]["input"]["optional"]["mask"][0] == "MASK"


def test_chain_exports_lipsynced_video_with_audio_and_reuses_the_avatar(comfy, inputs):
    loop_file, speech_file = inputs
    # The server's cache is shared by the whole session (the broadcast and fuzz tests make avatars of this loop too):
    # start from an empty avatar namespace so the first run here is a build.
    ContentCache(comfy.models_dir / "broadcast_cache").clear(CACHE_NAMESPACE)
    entry = comfy.run(chain(loop_file, speech_file, export_prefix="broadcast/musetalk_chain"))
    item = entry["outputs"]["7"]["images"][0]
    path = comfy.output_dir / item["subfolder"] / item["filename"]
    info = reader.probe(path)
    assert (info.width, info.height) == (192, 256)
    assert info.frame_count == math.floor(1.0 * 10)                  # output length follows the audio
    with av.open(str(path)) as c:
        assert c.streams.audio[0].codec_context.name == "aac"
    assert len(_avatars(comfy)) == 1
    assert "precompiled" in entry["outputs"]["5"]["text"][0]
    # backend auto on the CPU, per network, each with the measurement behind its choice (eager for both today)
    text = entry["outputs"]["6"]["text"][0]
    assert "musetalk_unet: auto picked eager (fp32); auto order on cpu: eager (ONNX Runtime measured" in text
    assert "musetalk_vae_decoder: auto picked eager (fp32); auto order on cpu: eager (ONNX Runtime measured" in text
    # Same frames again, but through a changed loader setting (a cap equal to the clip's length), so ComfyUI's own
    # cache does not skip the nodes: the avatar node runs and loads the avatar from the pack's cache.
    again = comfy.run(chain(loop_file, speech_file, frame_cap=6, lipsync={"stride": 1}))
    assert "loaded from cache" in again["outputs"]["5"]["text"][0]
    assert len(_avatars(comfy)) == 1


def test_streaming_to_file_writes_the_clip_and_returns_the_last_frame(comfy, inputs):
    loop_file, speech_file = inputs
    entry = comfy.run(chain(loop_file, speech_file, lipsync={"stream_to_file": True, "batch_size": 3,
                                                            "filename_prefix": "broadcast/musetalk_stream"},
                            export_prefix="broadcast/musetalk_last_frame"))
    item = entry["outputs"]["6"]["images"][0]
    path = comfy.output_dir / item["subfolder"] / item["filename"]
    assert path.name.startswith("musetalk_stream_") and path.suffix == ".mp4"
    assert reader.probe(path).frame_count == 10
    with av.open(str(path)) as c:
        assert len(c.streams.audio) == 1
        assert json.loads(c.metadata["prompt"])["6"]["class_type"] == "BroadcastMuseTalkLipSync"
    assert "libx264" in entry["outputs"]["6"]["text"][0] or "nvenc" in entry["outputs"]["6"]["text"][0]
    assert "musetalk_unet: auto picked eager" in "\n".join(entry["outputs"]["6"]["text"])   # the backend, as in batch


def _decoded(comfy, item):
    import numpy as np

    with av.open(str(comfy.output_dir / item["subfolder"] / item["filename"])) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])])


def test_streaming_to_export_encodes_the_frames_of_the_batch_path(comfy, inputs):
    """stream_to_export: Export Video pulls the frames while it encodes; the file shows the frames the IMAGE batch
    path gives (same encoder and settings: equal up to where run-to-run float noise of the tiny networks tips an
    encoder decision, above 40 dB PSNR), and Lip Sync shows what it handed on."""
    import numpy as np

    loop_file, speech_file = inputs
    batch = comfy.run(chain(loop_file, speech_file, export_prefix="broadcast/musetalk_batch"))
    prompt = chain(loop_file, speech_file, lipsync={"stream_to_export": True},
                   export_prefix="broadcast/musetalk_handed")
    assert comfy.object_info()["BroadcastMuseTalkLipSync"]["output"][4] == "BROADCAST_FRAME_STREAM"
    prompt["7"]["inputs"]["images"] = ["6", 4]
    streamed = comfy.run(prompt)
    assert "10 frames at 10 fps" in streamed["outputs"]["6"]["text"][0]
    assert "musetalk_vae_decoder: auto picked eager" in streamed["outputs"]["6"]["text"][0]
    a, b = _decoded(comfy, batch["outputs"]["7"]["images"][0]), _decoded(comfy, streamed["outputs"]["7"]["images"][0])
    assert a.shape == b.shape == (10, 256, 192, 3)
    psnr = 10 * np.log10(255.0 ** 2 / max(float(((a.astype(np.float64) - b) ** 2).mean()), 1e-12))
    assert psnr > 40.0, f"the streamed export differs from the batch export: PSNR {psnr:.1f} dB"
    both = chain(loop_file, speech_file, lipsync={"stream_to_export": True, "stream_to_file": True})
    status, body = comfy.request("POST", "/prompt", {"prompt": both})
    assert status == 400 and "stream_to_export" in str(body)


def test_fixed_box_track_skips_the_detector(comfy, inputs):
    loop_file, speech_file = inputs
    entry = comfy.run(chain(loop_file, speech_file, track={"box": "40, 30, 110, 100"}))
    assert "(box)" in entry["outputs"]["4"]["text"][0]
    shown = entry["outputs"]["4"]["images"]                       # the preview frames with the box drawn
    assert len(shown) == 4 and all(item["type"] == "temp" for item in shown)


def test_missing_model_folder_is_a_clear_error(comfy, inputs):
    loop_file, speech_file = inputs
    broken = comfy.models_dir / "musetalk" / "half-copied"
    (broken / "musetalkV15").mkdir(parents=True, exist_ok=True)
    (broken / "musetalkV15" / "musetalk.json").write_text("{}")
    err = comfy.run_error(chain(loop_file, speech_file, model="half-copied"))
    assert "model_name" in err["exception_message"]
    message = err["exception_message"]
    assert "musetalkV15/unet" in message and "whisper/preprocessor_config.json" in message


def test_no_face_anywhere_names_the_images(comfy, inputs, tmp_path):
    from tests.fixtures.tiny_musetalk import write_clip
    import torch

    write_clip(comfy.input_dir / "musetalk_blank.mp4", torch.full((4, 64, 64, 3), 0.4), 10.0)
    err = comfy.run_error(chain("musetalk_blank.mp4", inputs[1]))
    assert err["node_type"] == "BroadcastFaceTrack"
    assert "images" in err["exception_message"] and "face" in err["exception_message"]


def test_scrfd_detector_from_the_models_folder(comfy, inputs):
    """An SCRFD .onnx under models/musetalk is offered by the Face Track node and runs through onnxruntime."""
    import torch

    from tests.fixtures.tiny_musetalk import bright_cell_frame, write_clip, write_test_scrfd

    name = "musetalk/detectors/scrfd_test.onnx"
    onnx = write_test_scrfd(comfy.models_dir / name)
    try:
        frames = torch.stack([torch.from_numpy(bright_cell_frame(4 + k % 2, 3)).float() / 255 for k in range(4)])
        write_clip(comfy.input_dir / "musetalk_cells.mp4", frames, 10.0)
        options = comfy.object_info()["BroadcastFaceTrack"]["input"]["required"]["detector"][1]["options"]
        assert name in options
        entry = comfy.run(chain("musetalk_cells.mp4", inputs[1], track={"detector": name, "proxy_size": 0}))
        assert "(scrfd)" in entry["outputs"]["4"]["text"][0]
    finally:
        onnx.unlink()      # "auto" in the other tests must keep meaning the Haar cascade


def test_bad_choices_are_refused_before_anything_runs(comfy, inputs):
    from scripts.comfyui.server import PromptFailed

    loop_file, speech_file = inputs
    with pytest.raises(PromptFailed, match="loop_mode"):
        comfy.queue(chain(loop_file, speech_file, lipsync={"loop_mode": "shuffle"}))
    with pytest.raises(PromptFailed, match="filename_prefix"):
        comfy.queue(chain(loop_file, speech_file, lipsync={"filename_prefix": "../outside"}))
    with pytest.raises(PromptFailed, match="box"):
        comfy.queue(chain(loop_file, speech_file, track={"box": "1, 2, 3"}))
    with pytest.raises(PromptFailed, match="detector"):
        comfy.queue(chain(loop_file, speech_file, track={"detector": "musetalk/none.onnx"}))
    # A bad precision: refused by core's combo check when queued (0.33.0), or by the loader before it loads
    # anything (0.3.75 does not check V3 combos, and the loader's validate_inputs names only model_name, since
    # ComfyUI repeats a refusal under every input named there).
    prompt = chain(loop_file, speech_file)
    prompt["3"]["inputs"]["precision"] = "fp8"
    assert "precision" in comfy.run_error(prompt)["exception_message"]


def test_colour_transfer_and_poisson_paste_back_change_only_the_mouth(comfy, inputs):
    import numpy as np

    loop_file, speech_file = inputs
    info = comfy.object_info()["BroadcastMuseTalkLipSync"]["input"]["optional"]["blend"]
    assert info[1]["options"] == ["feather", "reinhard", "poisson"]
    frames = {}
    for mode in ("feather", "reinhard", "poisson"):
        prompt = chain(loop_file, speech_file, lipsync={"blend": mode}, export_prefix=None)
        prompt["9"] = {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": f"mt_{mode}"}}
        entry = comfy.run(prompt)
        item = entry["outputs"]["9"]["images"][0]
        from PIL import Image

        frames[mode] = np.asarray(Image.open(comfy.output_dir / item["subfolder"] / item["filename"]))
    differs = [np.any(frames[m] != frames["feather"], axis=2) for m in ("reinhard", "poisson")]
    for d in differs:
        ys, xs = np.nonzero(d)
        assert d.any()
        # the mouth sits in the lower middle of the face box; rows above it (hair, eyes) never change
        assert ys.min() > frames["feather"].shape[0] * 0.25
    from scripts.comfyui.server import PromptFailed

    with pytest.raises(PromptFailed, match="blend"):
        comfy.queue(chain(loop_file, speech_file, lipsync={"blend": "multiply"}))


def test_adaptive_stride_runs_fewer_frames_through_the_unet(comfy, inputs):
    loop_file, speech_file = inputs
    # The tiny random Whisper moves ~0.15 per frame: a threshold above it makes every span steady (max_stride),
    # one of 0 makes every span fast (stride 1), so both bounds are reached through the node.
    steady = comfy.run(chain(loop_file, speech_file, export_prefix="broadcast/musetalk_adaptive",
                             lipsync={"stride": 1, "stride_mode": "adaptive", "max_stride": 4,
                                      "velocity_threshold": 5.0}))
    assert steady["outputs"]["6"]["text"][0].startswith("10 frames, 4 through the UNet")      # keyframes 0 4 8 9
    fast = comfy.run(chain(loop_file, speech_file, export_prefix="broadcast/musetalk_adaptive",
                           lipsync={"stride": 1, "stride_mode": "adaptive", "max_stride": 4,
                                    "velocity_threshold": 0.0}))
    assert fast["outputs"]["6"]["text"][0].startswith("10 frames, 10 through the UNet")


def test_bad_stride_settings_are_refused(comfy, inputs):
    from scripts.comfyui.server import PromptFailed

    loop_file, speech_file = inputs
    with pytest.raises(PromptFailed, match="stride_mode"):
        comfy.queue(chain(loop_file, speech_file, export_prefix="broadcast/musetalk_adaptive", lipsync={"stride_mode": "sometimes"}))
    with pytest.raises(PromptFailed, match="max_stride"):
        comfy.run(chain(loop_file, speech_file, export_prefix="broadcast/musetalk_adaptive",
                        lipsync={"stride": 3, "stride_mode": "adaptive", "max_stride": 2}))


def test_backend_choice_is_shown_and_a_missing_tensorrt_falls_back_by_name(comfy, inputs):
    loop_file, speech_file = inputs
    prompt = chain(loop_file, speech_file, export_prefix="broadcast/musetalk_backend")
    prompt["3"]["inputs"]["backend"] = "tensorrt"
    entry = comfy.run(prompt)
    text = entry["outputs"]["6"]["text"][0]
    assert "musetalk_unet: eager" in text and "musetalk_vae_decoder: eager" in text
    assert "not used: tensorrt: TensorRT is not installed" in text
    assert comfy.object_info()["BroadcastMuseTalkLoader"]["input"]["optional"]["backend"][1]["default"] == "auto"


def test_viseme_cache_through_the_node_exact_is_identical_and_a_loose_one_reuses(comfy, inputs):
    import numpy as np
    from PIL import Image

    loop_file, speech_file = inputs
    info = comfy.object_info()["BroadcastMuseTalkLipSync"]["input"]["optional"]
    assert info["viseme_threshold"][1]["default"] == -1 and info["viseme_cache_size"][1]["default"] == 512
    frames, texts = {}, {}
    for name, th in (("off", -1), ("exact", 0), ("loose", 32)):
        prompt = chain(loop_file, speech_file, lipsync={"stride": 1, "viseme_threshold": th}, export_prefix=None)
        prompt["9"] = {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": f"mt_vis_{name}"}}
        entry = comfy.run(prompt)
        texts[name] = entry["outputs"]["6"]["text"][0]
        frames[name] = [np.asarray(Image.open(comfy.output_dir / i["subfolder"] / i["filename"]))
                        for i in entry["outputs"]["9"]["images"]]
    assert "viseme" not in texts["off"]
    assert "viseme cache (exact)" in texts["exact"]
    assert all(np.array_equal(a, b) for a, b in zip(frames["exact"], frames["off"]))
    assert "viseme cache (Hamming <= 32 of 64 bits)" in texts["loose"]
    hits = int(texts["loose"].split("viseme cache (Hamming <= 32 of 64 bits): ")[1].split(" of ")[0])
    assert hits > 0 and texts["loose"].startswith(f"10 frames, {10 - hits} through the UNet")
    from scripts.comfyui.server import PromptFailed

    with pytest.raises(PromptFailed, match="viseme_threshold"):
        comfy.run(chain(loop_file, speech_file, lipsync={"viseme_threshold": 40}))
