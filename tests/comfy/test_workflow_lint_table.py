"""The workflow lint's node table against the live server: API-format files carry no output types, so the lint
reads them from `scripts/workflow/lint.OUTPUT_TYPES`. A node whose outputs change (a slot added, reordered or
retyped) must fail here, not make the lint stop seeing a leak in API files."""
from __future__ import annotations

from scripts.workflow import lint as workflow_lint


def test_output_table_matches_object_info(comfy):
    info = comfy.object_info()
    pack = {c for c in workflow_lint.OUTPUT_TYPES if c.startswith("Broadcast")}
    assert pack - set(info) == set(), "the lint names pack nodes the server does not serve"
    wrong = {c: (types, info[c]["output"]) for c, types in workflow_lint.OUTPUT_TYPES.items()
             if c in info and list(info[c]["output"]) != types}
    assert wrong == {}, "lint table (left) differs from /object_info (right): update scripts/workflow/lint.py"


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


def test_every_node_of_a_shipped_api_workflow_that_carries_pixels_is_in_the_table(comfy):
    """A node an API twin uses whose outputs carry IMAGE, MASK or LATENT must be in the table: unknown classes are
    read as "*" (taint passes through every slot), which keeps the lint safe but blurs where a leak came from, and
    a new pack node would otherwise never be checked against /object_info above."""
    import json

    info = comfy.object_info()
    used: dict = {}
    for path in sorted((workflow_lint.REPO_ROOT / "workflows" / "api").glob("*.api.json")):
        for node in json.loads(path.read_text(encoding="utf-8")).values():
            used.setdefault(node["class_type"], path.name)
    # Core's save and preview nodes end a graph (nothing is linked from them; 0.33.0 lists an IMAGE output on
    # SaveImage, 0.3.75 none): every other class counts, every pack node always.
    missing = {cls: (name, info[cls]["output"]) for cls, name in used.items()
               if cls in info and {"IMAGE", "MASK", "LATENT"} & set(info[cls]["output"])
               and cls not in workflow_lint.OUTPUT_TYPES
               and (cls.startswith("Broadcast") or not info[cls].get("output_node"))}
    assert missing == {}, ("classes (a workflow using each, their outputs) missing from "
                           f"scripts/workflow/lint.OUTPUT_TYPES: {missing}")
