"""The workflow lint's node table against the live server: API-format files carry no output types, so the lint
reads them from `scripts/workflow_lint.OUTPUT_TYPES`. A node whose outputs change (a slot added, reordered or
retyped) must fail here, not make the lint stop seeing a leak in API files."""
from __future__ import annotations

from scripts import workflow_lint


def test_output_table_matches_object_info(comfy):
    info = comfy.object_info()
    pack = {c for c in workflow_lint.OUTPUT_TYPES if c.startswith("Broadcast")}
    assert pack - set(info) == set(), "the lint names pack nodes the server does not serve"
    wrong = {c: (types, info[c]["output"]) for c, types in workflow_lint.OUTPUT_TYPES.items()
             if c in info and list(info[c]["output"]) != types}
    assert wrong == {}, "lint table (left) differs from /object_info (right): update scripts/workflow_lint.py"


def test_every_pack_node_of_the_rules_is_served_with_the_tainted_slot(comfy):
    info = comfy.object_info()
    for cls, slots in workflow_lint.SOURCES.items():
        assert cls in info, f"sampler-side source {cls} is not served"
        for slot in slots:
            assert info[cls]["output"][slot] in ("MASK", "IMAGE", "LATENT"), (cls, slot, info[cls]["output"])
    for cls in workflow_lint.COMPOSITORS | workflow_lint.DECODERS:
        if cls.startswith("Broadcast"):
            assert cls in info, f"compositor {cls} is not served"
    # The core nodes the rules name exist on this core (a rename upstream would make a rule dead).
    for cls in ("ImageCompositeMasked", "ImageBlend", "PorterDuffImageComposite", "JoinImageWithAlpha",
                "SetLatentNoiseMask", "VAEDecode", "VAEDecodeTiled"):
        assert cls in info, f"core node {cls} named by the lint is not served"
