"""scripts/workflow/api.py: overrides, UI->API conversion and the missing-model report, on a small /object_info."""
from __future__ import annotations

import pytest

from scripts.workflow.api import (WorkflowError, apply_overrides, check_prompt, parse_set, ui_to_api,
                                  workflow_kind)

INFO = {
    "EmptyImage": {"input": {"required": {"width": ["INT", {"default": 512}], "height": ["INT", {"default": 512}],
                                          "batch_size": ["INT", {}], "color": ["INT", {}]}}},
    "ImageBlur": {"input": {"required": {"image": ["IMAGE", {}], "blur_radius": ["INT", {}],
                                         "sigma": ["FLOAT", {}]}}},
    "PreviewImage": {"input": {"required": {"images": ["IMAGE", {}]}}},
    "KSamplerLike": {"input": {"required": {"seed": ["INT", {"control_after_generate": True}],
                                            "steps": ["INT", {}], "label": ["STRING", {}]}}},
    "CheckpointLoaderSimple": {"input": {"required": {"ckpt_name": [["a.safetensors"], {}]}}},
    "BroadcastSam3Loader": {"input": {"required": {"model_name": ["COMBO", {"options": ["tiny"]}],
                                                   "precision": ["COMBO", {"options": ["auto", "fp32"]}]}}},
    "BroadcastLoadVideo": {"input": {"required": {"video": ["COMBO", {"options": []}]}}},
}

PROMPT = {"1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 48, "batch_size": 1, "color": 0},
                "_meta": {"title": "Blank"}},
          "2": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}, "_meta": {"title": "Preview"}}}


def _ui(nodes, links):
    return {"nodes": nodes, "links": links, "version": 0.4}


def _node(nid, type_, widgets=(), inputs=(), mode=0, title=None):
    node = {"id": nid, "type": type_, "mode": mode, "widgets_values": list(widgets),
            "inputs": [{"name": n, "type": t, "link": l} for n, t, l in inputs]}
    if title:
        node["title"] = title
    return node


def test_parse_set_reads_json_or_plain_strings():
    assert parse_set("Blank.width=32") == ("Blank.width", 32)
    assert parse_set("7.text=hello world") == ("7.text", "hello world")
    assert parse_set("My Node.v1.2.flag=true") == ("My Node.v1.2.flag", True)
    assert parse_set("a.b=x=y") == ("a.b", "x=y")
    with pytest.raises(WorkflowError):
        parse_set("no-dot=1")


def test_overrides_by_id_and_title_with_coercion():
    out = apply_overrides(PROMPT, {"Blank.width": "32", "1.height": 16.0, "1.color": 7}, INFO)
    assert out["1"]["inputs"]["width"] == 32 and out["1"]["inputs"]["height"] == 16
    assert PROMPT["1"]["inputs"]["width"] == 64, "the original prompt must not change"


def test_override_errors_name_what_exists():
    with pytest.raises(WorkflowError, match="no node has that id or title.*Blank"):
        apply_overrides(PROMPT, {"Nope.width": 1}, INFO)
    with pytest.raises(WorkflowError, match="has no input 'widht'.*width"):
        apply_overrides(PROMPT, {"Blank.widht": 1}, INFO)
    with pytest.raises(WorkflowError, match="not a valid INT"):
        apply_overrides(PROMPT, {"Blank.width": "wide"}, INFO)
    twins = dict(PROMPT, **{"3": dict(PROMPT["1"])})
    with pytest.raises(WorkflowError, match="2 nodes have that title"):
        apply_overrides(twins, {"Blank.width": 1}, INFO)


def test_workflow_kind():
    assert workflow_kind(PROMPT) == "api"
    assert workflow_kind(_ui([], [])) == "ui"
    with pytest.raises(WorkflowError, match="inner prompt"):
        workflow_kind({"prompt": PROMPT})
    with pytest.raises(WorkflowError):
        workflow_kind({"foo": 1})


def test_ui_to_api_follows_reroutes_bypass_and_primitives():
    nodes = [
        _node(1, "EmptyImage", [64, 48, 1, 0], title="Blank"),
        _node(2, "Reroute", inputs=[("", "*", 1)]),
        _node(3, "ImageBlur", [5, 1.0], inputs=[("image", "IMAGE", 2)], mode=4),  # bypassed
        _node(4, "PreviewImage", inputs=[("images", "IMAGE", 3)]),
        _node(5, "Note", ["a comment"]),
        _node(6, "PrimitiveNode", [1234]),
        _node(7, "KSamplerLike", [99, "randomize", 20, "hi"], inputs=[("seed", "INT", 4)]),
        _node(8, "EmptyImage", [8, 8, 1, 0], mode=2),  # muted
    ]
    links = [[1, 1, 0, 2, 0, "IMAGE"], [2, 2, 0, 3, 0, "IMAGE"], [3, 3, 0, 4, 0, "IMAGE"], [4, 6, 0, 7, 0, "INT"]]
    prompt = ui_to_api(_ui(nodes, links), INFO)
    assert set(prompt) == {"1", "4", "7"}
    assert prompt["1"]["inputs"] == {"width": 64, "height": 48, "batch_size": 1, "color": 0}
    assert prompt["1"]["_meta"]["title"] == "Blank"
    assert prompt["4"]["inputs"] == {"images": ["1", 0]}
    assert prompt["7"]["inputs"] == {"seed": 1234, "steps": 20, "label": "hi"}


def test_ui_to_api_refuses_what_it_cannot_map():
    with pytest.raises(WorkflowError, match="not installed.*Mystery"):
        ui_to_api(_ui([_node(1, "Mystery")], []), INFO)
    with pytest.raises(WorkflowError, match="do not match the inputs.*Export \\(API\\)"):
        ui_to_api(_ui([_node(1, "EmptyImage", [64, 48, 1, 0, "extra"])], []), INFO)
    with pytest.raises(WorkflowError, match="subgraphs"):
        ui_to_api(dict(_ui([], []), definitions={"subgraphs": [{"id": "x"}]}), INFO)


def test_check_prompt_names_missing_models_by_folder():
    prompt = {"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "b.safetensors"}},
              "2": {"class_type": "BroadcastSam3Loader", "inputs": {"model_name": "sam3-large", "precision": "fp8"}},
              "3": {"class_type": "BroadcastLoadVideo", "inputs": {"video": "clip.mp4"}},
              "4": {"class_type": "NotInstalled", "inputs": {}},
              "5": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "a.safetensors"}}}
    problems = check_prompt(prompt, INFO)
    assert problems == [
        "node 1 (CheckpointLoaderSimple) input ckpt_name: model 'b.safetensors' is not in models/checkpoints",
        "node 2 (BroadcastSam3Loader) input model_name: model 'sam3-large' is not in models/sam3",
        "node 2 (BroadcastSam3Loader) input precision: 'fp8' is not one of 'auto', 'fp32'",
        "node 3 (BroadcastLoadVideo) input video: file 'clip.mp4' is not in ComfyUI's input folder",
        "node 4: node type 'NotInstalled' is not installed on this server",
    ]


def test_ui_to_api_skips_an_upload_button_saved_after_the_last_input():
    # The editor adds a V3 combo's upload button after the node's other widgets; its value ("image") comes last.
    info = {"Loader": {"input": {"required": {"video": ["COMBO", {"options": ["a.mp4"], "video_upload": True}],
                                              "frame_cap": ["INT", {}], "fps": ["FLOAT", {}]}}}}
    prompt = ui_to_api(_ui([_node(1, "Loader", ["a.mp4", 0, 25.0, "image"])], []), info)
    assert prompt["1"]["inputs"] == {"video": "a.mp4", "frame_cap": 0, "fps": 25.0}
    with pytest.raises(WorkflowError, match="do not match"):
        ui_to_api(_ui([_node(1, "Loader", ["a.mp4", 0, 25.0, "image", "image"])], []), info)


def test_ui_to_api_gives_widgets_a_file_predates_their_defaults_as_the_editor_does():
    """A file saved before a node gained an input: the editor sends the new widget's default (optional ones too)."""
    info = {"Loader": {"input": {"required": {"model_name": ["COMBO", {"options": ["m1", "m2"]}],
                                              "precision": [["auto", "fp32"], {}]},
                                 "optional": {"backend": ["COMBO", {"options": ["auto", "eager"], "default": "auto"}],
                                              "flavour": [["a", "b"], {}],
                                              "images": ["IMAGE", {}]}}}}
    prompt = ui_to_api(_ui([_node(1, "Loader", widgets=["m2"])], []), info)
    assert prompt["1"]["inputs"] == {"model_name": "m2", "precision": "auto", "backend": "auto", "flavour": "a"}


def test_ui_to_api_reads_past_the_value_of_an_input_this_server_makes_link_only():
    """0.3.75 drew MakeTrainingDataset's `texts` as a widget (its value saved), 0.33.0 makes it force_input."""
    info = {"Dataset": {"input": {"required": {"images": ["IMAGE", {}]},
                                  "optional": {"texts": ["STRING", {"forceInput": True}],
                                               "steps": ["INT", {"default": 3}]}}},
            "Text": {"input": {"required": {"value": ["STRING", {}]}}}}
    node = _node(2, "Dataset", widgets=["", 7], inputs=[("images", "IMAGE", None), ("texts", "STRING", 1)])
    node["inputs"][1]["widget"] = {"name": "texts"}
    prompt = ui_to_api(_ui([_node(1, "Text", widgets=["caption"]), node], [[1, 1, 0, 2, 1, "STRING"]]), info)
    assert prompt["2"]["inputs"] == {"texts": ["1", 0], "steps": 7}
    node["inputs"][1]["link"] = None  # not linked: nothing is sent for a link-only input
    prompt = ui_to_api(_ui([node], []), info)
    assert prompt["2"]["inputs"] == {"steps": 7}
