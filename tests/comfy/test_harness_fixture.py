"""The `comfy` fixture itself: isolated folders, run / run_error / queue+wait, and strict validation."""
from __future__ import annotations

import pytest

from scripts.comfyui.server import PromptFailed


def _blank(width=64, color=0, node="1"):
    return {node: {"class_type": "EmptyImage", "inputs": {"width": width, "height": 8, "batch_size": 1,
                                                          "color": color}}}


def _preview(src="1", node="2"):
    return {node: {"class_type": "PreviewImage", "inputs": {"images": [src, 0]}}}


def test_folders_are_isolated_under_the_base(comfy):
    for folder in (comfy.input_dir, comfy.output_dir, comfy.temp_dir, comfy.models_dir):
        assert folder.is_dir() and comfy.base_dir in folder.parents
    assert (comfy.base_dir / "custom_nodes" / "broadcast_avatar" / "__init__.py").is_file()


def test_run_returns_the_history_entry_with_outputs(comfy):
    entry = comfy.run({**_blank(color=11), **_preview()})
    image = entry["outputs"]["2"]["images"][0]
    assert (comfy.temp_dir / image["subfolder"] / image["filename"]).is_file()
    again = comfy.run({**_blank(color=11), **_preview()})  # fully cached: outputs still reported
    assert again["outputs"]["2"]["images"]


def test_queue_and_wait(comfy):
    entry = comfy.wait(comfy.queue({**_blank(color=12), **_preview()}), timeout=60)
    assert entry["status"]["status_str"] == "success"


def test_run_raises_with_the_execution_error(comfy):
    prompt = {**_blank(width=8), "3": {"class_type": "ImageBlur", "inputs": {"image": ["1", 0], "blur_radius": 20,
                                                                           "sigma": 1.0}}, **_preview("3")}
    with pytest.raises(AssertionError, match=r"node 3 \(ImageBlur\): RuntimeError: .*Padding size"):
        comfy.run(prompt)
    error = comfy.run_error(prompt)
    assert error["node_id"] == "3" and error["exception_type"] == "RuntimeError"


def test_validation_failures_are_failures(comfy):
    error = comfy.run_error({**_blank(width=-3), **_preview()})
    assert error["exception_type"] == "prompt_rejected" and "width" in error["exception_message"]
    # one good output and one bad one: ComfyUI would run half of it; the fixture calls that a failure
    with pytest.raises(PromptFailed, match="smaller than min"):
        comfy.queue({**_blank(color=13), **_preview(), **_blank(width=-3, node="3"), **_preview("3", node="4")})


def test_run_error_on_a_good_prompt_fails(comfy):
    with pytest.raises(AssertionError, match="expected to fail"):
        comfy.run_error({**_blank(color=14), **_preview()})
