"""The wardrobe lint on the Wan 2.1 VACE workflow: the shipped graph passes; wiring its sampler side into a
compositor is refused, naming the link."""
import copy
import json
from pathlib import Path

import pytest

from scripts.workflow import lint as workflow_lint

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def _api() -> dict:
    return json.loads((WORKFLOWS / "api" / "wardrobe_vace.api.json").read_text(encoding="utf-8"))


def _by_title(prompt: dict, title: str) -> str:
    return next(nid for nid, n in prompt.items() if n["_meta"]["title"] == title)


@pytest.mark.parametrize("name", ["api/wardrobe_vace.api.json", "wardrobe_vace.json"])
def test_shipped_vace_workflow_passes(name):
    path = WORKFLOWS / name
    assert workflow_lint.check_file(path) == []


@pytest.mark.parametrize("sink,sink_input,source,slot", [
    ("Re-paste Hands", "protected_mask", "Mask Shield", 0),        # the shield as the hands layer
    ("Subject Crop", "mask", "Mask Shield", 0),                     # the shield as the crop's blend mask
    ("Subject Uncrop", "cropped_images", "Vace Sampler Mask", 2),   # the token-grid latent, not decoded
])
def test_sampler_side_into_a_compositor_is_refused(sink, sink_input, source, slot):
    prompt = copy.deepcopy(_api())
    sink_id, source_id = _by_title(prompt, sink), _by_title(prompt, source)
    prompt[sink_id]["inputs"][sink_input] = [source_id, slot]
    findings = workflow_lint.check(prompt, "mutant")
    assert findings, "the lint let a sampler-side mask reach a compositor"
    assert any(f.link.dst == sink_id and f.link.dst_input == sink_input for f in findings), [str(f) for f in findings]
