"""Cold boots through the real server: a cached MuseTalk avatar or Ditto packet is found from the loop file the user
picked, and the loop is then never decoded (Load Video, the only decoder in the graph, does not run).

The shipped workflows (musetalk_lipsync, ditto_talking_head, broadcast_ditto) on the tiny models, each on a loop file of its own:
1. first run: Load Video decodes, the avatar is built (or found by content) and linked to the file's identity;
2. POST /free with free_memory (ComfyUI forgets every output, as after a restart), run again: the websocket shows
   Load Video (and Face Track) never executing, and the avatar node says it found the avatar by its source file;
3. the file touched (another mtime): the link no longer matches, Load Video decodes again (the content-hash path);
   rewritten with other frames: the new frames are what the render shows, never the old entry's.
"""
from __future__ import annotations

import os

import pytest

from scripts.workflow.api import apply_overrides, load_workflow
from tests.fixtures.server_memory import free
from tests.fixtures.watch import run_watched as _run_watched
from tests.workflow_cases import case_for, shipped_api_twin



def _forget_outputs(comfy) -> None:
    """ComfyUI drops its output cache (POST /free free_memory), as after a restart."""
    free(comfy, free_memory=True)


def _ids(prompt, class_type):
    return [k for k, n in prompt.items() if n["class_type"] == class_type]


def _prompt(comfy, stem: str, loop_name: str) -> dict:
    prompt, _ = load_workflow(shipped_api_twin(stem))
    prompt = apply_overrides(prompt, case_for(stem).prepare(comfy), comfy.object_info())
    for node_id in _ids(prompt, "BroadcastLoadVideo"):
        prompt[node_id]["inputs"]["video"] = loop_name
    return prompt


def _touch(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_musetalk_avatar_is_found_from_its_file_without_decoding(comfy):
    from tests.fixtures.tiny_musetalk import astronaut_loop, write_clip

    name = "coldboot_musetalk_loop.mp4"
    path = comfy.input_dir / name
    frames, _ = astronaut_loop(5, seed=1)
    write_clip(path, frames, 10.0)
    prompt = _prompt(comfy, "musetalk_lipsync", name)
    load, track = _ids(prompt, "BroadcastLoadVideo")[0], _ids(prompt, "BroadcastFaceTrack")[0]
    avatar = _ids(prompt, "BroadcastMuseTalkAvatar")[0]

    first, ran = _run_watched(comfy, prompt)
    assert load in ran and track in ran
    assert "source file" not in first["outputs"][avatar]["text"][0]

    _forget_outputs(comfy)
    second, ran = _run_watched(comfy, prompt)
    assert avatar in ran and load not in ran and track not in ran, f"executed: {ran}"
    assert "found by its source file, not decoded" in second["outputs"][avatar]["text"][0]
    assert track not in second["outputs"]                      # Face Track's preview: it never ran

    _touch(path)                                               # same bytes, another mtime: the link is not used
    third, ran = _run_watched(comfy, prompt)
    assert load in ran and "source file" not in third["outputs"][avatar]["text"][0]
    assert "loaded from cache" in third["outputs"][avatar]["text"][0]   # found by content instead

    write_clip(path, astronaut_loop(5, seed=2)[0], 10.0)       # other frames under the same name
    fourth, ran = _run_watched(comfy, prompt)
    assert load in ran and "precompiled" in fourth["outputs"][avatar]["text"][0]


@pytest.mark.parametrize("stem", ["ditto_talking_head", "broadcast_ditto"])
def test_ditto_packet_is_found_from_its_file_without_decoding(comfy, stem):
    """broadcast_ditto too: its Export Video takes the rate from Ditto Render, so nothing else needs Load Video."""
    from tests.fixtures.tiny_ditto import portrait
    from engines.export import VideoWriter

    name = f"coldboot_{stem}_loop.mp4"
    path = comfy.input_dir / name

    def write(frames):
        tmp = path.with_name(f".partial-{name}")
        with VideoWriter(tmp, 25.0) as writer:
            writer.write(frames)
        os.replace(tmp, path)

    write(portrait(n_frames=4))
    prompt = _prompt(comfy, stem, name)
    load, avatar = _ids(prompt, "BroadcastLoadVideo")[0], _ids(prompt, "BroadcastDittoAvatar")[0]
    log_before = comfy.log_text().count("found by its source file")

    _, ran = _run_watched(comfy, prompt)
    assert load in ran and avatar in ran

    _forget_outputs(comfy)
    _, ran = _run_watched(comfy, prompt)
    assert avatar in ran and load not in ran, f"executed: {ran}"
    assert comfy.log_text().count("found by its source file") == log_before + 1

    _touch(path)
    _, ran = _run_watched(comfy, prompt)
    assert load in ran
    assert comfy.log_text().count("found by its source file") == log_before + 1


@pytest.mark.parametrize("stem", ["musetalk_lipsync"])
def test_an_unknown_producer_falls_back_to_the_content_key(comfy, stem):
    """Frames from a node that is not a known source (core's ImageScale here): no link, the loop is decoded and the
    avatar is found by content as before."""
    from tests.fixtures.tiny_musetalk import astronaut_loop, write_clip

    name = "coldboot_scaled_loop.mp4"
    write_clip(comfy.input_dir / name, astronaut_loop(4, seed=3)[0], 10.0)
    prompt = _prompt(comfy, stem, name)
    load = _ids(prompt, "BroadcastLoadVideo")[0]
    prompt["scale"] = {"class_type": "ImageScale", "inputs": {"image": [load, 0], "upscale_method": "nearest-exact",
                                                              "width": 192, "height": 256, "crop": "disabled"}}
    for node_id in _ids(prompt, "BroadcastFaceTrack") + _ids(prompt, "BroadcastMuseTalkAvatar"):
        prompt[node_id]["inputs"]["images"] = ["scale", 0]
    avatar = _ids(prompt, "BroadcastMuseTalkAvatar")[0]
    comfy.run(prompt)
    _forget_outputs(comfy)
    again, ran = _run_watched(comfy, prompt)
    assert load in ran and "scale" in ran
    assert "loaded from cache" in again["outputs"][avatar]["text"][0]
    assert "source file" not in again["outputs"][avatar]["text"][0]
