"""The workflow lint: every shipped workflow passes; each way of leaking a sampler-side mask into a compositor is
refused with the offending link named, in API and UI format."""
import json
import subprocess
import sys

import pytest

from scripts.workflow import lint as workflow_lint
from tests.workflow_cases import REPO_ROOT

SHIPPED = sorted((REPO_ROOT / "workflows").glob("*.json")) + sorted((REPO_ROOT / "workflows" / "api").glob("*.json"))


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO_ROOT)) for p in SHIPPED])
def test_every_shipped_workflow_passes(path):
    assert workflow_lint.check_file(path) == [], [str(f) for f in workflow_lint.check_file(path)]


def _api():
    return json.loads((REPO_ROOT / "workflows" / "api" / "wardrobe_mask_check.api.json").read_text())


def _node(cls, **inputs):
    return {"class_type": cls, "inputs": inputs}


def test_grid_preview_through_core_mask_nodes_into_uncrop_is_refused():
    wf = _api()
    wf["90"] = _node("ImageToMask", image=["12", 1], channel="red")
    wf["91"] = _node("GrowMask", mask=["90", 0], expand=2, tapered_corners=True)
    wf["92"] = _node("MaskComposite", destination=["91", 0], source=["5", 1], x=0, y=0, operation="subtract")
    wf["8"]["inputs"]["mask"] = ["92", 0]  # refine <- grid: then the crop record holds the token grid
    found = workflow_lint.check(wf, "wf")
    assert len(found) == 1
    msg = str(found[0])
    assert "link 8:0->9.mask" in msg and "BroadcastSubjectCrop #9" in msg and "input 'mask'" in msg
    assert "BroadcastLatentInpaintMask #12" in msg and "ImageToMask #90" in msg and "MaskComposite #92" in msg


def test_shield_into_the_compositor_is_refused():
    wf = _api()
    wf["9"]["inputs"]["mask"] = ["10", 0]  # cycle aside, the shield must never be the record's mask
    found = workflow_lint.check(wf, "wf")
    assert any("BroadcastMaskShield #10" in str(f) and "input 'mask'" in str(f) for f in found)


def test_image_composite_masked_and_repaste_are_compositors():
    wf = _api()
    wf["93"] = _node("ImageCompositeMasked", destination=["1", 0], source=["1", 0], x=0, y=0,
                     resize_source=False, mask=["10", 0])
    wf["94"] = _node("BroadcastRepasteLayer", images=["1", 0], source_images=["1", 0], protected_mask=["10", 0],
                     feather=4.0, expand=0)
    found = [str(f) for f in workflow_lint.check(wf, "wf")]
    assert any("ImageCompositeMasked #93 input 'mask'" in f for f in found)
    assert any("BroadcastRepasteLayer #94 input 'protected_mask'" in f for f in found)


def test_set_latent_noise_mask_misuse():
    wf = _api()
    wf["95"] = _node("SetLatentNoiseMask", samples=["12", 0], mask=["5", 0])
    wf["96"] = _node("SetLatentNoiseMask", samples=["11", 0], mask=["10", 0])
    found = [str(f) for f in workflow_lint.check(wf, "wf")]
    assert any("#95" in f and "overwrite the token-grid noise mask" in f for f in found)
    assert any("#96" in f and "trilinear resize" in f for f in found)


def test_decoded_pixels_are_clean():
    """A sampled latent decoded to pixels is content, not a mask: the uncrop may take it."""
    wf = _api()
    wf["97"] = _node("VAEDecode", samples=["12", 0], vae=["98", 0])
    wf["98"] = _node("VAELoader", vae_name="x.safetensors")
    wf["99"] = _node("BroadcastSubjectUncrop", source_images=["1", 0], cropped_images=["97", 0],
                     crop_record=["9", 2])
    assert workflow_lint.check(wf, "wf") == []


def test_ui_format_names_the_link_and_follows_bypassed_nodes():
    ui = json.loads((REPO_ROOT / "workflows" / "wardrobe_mask_check.json").read_text())
    nodes = {n["id"]: n for n in ui["nodes"]}
    links = {lk[0]: lk for lk in ui["links"]}
    crop = next(n for n in ui["nodes"] if n["type"] == "BroadcastSubjectCrop")
    refine = next(n for n in ui["nodes"] if n["type"] == "BroadcastPixelMaskRefine")
    shield = next(n for n in ui["nodes"] if n["type"] == "BroadcastMaskShield")
    # Rewire: shield -> refine (bypassed) -> crop.mask
    refine["mode"] = 4
    ref_in = next(i for i in refine["inputs"] if i["name"] == "mask")
    old = links[ref_in["link"]]
    old[1], old[2] = shield["id"], 0
    assert nodes[crop["id"]] is crop
    found = workflow_lint.check(ui, "ui")
    mask_in = next(i for i in crop["inputs"] if i["name"] == "mask")
    assert len(found) == 1 and f"link {mask_in['link']}:" in str(found[0])


def test_command_line(tmp_path):
    bad = _api()
    bad["8"]["inputs"]["mask"] = ["10", 0]
    path = tmp_path / "bad.api.json"
    path.write_text(json.dumps(bad))
    ok = subprocess.run([sys.executable, "scripts/workflow/lint.py", *map(str, SHIPPED)], cwd=REPO_ROOT,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    res = subprocess.run([sys.executable, "scripts/workflow/lint.py", str(path)], cwd=REPO_ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 1 and "BroadcastSubjectCrop #9" in res.stdout


def test_subgraph_definitions_are_checked():
    ui = json.loads((REPO_ROOT / "workflows" / "wardrobe_mask_check.json").read_text())
    inner = json.loads(json.dumps(ui))
    crop = next(n for n in inner["nodes"] if n["type"] == "BroadcastSubjectCrop")
    refine = next(n for n in inner["nodes"] if n["type"] == "BroadcastPixelMaskRefine")
    shield = next(n for n in inner["nodes"] if n["type"] == "BroadcastMaskShield")
    links = {lk[0]: lk for lk in inner["links"]}
    link = links[next(i for i in refine["inputs"] if i["name"] == "mask")["link"]]
    link[1], link[2] = shield["id"], 0
    inner["links"] = [{"id": lk[0], "origin_id": lk[1], "origin_slot": lk[2], "target_id": lk[3],
                       "target_slot": lk[4], "type": lk[5]} for lk in inner["links"]]
    ui["definitions"] = {"subgraphs": [{"id": "sg1", "name": "inner", "nodes": inner["nodes"],
                                        "links": inner["links"]}]}
    found = workflow_lint.check_workflow(ui, "ui")
    assert len(found) == 1 and "(subgraph inner)" in str(found[0]) and crop["type"] in str(found[0])
