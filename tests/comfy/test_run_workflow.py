"""scripts/run_workflow.py against the test server: demo, UI and API files, overrides, errors and exit codes."""
from __future__ import annotations

import json
from pathlib import Path

import av
import pytest

from scripts import run_workflow
from tests.workflow_cases import REPO_ROOT

HARNESS = REPO_ROOT / "tests" / "data" / "workflows"


def _run(capsys, *args):
    code = run_workflow.main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out.strip().splitlines(), err


def test_demo_writes_an_mp4_with_audio(comfy, capsys):
    code, lines, err = _run(capsys, "--demo", "--url", comfy.url)
    assert code == 0, err
    video = Path(lines[-1])
    assert video.suffix == ".mp4" and video.is_file(), lines
    assert comfy.output_dir in video.parents
    with av.open(str(video)) as container:
        kinds = sorted(s.type for s in container.streams)
    assert kinds == ["audio", "video"]


@pytest.mark.parametrize("name", ["harness_core_preview.json", "harness_core_preview.api.json"])
def test_ui_and_api_files_with_overrides(comfy, capsys, name):
    code, lines, err = _run(capsys, HARNESS / name, "--url", comfy.url, "--set", "Blank.width=24",
                            "--set", f"1.color={0x102030 + len(name)}")
    assert code == 0, err
    image = Path(lines[-1])
    assert image.is_file() and image.suffix == ".png"
    from PIL import Image

    assert Image.open(image).size == (24, 48)
    assert "node 1 (Blank)" in err  # progress from the websocket


def test_missing_model_is_reported_before_queueing(comfy, capsys, tmp_path):
    wf = tmp_path / "needs_models.api.json"
    wf.write_text(json.dumps({
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "absent_model.safetensors"}},
        "2": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ["1", 0]}}}))
    queue_before = comfy.get("/history")
    code, _, err = _run(capsys, wf, "--url", comfy.url)
    assert code == 3
    assert "model 'absent_model.safetensors' is not in models/checkpoints" in err
    assert comfy.get("/history").keys() == queue_before.keys(), "something was queued"


def test_execution_error_exits_non_zero_with_the_message(comfy, capsys, tmp_path):
    wf = tmp_path / "fails.api.json"
    wf.write_text(json.dumps({
        "1": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}},
        "2": {"class_type": "ImageBlur", "inputs": {"image": ["1", 0], "blur_radius": 20, "sigma": 1.0}},
        "3": {"class_type": "PreviewImage", "inputs": {"images": ["2", 0]}}}))
    code, _, err = _run(capsys, wf, "--url", comfy.url)
    assert code == 1
    assert "node 2 (ImageBlur)" in err and "Padding size" in err


def test_bad_override_and_bad_file_are_usage_errors(comfy, capsys, tmp_path):
    code, _, err = _run(capsys, HARNESS / "harness_core_preview.api.json", "--url", comfy.url,
                        "--set", "Blank.nope=1")
    assert code == 2 and "has no input 'nope'" in err
    (tmp_path / "x.json").write_text("{not json")
    code, _, err = _run(capsys, tmp_path / "x.json", "--url", comfy.url)
    assert code == 2 and "not valid JSON" in err


def test_unreachable_server(capsys):
    code, _, err = _run(capsys, HARNESS / "harness_core_preview.api.json", "--url", "http://127.0.0.1:9")
    assert code == 4 and "no ComfyUI answers" in err


def test_ui_file_with_primitive_reroute_bypass_and_note(comfy, capsys):
    code, lines, err = _run(capsys, HARNESS / "harness_core_graph.json", "--url", comfy.url, "--set", "Blank.color=7")
    assert code == 0, err
    from PIL import Image

    assert Image.open(lines[-1]).size == (56, 40)  # the width came from the PrimitiveNode, through the reroute
