"""SAM3 nodes through the real ComfyUI server, offline, with the tiny random SAM3 video model.

loader -> video mask (two prompt lines) -> masks saved as images; progress per frame on the websocket; bad inputs
fail with the input named; the adapter for core's track data is registered with core's type.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from tests.fixtures.tiny_sam3 import install_tiny_sam3

FRAMES = 6
MASK_NODES = ("BroadcastSam3VideoMask", "BroadcastSam3TrackToMasks")


@pytest.fixture(scope="module")
def tiny(comfy):
    install_tiny_sam3(comfy.models_dir)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (40, 64, 3), dtype=np.uint8)).save(comfy.input_dir / "sam3_frame.png")
    return comfy


def _graph(prompts="dress\nhands", model_name="sam3"):
    graph = {
        "1": {"class_type": "BroadcastSam3Loader", "inputs": {"model_name": model_name, "dtype": "auto"}},
        "2": {"class_type": "LoadImage", "inputs": {"image": "sam3_frame.png"}},
        "3": {"class_type": "RepeatImageBatch", "inputs": {"image": ["2", 0], "amount": FRAMES}},
        "4": {"class_type": "BroadcastSam3VideoMask",
              "inputs": {"sam3_model": ["1", 0], "images": ["3", 0], "prompts": prompts,
                         "detection_threshold": 0.0, "detect_interval": 4, "max_objects": 4,
                         "mask_threshold": 0.5, "output_mode": "per prompt", "keep_loaded": False}},
    }
    for slot, name in enumerate(("union", "mask_1", "mask_2", "mask_3")):
        graph[f"{10 + slot}"] = {"class_type": "MaskToImage", "inputs": {"mask": ["4", slot]}}
        graph[f"{20 + slot}"] = {"class_type": "SaveImage",
                                 "inputs": {"images": [f"{10 + slot}", 0], "filename_prefix": f"sam3_test/{name}"}}
    return graph


def _saved(comfy, history, node_id):
    frames = []
    for entry in history["outputs"][node_id]["images"]:
        path = comfy.output_dir / entry["subfolder"] / entry["filename"]
        frames.append(np.asarray(Image.open(path).convert("L")))
    return np.stack(frames)


def test_nodes_listed_with_types_and_tooltips(tiny):
    info = tiny.object_info()
    for node in ("BroadcastSam3Loader",) + MASK_NODES:
        assert node in info, f"{node} is not registered"
        for name, spec in info[node]["input"]["required"].items():
            assert spec[1].get("tooltip"), f"{node}.{name} has no tooltip"
        assert info[node]["category"] == "Broadcast/sam3"
    loader = info["BroadcastSam3Loader"]
    assert "sam3" in loader["input"]["required"]["model_name"][1]["options"]
    assert loader["output"] == ["BROADCAST_SAM3_MODEL"]
    for node in MASK_NODES:
        assert info[node]["output"] == ["MASK"] * 5
        assert info[node]["output_name"] == ["union", "mask_1", "mask_2", "mask_3", "mask_4"]
    mask = info["BroadcastSam3VideoMask"]["input"]["required"]
    assert mask["sam3_model"][0] == "BROADCAST_SAM3_MODEL" and mask["images"][0] == "IMAGE"
    assert mask["detect_interval"][1]["default"] == 4
    assert info["BroadcastSam3TrackToMasks"]["input"]["required"]["track_data"][0] == "SAM3_TRACK_DATA"


def _watch(comfy, graph, on_progress=None):
    """Queue `graph` and follow it on the websocket: ``(prompt_id, [(value, max)] of node 4, final event type)``."""
    from tests.fixtures.watch import END, watch_prompt

    prompt_id, events = watch_prompt(comfy, graph)
    progress, kind = [], None
    for kind, data in events:
        if kind == "progress" and data.get("node") == "4":
            progress.append((data["value"], data["max"]))
            if on_progress:
                on_progress(data["value"])
    return prompt_id, progress, kind if kind in END else "execution_success"   # else: executing with no node


def test_video_mask_outputs_and_progress(tiny):
    prompt_id, progress, final = _watch(tiny, _graph())
    assert final == "execution_success"
    history = tiny.finish(prompt_id)
    assert progress and progress[-1] == (FRAMES, FRAMES)
    # In order and ending at the last frame. Which steps reach the websocket is the core's choice (0.3.75 sends
    # every one; 0.33.0 sends only the first and last of this short run), so one step per frame is pinned in the
    # engine's unit test (tests/unit/test_sam3_video_mask.py), not here.
    values = [v for v, _ in progress]
    assert values == sorted(values) and all(0 <= v <= FRAMES for v in values)

    union, first, second, third = (_saved(tiny, history, n) for n in ("20", "21", "22", "23"))
    for mask in (union, first, second, third):
        assert mask.shape == (FRAMES, 40, 64)
        assert set(np.unique(mask)) <= {0, 255}                     # binary masks
    assert union[0].any()                                           # open thresholds: something is found
    assert (np.maximum(first, second) == union).all()               # union of the two prompt lines
    assert not third.any()                                          # unused line: all zero


def test_empty_prompt_names_the_input(tiny):
    error = tiny.run_error(_graph(prompts="\n  \n"))
    assert error["node_type"] == "BroadcastSam3VideoMask"
    assert "prompts: expected at least one text prompt" in error["exception_message"]


def test_incomplete_model_folder_names_the_missing_files(tiny):
    broken = tiny.models_dir / "sam3" / "broken"
    broken.mkdir(parents=True, exist_ok=True)
    shutil.copy(tiny.models_dir / "sam3" / "sam3" / "config.json", broken / "config.json")
    error = tiny.run_error(_graph(model_name="broken"))
    assert error["node_type"] == "BroadcastSam3Loader"
    message = error["exception_message"]
    assert "broken" in message and "model.safetensors" in message and "tokenizer.json" in message


def test_per_object_mode_with_model_kept_loaded(tiny):
    graph = _graph()
    graph["4"]["inputs"].update(output_mode="per object", keep_loaded=True, detect_interval=2)
    graph["13"]["inputs"]["mask"] = ["4", 4]   # mask_4 instead of mask_3
    history = tiny.run(graph)
    union, first, second, fourth = (_saved(tiny, history, n) for n in ("20", "21", "22", "23"))
    assert union[0].any() and first.any()
    # Each object's mask lies inside the union (here at most four objects: max_objects is 4).
    assert (np.maximum.reduce([first, second, fourth]) <= union).all()
    # The model stays usable for a second run after being kept loaded.
    graph["4"]["inputs"]["keep_loaded"] = False
    graph["4"]["inputs"]["mask_threshold"] = 0.6
    assert tiny.run(graph)["outputs"]


def test_interrupt_stops_at_the_next_frame_and_the_model_stays_usable(tiny):
    graph = _graph()
    graph["3"]["inputs"]["amount"] = 400
    graph["4"]["inputs"]["detect_interval"] = 1
    sent = []

    def interrupt_once(value):
        if value >= 2 and not sent:
            sent.append(value)
            tiny.interrupt()

    _, progress, final = _watch(tiny, graph, on_progress=interrupt_once)
    assert final == "execution_interrupted"
    assert progress[-1][0] < 400                     # stopped long before the end
    # The session was closed and the model released: the next run (new settings, so not served from cache) works.
    after = _graph()
    after["4"]["inputs"]["mask_threshold"] = 0.45
    history = tiny.run(after)
    assert _saved(tiny, history, "20").shape == (FRAMES, 40, 64)
