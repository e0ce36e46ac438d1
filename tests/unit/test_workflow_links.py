"""No link of a shipped UI workflow runs behind a node, except the ones listed here with the reason.

A link is drawn as the editor draws it (frontends 1.32.9 and 1.49.6, spline mode, their default): one cubic Bezier
from the output slot to the input slot with control points a quarter of the distance straight out of each slot
(scripts/workflow/links.py, which says why a straight segment would be the wrong test). A link "runs behind" a node
when that curve passes through the node's rectangle (title bar included), the link's own two nodes aside.
`scripts/workflow/editor.py layout` moves nodes until it finds no better placement and prints what is left; the
browser test checks the slot positions used here against the editor's own.

ALLOWED[stem] lists each link that still runs behind a node, as ("<from node>.<output>", "<to node>.<input>",
"<node behind>"), with the reason. A new crossing fails, and so does an entry that no longer crosses (remove it).
"""
from __future__ import annotations

import json

import pytest

from scripts.workflow import links as workflow_links
from tests.workflow_cases import TEMPLATE_DIR

UI_FILES = sorted(TEMPLATE_DIR.glob("*.json"))

# A link into a later row (scripts/workflow/layout.py ROW_BREAKS wraps long graphs): from the row above, its curve
# sweeps down across the nodes between its ends. Only a reroute would take it around them; the layout places none.
LATER_ROW = "a link into a later row: its curve crosses the rows between (the layout places no reroutes)"
# Same row: the layout's search (plan_untangled, then the local search of best_plan) found no placement of the
# nodes, within the canvas it may grow, that clears this link without making another run behind a node.
NO_BETTER_PLACE = "same row: no placement found that clears it without another link behind a node"
# tts_dialogue: the model and the two saved voices each feed both Dialogue and the morph, so links to whichever
# consumer stands second pass the first one or a voice; the search found no placement without one.
TWO_CONSUMERS = "model and voices feed Dialogue and the morph: one link to the second passes the first or a voice"

ALLOWED: dict[str, dict[tuple[str, str, str], str]] = {
    'broadcast_musetalk': {
        ('News Script.prepared_text', 'BroadcastQC.expected_text', 'Anchor Voice'): LATER_ROW,
    },
    'broadcast_ditto': {
        ('Audio Master.audio', 'Ditto Render.audio', 'Captions'): LATER_ROW,
        ('Speak.caption_timing', 'Captions.caption_timing', 'Audio Master'): NO_BETTER_PLACE,
    },
    'tts_dialogue': {
        ('OmniVoice.omnivoice_model', 'Dialogue.omnivoice_model', 'Voice A (saved)'): TWO_CONSUMERS,
    },
    'ditto_talking_head': {
        ('Ditto Avatar.avatar', 'Ditto Render.avatar', 'Ditto Motion'): NO_BETTER_PLACE,
    },
    'wardrobe_vace': {
        ('Garment Reference.IMAGE', 'WanVaceToVideo.reference_image', 'Wan VACE Model'): NO_BETTER_PLACE,
        ('Wan VACE Model.MODEL', 'KSampler.model', 'WanVaceToVideo'): NO_BETTER_PLACE,
        ('Load Video.images', 'Subject Uncrop.source_images', 'SAM3 Garment And Hands'): LATER_ROW,
        ('Load Video.images', 'Subject Uncrop.source_images', 'Garment Prompt Conditioning'): LATER_ROW,
        ('Trim Padding.IMAGE', 'Subject Uncrop.cropped_images', 'WanVaceToVideo'): LATER_ROW,
        ('Trim Padding.IMAGE', 'Subject Uncrop.cropped_images', 'Vace Sampler Mask'): LATER_ROW,
        ('Trim Padding.IMAGE', 'Subject Uncrop.cropped_images', 'KSampler'): NO_BETTER_PLACE,
        ('Subject Crop.crop_record', 'Subject Uncrop.crop_record', 'Negative'): LATER_ROW,
        ('Load Video.images', 'Re-paste Hands.source_images', 'SAM3 Garment And Hands'): LATER_ROW,
        ('Mask Cache.masks_2', 'Re-paste Hands.protected_mask', 'Negative'): LATER_ROW,
        ('Load Video.fps', 'Export Video.fps', 'SAM3 Garment And Hands'): LATER_ROW,
        ('Load Video.fps', 'Export Video.fps', 'Negative'): LATER_ROW,
        ('Load Video.audio', 'Export Video.audio', 'SAM3 Garment And Hands'): LATER_ROW,
        ('Load Video.audio', 'Export Video.audio', 'Negative'): LATER_ROW,
    },
    'broadcast_wardrobe': {
        ('Subject Crop.frame_count', 'Trim Padding.length', 'Mask Shield'): LATER_ROW,
        ('Presenter Loop.fps', 'MuseTalk Avatar.fps', 'SAM3 Garment And Hands'): LATER_ROW,
        ('Presenter Loop.fps', 'MuseTalk Avatar.fps', 'Negative'): LATER_ROW,
        ('Presenter Loop.fps', 'MuseTalk Avatar.fps', 'Voice Clip'): LATER_ROW,
        ('Presenter Loop.fps', 'MuseTalk Avatar.fps', 'MuseTalk Loader'): LATER_ROW,
        ('Presenter Loop.fps', 'Captions.fps', 'Wan VAE'): LATER_ROW,
    },
    'wardrobe_minimax_h3': {
        ('Garment Prompt.STRING', 'H3 Reference to Video.prompt', 'H3 Sigma Shift'): NO_BETTER_PLACE,
        ('Subject Crop.cropped_images', 'Latent Inpaint Mask.preview_images', 'H3 Prompt Cache'): NO_BETTER_PLACE,
        ('H3 Sigma Shift.MODEL', 'Guider.model', 'H3 AV Latent'): LATER_ROW,
        ('Noise.NOISE', 'Sample.noise', 'Encode Crops'): NO_BETTER_PLACE,
        ('Latent Inpaint Mask.latent', 'Sample.latent_image', 'Guider'): NO_BETTER_PLACE,
        ('H3 Video VAE.VAE', 'Decode Crops.vae', 'H3 AV Latent'): NO_BETTER_PLACE,
        ('Subject Crop.frame_count', 'Trim to Clip Length.length', 'Mask Shield (sampler)'): LATER_ROW,
        ('Load Video.images', 'Subject Uncrop.source_images', 'SAM3 Garment + Hands'): LATER_ROW,
        ('Load Video.images', 'Subject Uncrop.source_images', 'TaoMate 2-step LoRA'): NO_BETTER_PLACE,
        ('Load Video.images', 'Subject Uncrop.source_images', 'H3 Video VAE'): LATER_ROW,
        ('Load Video.images', 'Subject Uncrop.source_images', 'Garment Reference'): LATER_ROW,
        ('Load Video.images', 'Subject Uncrop.source_images', 'Garment Prompt'): NO_BETTER_PLACE,
        ('Trim to Clip Length.IMAGE', 'Subject Uncrop.cropped_images', 'Latent Inpaint Mask'): LATER_ROW,
        ('Subject Crop.crop_record', 'Subject Uncrop.crop_record', 'H3 Prompt Cache'): NO_BETTER_PLACE,
        ('Subject Crop.crop_record', 'Subject Uncrop.crop_record', 'H3 AV Latent'): NO_BETTER_PLACE,
        ('Load Video.images', 'Re-paste Hands.source_images', 'SAM3 Garment + Hands'): LATER_ROW,
        ('Load Video.images', 'Re-paste Hands.source_images', 'TaoMate 2-step LoRA'): LATER_ROW,
        ('Load Video.images', 'Re-paste Hands.source_images', 'Noise'): LATER_ROW,
        ('Load Video.images', 'Re-paste Hands.source_images', 'Sampler'): LATER_ROW,
        ('Load Video.images', 'Re-paste Hands.source_images', 'Garment Prompt'): NO_BETTER_PLACE,
        ('Mask Cache.masks_2', 'Re-paste Hands.protected_mask', 'Grow Hands'): LATER_ROW,
        ('Mask Cache.masks_2', 'Re-paste Hands.protected_mask', 'H3 Sigma Shift'): NO_BETTER_PLACE,
        ('Mask Cache.masks_2', 'Re-paste Hands.protected_mask', 'H3 Reference to Video'): NO_BETTER_PLACE,
        ('Load Video.fps', 'Export Video.fps', 'SAM3 Garment + Hands'): LATER_ROW,
        ('Load Video.fps', 'Export Video.fps', 'TaoMate 2-step LoRA'): LATER_ROW,
        ('Load Video.fps', 'Export Video.fps', 'Scheduler (2 steps)'): LATER_ROW,
        ('Load Video.audio', 'Export Video.audio', 'SAM3 Garment + Hands'): LATER_ROW,
        ('Load Video.audio', 'Export Video.audio', 'TaoMate 2-step LoRA'): LATER_ROW,
        ('Load Video.audio', 'Export Video.audio', 'Scheduler (2 steps)'): LATER_ROW,
    },
    'wardrobe_mask_check': {
        ('Load Clip.images', 'Mask Check.images', 'Garment Mask (red)'): NO_BETTER_PLACE,
    },
}


@pytest.mark.parametrize("path", UI_FILES, ids=[p.stem for p in UI_FILES])
def test_links_do_not_run_behind_nodes(path):
    wf = json.loads(path.read_text(encoding="utf-8"))
    found = workflow_links.crossings(wf)
    assert len(found) == len(set(found))
    allowed = ALLOWED.get(path.stem, {})
    new = [c for c in found if c not in allowed]
    assert new == [], (f"{path.name}: links behind nodes {new} (run scripts/workflow/editor.py layout "
                       f"{path.stem}; list one that no layout avoids in ALLOWED with the reason)")
    gone = [c for c in allowed if c not in found]
    assert gone == [], f"{path.name}: listed in ALLOWED but no longer behind a node: {gone} (remove them)"


def test_every_allowed_entry_names_a_shipped_workflow_and_a_reason():
    stems = {p.stem for p in UI_FILES}
    assert set(ALLOWED) <= stems
    assert all(reason in (LATER_ROW, NO_BETTER_PLACE, TWO_CONSUMERS)
               for entries in ALLOWED.values() for reason in entries.values())


def _node(nid, x, y, w=200, h=100, inputs=(), outputs=()):
    return {"id": nid, "title": f"n{nid}", "type": "T", "pos": [x, y], "size": [w, h],
            "inputs": [dict(i) for i in inputs], "outputs": [{"name": o} for o in outputs]}


def test_a_link_through_a_node_between_its_ends_is_found_and_one_around_it_is_not():
    wf = {"nodes": [_node(1, 0, 0, outputs=["out"]), _node(2, 300, -10), _node(3, 600, 0, inputs=[{"name": "in"}])],
          "links": [[1, 1, 0, 3, 0, "T"]]}
    assert workflow_links.crossings(wf) == [("n1.out", "n3.in", "n2")]
    wf["nodes"][1]["pos"] = [300, 60]   # the node between moved under the link (y 14): nothing behind it
    assert workflow_links.crossings(wf) == []


def test_the_curve_is_what_counts_not_the_straight_line():
    """A link between slots at different heights leaves and enters horizontally: a node just beside its lower end
    that the straight line clears is crossed by the curve the editor draws."""
    wf = {"nodes": [_node(1, 0, 0, outputs=["out"]), _node(3, 800, 400, inputs=[{"name": "in"}]),
                    _node(2, 560, 420, w=180, h=60)], "links": [[1, 1, 0, 3, 0, "T"]]}
    p0 = workflow_links.output_pos(wf["nodes"][0], 0)
    p3 = workflow_links.input_pos(wf["nodes"][1], 0)
    x0, y0, x1, y1 = workflow_links.node_rect(wf["nodes"][2])
    straight_hits = any(x0 < p0[0] + (p3[0] - p0[0]) * t / 100 < x1 and y0 < p0[1] + (p3[1] - p0[1]) * t / 100 < y1
                        for t in range(101))
    assert not straight_hits
    assert workflow_links.crossings(wf) == [("n1.out", "n3.in", "n2")]


def test_slot_positions_follow_the_editor_rules():
    node = _node(7, 100, 200, w=300, inputs=[{"name": "a"}, {"name": "seed", "widget": {"name": "seed"}},
                                              {"name": "b"}, {"name": "fps", "widget": {"name": "fps"}}],
                 outputs=["x", "y", "z"])
    assert workflow_links.output_pos(node, 2) == (100 + 300 + 1 - 10, 200 + 2.7 * 20)
    assert workflow_links.input_pos(node, 2) == (110, 200 + 1.7 * 20)            # second input without a widget
    # Widgets start 6 px under max(2 plain inputs, 3 outputs) rows; the seed's control widget takes a row too.
    assert workflow_links.input_pos(node, 1) == (110, 200 + 3 * 20 + 6 + 10)
    assert workflow_links.input_pos(node, 3) == (110, 200 + 3 * 20 + 6 + 2 * 24 + 10)
    assert workflow_links.input_pos_is_exact(node, 3)
    node["inputs"][1]["type"] = "STRING"   # a text box above: as tall as the node leaves room for, not in the file
    assert not workflow_links.input_pos_is_exact(node, 3) and workflow_links.input_pos_is_exact(node, 1)
