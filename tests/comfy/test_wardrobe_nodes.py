"""Wardrobe nodes through the real ComfyUI: the weight-free mask-check workflow, the cache's lazy hit, errors."""
from __future__ import annotations

import uuid

import av
import pytest

from scripts.workflow.api import apply_overrides, load_workflow
from tests.fixtures import h3_wardrobe
from tests.workflow_cases import REPO_ROOT, WARDROBE_CHECK_FRAMES, case_for


def _outputs_by_title(prompt, entry, title):
    node = next(k for k, v in prompt.items() if (v.get("_meta") or {}).get("title") == title)
    return entry["outputs"].get(node, {})


def test_mask_check_workflow_runs_on_the_sample_clip(comfy):
    prompt, kind = load_workflow(REPO_ROOT / "workflows" / "api" / "wardrobe_mask_check.api.json")
    assert kind == "api"
    overrides = case_for("wardrobe_mask_check").prepare(comfy)
    prompt = apply_overrides(prompt, overrides, comfy.object_info())
    entry = comfy.run(prompt, timeout=600)
    report = _outputs_by_title(prompt, entry, "Mask Check")["text"][0]
    assert f"{WARDROBE_CHECK_FRAMES} frames checked" in report
    assert "No compositor pixel covers a protected pixel." in report
    assert "sampler px cover protected pixels" in report  # the token grid reaches over the hands: expected
    videos = [p for p in (comfy.output_dir / "broadcast").glob("wardrobe_mask_check*.mp4")]
    assert videos, "the overlay video was not exported"
    with av.open(str(videos[-1])) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        assert (stream.width, stream.height) == (128, 224)  # scale 0.5 of 256x448
    assert frames == WARDROBE_CHECK_FRAMES


def _cache_prompt(masks_source: dict, key_text: str, mode: str = "use cache", frame_cap: int = 4) -> dict:
    from scripts import sample_clip

    prompt = {
        "1": {"class_type": "BroadcastLoadVideo",
              "inputs": {"video": sample_clip.SAMPLE_NAME, "frame_cap": frame_cap, "skip_first_frames": 0,
                         "target_fps": 0.0}},
        "2": {"class_type": "BroadcastMaskSequenceCache",
              "inputs": {"images": ["1", 0], "prompt": key_text, "masks": ["9", 0], "mode": mode}},
        "3": {"class_type": "MaskToImage", "inputs": {"mask": ["2", 0]}},
        "4": {"class_type": "PreviewImage", "inputs": {"images": ["3", 0]}},
    }
    prompt.update(masks_source)
    return prompt


def _file_source(name: str, channel: str = "red") -> dict:
    return {"9": {"class_type": "LoadImageMask", "inputs": {"image": name, "channel": channel}}}


def test_cache_hit_never_runs_the_segmenter_and_a_changed_setting_or_file_is_a_miss(comfy):
    """The mask source reads a file. Which nodes ran is read from the websocket: after the entry is filled, a hit
    never runs the source; a changed source setting (no hand-typed key involved), the file replaced under its old
    name (other bytes, its old mtime) and refresh all run it."""
    import os

    import numpy as np
    from PIL import Image

    from engines.export import reader
    from scripts import sample_clip
    from tests.fixtures.server_memory import free
    from tests.fixtures.watch import run_watched

    case_for("wardrobe_mask_check").prepare(comfy)  # makes the sample clip
    info = reader.probe(comfy.input_dir / sample_clip.SAMPLE_NAME)
    key_text = f"lazy-{uuid.uuid4().hex}"
    name = f"mask_source_{uuid.uuid4().hex[:8]}.png"
    pixels = np.zeros((info.height, info.width, 3), dtype=np.uint8)
    pixels[: info.height // 2, :, 0] = 255
    path = comfy.input_dir / name
    Image.fromarray(pixels).save(path)

    def run(prompt):
        free(comfy, unload_models=False, free_memory=True)  # ComfyUI forgets its outputs: only the pack's cache
        entry, ran = run_watched(comfy, prompt)
        assert entry["outputs"]["4"]["images"]
        return ran

    ran = run(_cache_prompt(_file_source(name), key_text, frame_cap=1))
    assert "9" in ran and "2" in ran                        # miss: the source ran, its masks are stored
    ran = run(_cache_prompt(_file_source(name), key_text, frame_cap=1))
    assert "2" in ran and "9" not in ran                    # hit: the source is wired but never evaluated
    ran = run(_cache_prompt(_file_source(name, channel="green"), key_text, frame_cap=1))
    assert "9" in ran                                       # the source's own setting changed: another key
    st = path.stat()
    other = pixels.copy()
    other[: info.height // 2, : info.width // 2, 0] = 0
    Image.fromarray(other).save(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old mtime: only the bytes say it changed
    ran = run(_cache_prompt(_file_source(name), key_text, frame_cap=1))
    assert "9" in ran                                       # the same name with other bytes: another key
    ran = run(_cache_prompt(_file_source(name), key_text, frame_cap=1))
    assert "9" not in ran                                   # ... under which the new masks are now stored
    ran = run(_cache_prompt(_file_source(name), key_text, mode="refresh", frame_cap=1))
    assert "9" in ran                                       # refresh forces the source to run again


def _swap_bytes(path, text: bytes) -> None:
    """Replace the file's bytes with `text` (padded to its old size), keeping its size and mtime."""
    import os

    st = path.stat()
    path.write_bytes(text.ljust(st.st_size, b"."))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_mask_cache_misses_when_the_segmenter_model_file_is_swapped(comfy):
    """An entry stored under the key computed here (the SAM3 folder's files by identity) is a hit: the SAM3 loader
    (a folder that holds no model: it fails whenever it runs) is never evaluated. A file of that folder replaced
    under the same name (same size and mtime, other bytes) is another key: the loader runs."""
    import torch

    from scripts import sample_clip
    from tests.fixtures import wardrobe_workflow
    from tests.fixtures.server_memory import free

    case_for("wardrobe_mask_check").prepare(comfy)
    folder = comfy.models_dir / "sam3" / f"swapped_{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"release one: not a model".ljust(4096, b"."))
    (folder / "config.json").write_text("{}")
    text = f"dress {uuid.uuid4().hex}"
    prompt = {
        "1": {"class_type": "BroadcastLoadVideo",
              "inputs": {"video": sample_clip.SAMPLE_NAME, "frame_cap": 1, "skip_first_frames": 0,
                         "target_fps": 0.0}},
        "5": {"class_type": "BroadcastSam3Loader", "inputs": {"model_name": folder.name, "dtype": "auto"}},
        "9": {"class_type": "BroadcastSam3VideoMask",
              "inputs": {"sam3_model": ["5", 0], "images": ["1", 0], "prompts": text, "detection_threshold": 0.25,
                         "detect_interval": 4, "max_objects": 4, "mask_threshold": 0.5, "output_mode": "per prompt",
                         "keep_loaded": False}},
        "2": {"class_type": "BroadcastMaskSequenceCache", "_meta": {"title": "Mask Cache"},
              "inputs": {"images": ["1", 0], "prompt": text, "masks": ["9", 1], "mode": "use cache"}},
        "3": {"class_type": "MaskToImage", "inputs": {"mask": ["2", 0]}},
        "4": {"class_type": "PreviewImage", "inputs": {"images": ["3", 0]}},
    }
    frames = wardrobe_workflow.decoded_frames(comfy.input_dir / sample_clip.SAMPLE_NAME)[:1]
    masks = torch.zeros(frames.shape[:3])
    masks[:, : frames.shape[1] // 2] = 1.0
    wardrobe_workflow.seed_mask_cache(comfy, prompt, frames, [masks])
    entry = comfy.run(prompt)                               # hit: the loader would fail on this folder
    assert entry["outputs"]["4"]["images"]
    _swap_bytes(folder / "model.safetensors", b"release two: not a model either")
    free(comfy, unload_models=False, free_memory=True)      # as after a restart: ComfyUI's own outputs forgotten
    err = comfy.run_error(prompt)
    assert err["node_id"] == "5", err                       # miss: the loader ran (and failed on the folder)


def _conditioning_prompt(folder: str, text: str) -> dict:
    return {
        "1": {"class_type": "LoadTrainingDataset", "inputs": {"folder_name": folder}},
        "2": {"class_type": "BroadcastConditioningCache",
              "inputs": {"prompt": text, "conditioning": ["1", 1], "mode": "use cache"}},
        "3": {"class_type": "PreviewAny", "inputs": {"source": ["2", 1]}},
    }


def test_conditioning_cache_key_follows_the_graph_upstream(comfy):
    """The conditioning comes from core's LoadTrainingDataset (the tiny Wan fixture's shard; no model needed, on
    either core). The key the node computes is `condcache.node_key` of the prompt being run; another dataset folder
    upstream (no hand-typed key involved) is a miss, so the loader runs and fails on that folder's corrupt shard;
    once an entry exists under that key, the corrupt loader is never evaluated."""
    import shutil

    from engines.common.cache import ContentCache
    from engines.wardrobe import condcache
    from tests.fixtures import tiny_wan, wardrobe_workflow

    names = tiny_wan.install(comfy.models_dir, comfy.output_dir, datasets_dir=comfy.base_dir / "datasets")
    good, bad = names["prompt_folder"], f"corrupt_prompt_{uuid.uuid4().hex[:8]}"
    for root in (comfy.output_dir, comfy.base_dir / "datasets"):  # where 0.3.75 and 0.33.0 look
        shutil.copytree(root / good, root / bad)
        (root / bad / "shard_00000.pkl").write_bytes(b"not a shard")
    text = f"conditioning-{uuid.uuid4().hex}"
    store = ContentCache(comfy.models_dir / "broadcast_cache")
    prompt = _conditioning_prompt(good, text)
    identify = wardrobe_workflow.picked_file(comfy)
    key = condcache.node_key(prompt, "2", text, identify=identify)
    assert not condcache.has_conditioning(store, key)
    comfy.run(prompt)  # miss: the loader runs, its conditioning is stored under the key computed here
    stored = condcache.load_conditioning(store, key)
    assert stored is not None and stored[0][0].shape[-1] == tiny_wan.TEXT_DIM
    changed = _conditioning_prompt(bad, text)
    err = comfy.run_error(changed)
    assert err["node_id"] == "1", err
    condcache.store_conditioning(store, condcache.node_key(changed, "2", text, identify=identify), stored)
    comfy.run(changed)  # hit: the corrupt loader is wired but never evaluated


def test_conditioning_cache_misses_when_the_text_encoder_file_is_swapped(comfy):
    """An entry stored under the key computed here (the encoder file by identity) is a hit: core's CLIPLoader (a
    file that is no text encoder: it fails whenever it runs) is never evaluated. The file replaced under the same
    name (same size and mtime, other bytes) is another key: the loader runs."""
    import torch

    from engines.common.cache import ContentCache
    from engines.wardrobe import condcache
    from tests.fixtures import wardrobe_workflow
    from tests.fixtures.server_memory import free

    name = f"swapped_encoder_{uuid.uuid4().hex[:8]}.safetensors"
    path = comfy.models_dir / "text_encoders" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"release one: not an encoder".ljust(4096, b"."))
    text = f"conditioning-{uuid.uuid4().hex}"
    prompt = {
        "1": {"class_type": "CLIPLoader", "inputs": {"clip_name": name, "type": "stable_diffusion",
                                                     "device": "default"}},
        "5": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["1", 0], "text": text}},
        "2": {"class_type": "BroadcastConditioningCache",
              "inputs": {"prompt": text, "conditioning": ["5", 0], "mode": "use cache"}},
        "3": {"class_type": "PreviewAny", "inputs": {"source": ["2", 1]}},
    }
    store = ContentCache(comfy.models_dir / "broadcast_cache")
    key = condcache.node_key(prompt, "2", text, identify=wardrobe_workflow.picked_file(comfy))
    condcache.store_conditioning(store, key, [[torch.zeros(1, 2, 8), {"pooled_output": None}]])
    entry = comfy.run(prompt)                               # hit: the loader would fail on this file
    assert key in str(entry["outputs"]["3"])
    _swap_bytes(path, b"release two: not an encoder either")
    free(comfy, unload_models=False, free_memory=True)      # as after a restart: ComfyUI's own outputs forgotten
    err = comfy.run_error(prompt)
    assert err["node_id"] == "1", err                       # miss: the loader ran (and failed on the file)


def _box_crop_graph(video: str, frame_cap: int, padding: int) -> dict:
    """Load the sample clip, mask a 64 px square at (96, 200) of its 256x448 frames, crop around it (feather 16)."""
    return {
        "1": {"class_type": "BroadcastLoadVideo",
              "inputs": {"video": video, "frame_cap": frame_cap, "skip_first_frames": 0, "target_fps": 0.0}},
        "2": {"class_type": "SolidMask", "inputs": {"value": 1.0, "width": 64, "height": 64}},
        "3": {"class_type": "MaskComposite", "inputs": {"destination": ["10", 0], "source": ["2", 0], "x": 96,
                                                        "y": 200, "operation": "add"}},
        "10": {"class_type": "SolidMask", "inputs": {"value": 0.0, "width": 256, "height": 448}},
        "4": {"class_type": "BroadcastSubjectCrop",
              "inputs": {"images": ["1", 0], "mask": ["3", 0], "padding": padding, "multiple": 16, "mode": "fixed",
                         "smooth_frames": 9, "upscale_to": 0, "feather": 16}},
    }


def test_uncrop_refuses_a_short_crop_batch(comfy):
    from scripts import sample_clip

    case_for("wardrobe_mask_check").prepare(comfy)
    prompt = {
        **_box_crop_graph(sample_clip.SAMPLE_NAME, frame_cap=4, padding=8),
        "5": {"class_type": "ImageFromBatch", "inputs": {"image": ["4", 0], "batch_index": 0, "length": 3}},
        "6": {"class_type": "BroadcastSubjectUncrop",
              "inputs": {"source_images": ["1", 0], "cropped_images": ["5", 0], "crop_record": ["4", 2]}},
        "7": {"class_type": "PreviewImage", "inputs": {"images": ["6", 0]}},
    }
    err = comfy.run_error(prompt)
    assert err["node_type"] == "BroadcastSubjectUncrop"
    assert "cropped_images: expected 4 inpainted crops" in err["exception_message"]
    # The same graph with all frames composites, and a single-frame mask is broadcast to every frame.
    prompt["5"]["inputs"]["length"] = 4
    entry = comfy.run(prompt)
    assert entry["outputs"]["7"]["images"]


def test_minimax_h3_workflow_nodes_on_this_core(comfy):
    """Only core's MiniMax H3 nodes may be missing (on 0.3.75 they are, on 0.33.0 none is); every pack and core
    node the workflow uses has the inputs it sets."""
    case = case_for("wardrobe_minimax_h3")
    prompt, _ = load_workflow(h3_wardrobe.workflow_path())
    info = comfy.object_info()
    missing = sorted({n["class_type"] for n in prompt.values()} - set(info))
    assert missing == sorted(case.expected_missing_on(info))
    for nid, node in prompt.items():
        if node["class_type"] in missing:
            continue
        spec = info[node["class_type"]]["input"]
        known = set(spec.get("required", {})) | set(spec.get("optional", {}))
        inputs = {k.split(".", 1)[0] for k in node["inputs"]}  # Autogrow inputs are "<group>.<name>" in API format
        assert inputs <= known, (nid, node["class_type"], inputs - known)
        assert set(spec.get("required", {})) <= inputs, (nid, node["class_type"])


def test_h3_schema_data_matches_this_core(comfy):
    """The unit tests check the H3 workflow against tests/data/minimax_h3_schema.json (0.3.75 lacks the nodes);
    on a core that has them, that data must be core's own schema."""
    import json

    schema = json.loads((REPO_ROOT / "tests" / "data" / "minimax_h3_schema.json").read_text())["nodes"]
    info = comfy.object_info()
    present = [cls for cls in schema if cls in info]
    if not present:
        assert not any(n in info for n in case_for("wardrobe_minimax_h3").core_nodes)
        return  # an older core: nothing of it to compare (the log test covers what the pack says there)
    assert present == list(schema), f"this core has only {present} of {list(schema)}"
    for cls, data in schema.items():
        spec = info[cls]["input"]
        core = {**spec.get("required", {}), **spec.get("optional", {})}
        for name, s in data["inputs"].items():
            if s["kind"] == "autogrow":
                continue  # core lists an Autogrow group under its own name with a template; checked by running it
            assert name in core, (cls, name)
            assert (name in spec.get("required", {})) == s["required"], (cls, name)
            if s["kind"] == "widget" and s["type"] in ("INT", "FLOAT"):
                opts = core[name][1]
                assert (opts.get("min"), opts.get("max")) == (s.get("min"), s.get("max")), (cls, name, opts)
            elif s["kind"] == "widget" and s["type"] == "COMBO":
                assert core[name][1]["options"] == s["options"], (cls, name)
            elif s["kind"] == "link":
                assert core[name][0] == s["type"], (cls, name, core[name][0])
        assert info[cls]["output"] == data["outputs"], cls


def test_queue_time_checks_keep_ranges_and_combos(comfy):
    """validate_inputs checks the combos; the numbers keep ComfyUI's own range check (0.3.75 drops it for any input
    named in validate_inputs)."""
    from scripts.comfyui.server import PromptFailed

    def prompt(operation, dilate):
        return {
            "1": {"class_type": "SolidMask", "inputs": {"value": 1.0, "width": 32, "height": 32}},
            "2": {"class_type": "BroadcastMaskCombine", "inputs": {"mask_a": ["1", 0], "mask_b": ["1", 0],
                                                                   "operation": operation}},
            "3": {"class_type": "BroadcastMaskShield", "inputs": {"mask": ["2", 0], "dilate": dilate, "shrink": 2,
                                                                  "threshold": 0.45}},
            "4": {"class_type": "MaskToImage", "inputs": {"mask": ["3", 0]}},
            "5": {"class_type": "PreviewImage", "inputs": {"images": ["4", 0]}},
        }

    with pytest.raises(PromptFailed, match="operation: expected one of subtract, union, intersect"):
        comfy.queue(prompt("xor", 8))
    with pytest.raises(PromptFailed, match="dilate"):
        comfy.queue(prompt("union", 999))
    assert comfy.run(prompt("union", 8))["outputs"]["5"]["images"]


def test_no_wardrobe_node_outputs_the_token_grid_as_a_mask(comfy):
    info = comfy.object_info()
    assert info["BroadcastLatentInpaintMask"]["output"] == ["LATENT", "IMAGE"]
    assert info["BroadcastSubjectCrop"]["output"][2] == "BROADCAST_CROP_RECORD"
    assert info["BroadcastSubjectUncrop"]["input"]["required"]["crop_record"][0] == "BROADCAST_CROP_RECORD"
    assert info["BroadcastMaskSequenceCache"]["input"]["required"]["masks"][1].get("lazy") is True
    for name in ("BroadcastMaskShield", "BroadcastPixelMaskRefine", "BroadcastMaskGrow", "BroadcastMaskCombine",
                 "BroadcastSubjectCrop", "BroadcastLatentInpaintMask", "BroadcastSubjectUncrop",
                 "BroadcastRepasteLayer", "BroadcastMaskSequenceCache", "BroadcastMaskCheckPreview"):
        assert info[name]["category"] == "Broadcast/wardrobe" and info[name]["description"]
        assert all(n for n in info[name]["output_name"])


def test_uncrop_blend_modes_change_only_the_masked_pixels(comfy):
    import numpy as np
    from PIL import Image
    from scripts import sample_clip

    case_for("wardrobe_mask_check").prepare(comfy)
    prompt = {
        **_box_crop_graph(sample_clip.SAMPLE_NAME, frame_cap=2, padding=24),
        "5": {"class_type": "ImageInvert", "inputs": {"image": ["4", 0]}},        # stands in for the inpainting
        "6": {"class_type": "BroadcastSubjectUncrop",
              "inputs": {"source_images": ["1", 0], "cropped_images": ["5", 0], "crop_record": ["4", 2]}},
    }
    info = comfy.object_info()["BroadcastSubjectUncrop"]["input"]["optional"]["blend"]
    assert info[1]["default"] == "feather"
    out = {}
    for mode in ("feather", "reinhard", "poisson"):
        prompt["6"]["inputs"]["blend"] = mode
        prompt["7"] = {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": f"uc_{mode}"}}
        item = comfy.run(prompt)["outputs"]["7"]["images"][0]
        out[mode] = np.asarray(Image.open(comfy.output_dir / item["subfolder"] / item["filename"])).astype(int)
    inside = np.zeros(out["feather"].shape[:2], bool)
    inside[200:264, 96:160] = True                                   # the mask: nothing outside it may change
    for mode in ("reinhard", "poisson"):
        changed = np.any(out[mode] != out["feather"], axis=2)
        assert changed.any() and not (changed & ~inside).any(), mode
    prompt["6"]["inputs"]["blend"] = "multiply"
    status, body = comfy.request("POST", "/prompt", {"prompt": prompt})
    assert status == 400 and "blend" in str(body)
