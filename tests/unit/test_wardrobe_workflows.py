"""The wardrobe workflows' structure: the H3 swap matches core's current MiniMax H3 schema (kept as data, since the
test ComfyUI lacks those nodes) and both workflows keep the decoupled wiring the posts arrived at."""
import json

import pytest

from tests.workflow_cases import REPO_ROOT, case_for

SCHEMA = json.loads((REPO_ROOT / "tests" / "data" / "minimax_h3_schema.json").read_text())["nodes"]
H3_API = json.loads((REPO_ROOT / "workflows" / "api" / "wardrobe_minimax_h3.api.json").read_text())
H3_UI = json.loads((REPO_ROOT / "workflows" / "wardrobe_minimax_h3.json").read_text())
CHECK_API = json.loads((REPO_ROOT / "workflows" / "api" / "wardrobe_mask_check.api.json").read_text())


def _by_class(api, cls):
    return [(k, v) for k, v in api.items() if v["class_type"] == cls]


def _check_inputs(cls, names_values, api=None):
    spec = SCHEMA[cls]["inputs"]
    used = set()
    for name, value in names_values:
        group = name.split(".", 1)[0]
        assert group in spec, f"{cls} has no input {name!r} in core's schema"
        s = spec[group]
        used.add(group)
        if s["kind"] == "autogrow":
            suffix = name.split(".", 1)[1] if "." in name else ""
            assert suffix.startswith(s["prefix"]), name
            assert s["min"] <= int(suffix[len(s["prefix"]):]) < s["max"], name
        elif s["kind"] == "widget" and not isinstance(value, list) and value is not None:
            if s["type"] == "COMBO":
                assert value in s["options"], (name, value)
            elif s["type"] in ("INT", "FLOAT"):
                assert s.get("min", -1e18) <= value <= s.get("max", 1e18), (name, value)
        elif s["kind"] == "link" and api is not None:
            assert isinstance(value, list), f"{cls}.{name} must be linked"
            src_cls = api[value[0]]["class_type"]
            if src_cls in SCHEMA:
                assert SCHEMA[src_cls]["outputs"][value[1]] == s["type"]
    missing = [n for n, s in spec.items() if s["required"] and n not in used]
    assert not missing, f"{cls} lacks required inputs {missing}"


def test_h3_api_nodes_match_core_schema():
    h3 = {v["class_type"] for v in H3_API.values() if v["class_type"] in SCHEMA}
    assert h3 == set(case_for("wardrobe_minimax_h3").core_nodes)
    for _, node in ((k, v) for k, v in H3_API.items() if v["class_type"] in SCHEMA):
        _check_inputs(node["class_type"], node["inputs"].items(), H3_API)
    ref = _by_class(H3_API, "MiniMaxH3ReferenceToVideo")[0][1]["inputs"]
    assert ref["ref_images.ref_image_0"][0] in H3_API and ref["length"] == [_by_class(H3_API, "BroadcastSubjectCrop")[0][0], 5]


def test_h3_ui_nodes_match_core_schema():
    for node in (n for n in H3_UI["nodes"] if n["type"] in SCHEMA):
        spec = SCHEMA[node["type"]]["inputs"]
        names = [(i["name"], None) for i in node["inputs"]]
        widget_names = [n for n, s in spec.items() if s["kind"] == "widget"]
        assert len(node["widgets_values"]) == len(widget_names)
        _check_inputs(node["type"], names + list(zip(widget_names, node["widgets_values"])))
        outs = [o["type"] for o in node["outputs"]]
        assert outs == SCHEMA[node["type"]]["outputs"]


@pytest.mark.parametrize("api", [H3_API, CHECK_API], ids=["minimax_h3", "mask_check"])
def test_decoupled_wiring(api):
    crop_id, crop = _by_class(api, "BroadcastSubjectCrop")[0]
    shield_id, shield = _by_class(api, "BroadcastMaskShield")[0]
    latent_id, latent = _by_class(api, "BroadcastLatentInpaintMask")[0]
    # The shield works on the crop's mask and feeds only the latent mask (sampler side).
    assert shield["inputs"]["mask"] == [crop_id, 1]
    assert latent["inputs"]["mask"] == [shield_id, 0]
    users = [(k, n) for k, n in api.items() for v in n["inputs"].values() if v == [shield_id, 0]]
    assert [n["class_type"] for _, n in users] == ["BroadcastLatentInpaintMask"]
    # The crop's mask is the refined garment minus the grown hands.
    refine = api[crop["inputs"]["mask"][0]]
    assert refine["class_type"] == "BroadcastPixelMaskRefine" and refine["inputs"]["fill_holes"] is False
    combine = api[refine["inputs"]["mask"][0]]
    assert combine["class_type"] == "BroadcastMaskCombine" and combine["inputs"]["operation"] == "subtract"
    assert api[combine["inputs"]["mask_b"][0]]["class_type"] == "BroadcastMaskGrow"
    # Masks come from the cache node, whose inputs are the segmenter (or the mask video).
    assert api[combine["inputs"]["mask_a"][0]]["class_type"] == "BroadcastMaskSequenceCache"


def test_h3_swap_is_one_pass_with_source_audio_and_hands_repaste():
    api = H3_API
    load_id = _by_class(api, "BroadcastLoadVideo")[0][0]
    assert len(_by_class(api, "SamplerCustomAdvanced")) == 1  # no chunking: one sampler call for the loop
    sam3 = _by_class(api, "BroadcastSam3VideoMask")[0]
    cache = _by_class(api, "BroadcastMaskSequenceCache")[0][1]
    assert cache["inputs"]["masks"][0] == sam3[0] and cache["inputs"]["masks_2"][0] == sam3[0]
    uncrop = _by_class(api, "BroadcastSubjectUncrop")[0]
    repaste = _by_class(api, "BroadcastRepasteLayer")[0][1]
    assert repaste["inputs"]["images"] == [uncrop[0], 0]
    assert repaste["inputs"]["source_images"] == [load_id, 0]
    export = _by_class(api, "BroadcastExportVideo")[0][1]
    assert export["inputs"]["audio"] == [load_id, 1] and export["inputs"]["fps"] == [load_id, 2]
    sampler = _by_class(api, "SamplerCustomAdvanced")[0][1]
    assert api[sampler["inputs"]["latent_image"][0]]["class_type"] == "BroadcastLatentInpaintMask"
