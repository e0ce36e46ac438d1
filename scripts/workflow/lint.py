"""Workflow lint: refuses any path from a sampler-side mask (the token grid, the shield) into a pixel compositor.

Why: in the posts the compositor was fed the latent-grid mask through a clean-up node, so hallucinated 32-64 px
blocks were pasted over real hands. The pack keeps the token grid inside LATENTs, but a graph can still leak it (the
grid preview through ImageToMask, the shield's mask into the crop). This checker walks the graph from every
sampler-side output, through any node (core MaskComposite, GrowMask, ImageToMask, bypassed or unknown nodes all
propagate), and reports each compositor input it reaches, naming the link that enters the compositor and the path.

Sources: Broadcast Latent Inpaint Mask (both outputs), Broadcast Mask Shield, Broadcast Mask Check Preview's overlay,
Broadcast Vace Sampler Mask's latent. Compositors: Broadcast Subject Crop (its mask becomes the blend mask), Subject
Uncrop, Repaste Layer, core ImageCompositeMasked, ImageBlend, PorterDuffImageComposite, JoinImageWithAlpha. Core
SetLatentNoiseMask is refused on a token-grid latent (it would overwrite the grid) or with a sampler-side mask
(its trilinear resize shifts the grid). Only decoders (VAEDecode*) turn a masked latent back into clean pixels.

Works on UI-format (editor) and API-format workflow files; UI subgraph definitions are checked one by one (a path
through a subgraph's boundary is not followed). Links are read with `scripts/workflow/api.py` (one parser for both
formats). API files carry no output types, so `OUTPUT_TYPES` lists those of the nodes the shipped workflows use;
`tests/comfy/test_workflow_lint_table.py` compares it with the live server's /object_info, so a node whose outputs
change cannot silently hide a leak. Command line (repository root):
    python scripts/workflow/lint.py workflows/*.json
exits 1 and prints one line per finding when any file has one.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # also when run as a script
    sys.path.insert(0, str(REPO_ROOT))

from scripts.workflow.api import api_links, ui_links  # noqa: E402

GRID, GRID_LATENT = "token-grid mask", "latent with a token-grid noise mask"

SOURCES = {  # class -> {output slot: taint}
    "BroadcastLatentInpaintMask": {0: GRID_LATENT, 1: GRID},
    "BroadcastMaskShield": {0: GRID},
    "BroadcastMaskCheckPreview": {0: GRID},
    "BroadcastVaceSamplerMask": {2: GRID_LATENT},
}
COMPOSITORS = {"BroadcastSubjectCrop", "BroadcastSubjectUncrop", "BroadcastRepasteLayer", "ImageCompositeMasked",
               "ImageBlend", "PorterDuffImageComposite", "JoinImageWithAlpha"}
DECODERS = {"VAEDecode", "VAEDecodeTiled", "VAEDecodeHunyuan3D", "VAEDecodeAudio"}
CARRIERS = {"IMAGE", "MASK", "LATENT", "BROADCAST_CROP_RECORD", "*"}

# Output types of nodes an API-format file names (UI files carry their own); anything unknown is "*".
OUTPUT_TYPES = {
    "BroadcastMaskShield": ["MASK"], "BroadcastPixelMaskRefine": ["MASK"], "BroadcastMaskGrow": ["MASK"],
    "BroadcastMaskCombine": ["MASK"],
    "BroadcastSubjectCrop": ["IMAGE", "MASK", "BROADCAST_CROP_RECORD", "INT", "INT", "INT"],
    "BroadcastLatentInpaintMask": ["LATENT", "IMAGE"], "BroadcastSubjectUncrop": ["IMAGE"],
    "BroadcastRepasteLayer": ["IMAGE"], "BroadcastMaskSequenceCache": ["MASK", "MASK", "STRING"],
    "BroadcastMaskCheckPreview": ["IMAGE", "STRING"], "BroadcastVaceSamplerMask": ["CONDITIONING", "CONDITIONING",
                                                                                 "LATENT"],
    "BroadcastSam3Loader": ["BROADCAST_SAM3_MODEL"], "BroadcastSam3VideoMask": ["MASK"] * 5,
    "BroadcastLoadVideo": ["IMAGE", "AUDIO", "FLOAT", "INT"], "BroadcastLoadAudio": ["AUDIO"],
    "BroadcastExportVideo": ["VIDEO", "STRING"],
    "BroadcastMuseTalkLipSync": ["IMAGE", "AUDIO", "FLOAT", "STRING", "BROADCAST_FRAME_STREAM"],
    "BroadcastDittoRender": ["IMAGE", "AUDIO", "STRING", "BROADCAST_FRAME_STREAM", "FLOAT"],
    "BroadcastQC": ["BOOLEAN", "STRING", "STRING", "STRING", "IMAGE"], "BroadcastSam3TrackToMasks": ["MASK"] * 5,
    "EmptyMiniMaxH3LatentAV": ["LATENT"], "MakeTrainingDataset": ["LATENT", "CONDITIONING"],
    "KSampler": ["LATENT"], "KSamplerAdvanced": ["LATENT"], "SamplerCustom": ["LATENT", "LATENT"],
    "SamplerCustomAdvanced": ["LATENT", "LATENT"], "VAEDecode": ["IMAGE"], "VAEDecodeTiled": ["IMAGE"],
    "VAEEncode": ["LATENT"], "SetLatentNoiseMask": ["LATENT"], "GrowMask": ["MASK"], "MaskComposite": ["MASK"],
    "ImageToMask": ["MASK"], "MaskToImage": ["IMAGE"], "ThresholdMask": ["MASK"], "FeatherMask": ["MASK"],
    "InvertMask": ["MASK"], "ImageCompositeMasked": ["IMAGE"], "WanVaceToVideo": ["CONDITIONING", "CONDITIONING",
                                                                                  "LATENT", "INT"],
    "TrimVideoLatent": ["LATENT"], "ImageFromBatch": ["IMAGE"], "GetImageSize": ["INT", "INT", "INT"],
    "UNETLoader": ["MODEL"], "VAELoader": ["VAE"], "CLIPLoader": ["CLIP"], "CLIPTextEncode": ["CONDITIONING"],
    "LoraLoaderModelOnly": ["MODEL"], "LoadImage": ["IMAGE", "MASK"], "RandomNoise": ["NOISE"],
    "KSamplerSelect": ["SAMPLER"], "BasicScheduler": ["SIGMAS"], "CFGGuider": ["GUIDER"], "BasicGuider": ["GUIDER"],
    "EmptyHunyuanLatentVideo": ["LATENT"], "MiniMaxH3ReferenceToVideo": ["CONDITIONING", "LATENT"],
    "MiniMaxH3SigmaShift": ["MODEL"], "ConditioningZeroOut": ["CONDITIONING"], "LoadTrainingDataset": ["LATENT",
                                                                                                       "CONDITIONING"],
}


@dataclass(frozen=True)
class Link:
    link_id: str          # UI link id, or "src:slot->dst.input" for API files
    src: str
    slot: int
    dst: str
    dst_input: str
    type: str


@dataclass(frozen=True)
class Finding:
    file: str
    link: Link
    sink: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message}"


class Graph:
    """Nodes (id -> class, title, output types, bypassed/muted) and links, from either file format."""

    def __init__(self):
        self.cls: dict = {}
        self.title: dict = {}
        self.out_types: dict = {}
        self.muted: set = set()
        self.links: list = []

    def label(self, node: str) -> str:
        t = self.title.get(node)
        return f"{self.cls[node]} #{node}" + (f" ('{t}')" if t and t != self.cls[node] else "")

    def out_type(self, node: str, slot: int) -> str:
        types = self.out_types.get(node) or OUTPUT_TYPES.get(self.cls.get(node), [])
        return str(types[slot]).upper() if slot < len(types) else "*"


def parse(data: dict) -> Graph:
    g = Graph()
    if isinstance(data.get("nodes"), list):  # UI format
        for n in data["nodes"]:
            nid = str(n["id"])
            g.cls[nid] = n.get("type", "?")
            g.title[nid] = n.get("title")
            g.out_types[nid] = [o.get("type", "*") for o in n.get("outputs") or []]
            if n.get("mode") == 2:  # muted: produces nothing
                g.muted.add(nid)
        names = {}
        for n in data["nodes"]:
            for i, inp in enumerate(n.get("inputs") or []):
                names[(str(n["id"]), i)] = inp.get("name", f"input {i}")
        for lid, (src, slot, dst, dslot, typ) in ui_links(data).items():
            g.links.append(Link(str(lid), str(src), int(slot), str(dst), names.get((str(dst), int(dslot)),
                                                                                 f"input {dslot}"), str(typ or "*")))
        return g
    for nid, n in data.items():  # API format
        if not isinstance(n, dict) or "class_type" not in n:
            continue
        g.cls[str(nid)] = n["class_type"]
        g.title[str(nid)] = (n.get("_meta") or {}).get("title")
    for src, slot, dst, name in api_links(data):
        g.links.append(Link(f"{src}:{slot}->{dst}.{name}", src, slot, dst, name, g.out_type(src, slot)))
    return g


def _taint_out(g: Graph, node: str, slot: int, incoming: set) -> Optional[str]:
    """Taint of output ``slot`` of ``node`` given the taints arriving on its inputs."""
    src = SOURCES.get(g.cls[node], {})
    if slot in src:
        return src[slot]
    if node in g.muted or not incoming or g.cls[node] in DECODERS:
        return None
    typ = g.out_type(node, slot)
    if not any(t.strip() in CARRIERS for t in typ.split(",")):
        return None
    if typ == "LATENT":
        return GRID_LATENT
    return GRID if typ != "*" else (GRID if GRID in incoming else GRID_LATENT)


def check(data: dict, file: str = "<workflow>") -> list:
    """All findings of one workflow (UI or API format dict)."""
    g = parse(data)
    out_links = defaultdict(list)
    for lk in g.links:
        out_links[lk.src].append(lk)
    # taints[node] = {taint: path}; a path is the list of links from a source.
    arriving = defaultdict(dict)
    queue = deque()
    for node, slots in ((n, SOURCES.get(c, {})) for n, c in g.cls.items()):
        if slots and node not in g.muted:
            queue.append(node)
    done_links = set()
    findings = []
    seen_sinks = set()
    while queue:
        node = queue.popleft()
        for lk in out_links.get(node, []):
            taint = _taint_out(g, node, lk.slot, set(arriving[node]))
            if taint is None or (lk.link_id, taint) in done_links:
                continue
            done_links.add((lk.link_id, taint))
            path = arriving[node].get(taint) or next(iter(arriving[node].values()), [])
            path = path + [lk]
            dst_cls = g.cls.get(lk.dst, "?")
            problem = None
            if dst_cls in COMPOSITORS:
                problem = (f"the {taint} reaches pixel compositor {g.label(lk.dst)} input '{lk.dst_input}'. "
                           "A compositor takes only the pixel-accurate mask (Subject Crop's record, Pixel Mask "
                           "Refine); the token grid and the shield belong to the sampler.")
            elif dst_cls == "SetLatentNoiseMask":
                problem = (f"SetLatentNoiseMask {g.label(lk.dst)} input '{lk.dst_input}' receives a {taint}: "
                           + ("it would overwrite the token-grid noise mask with a resized pixel mask."
                              if taint == GRID_LATENT else
                              "its trilinear resize would shift the grid; use Broadcast Latent Inpaint Mask."))
            if problem and (lk.link_id, lk.dst_input) not in seen_sinks:
                seen_sinks.add((lk.link_id, lk.dst_input))
                route = " -> ".join([g.label(path[0].src)] + [f"{g.label(p.dst)}.{p.dst_input}" for p in path])
                findings.append(Finding(file, lk, lk.dst, f"link {lk.link_id}: {problem} Path: {route}."))
                continue
            if taint not in arriving[lk.dst]:
                arriving[lk.dst][taint] = path
                queue.append(lk.dst)
    return findings


def check_workflow(data: dict, file: str = "<workflow>") -> list:
    """`check` on the workflow and on each subgraph definition of a UI file (each checked on its own: a path that
    crosses a subgraph boundary is not followed)."""
    findings = check(data, file)
    for sub in ((data.get("definitions") or {}).get("subgraphs") or []) if isinstance(data.get("nodes"), list) else []:
        findings += check(sub, f"{file} (subgraph {sub.get('name') or sub.get('id')})")
    return findings


def check_file(path: Path) -> list:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return check_workflow(data, str(path))


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python scripts/workflow/lint.py WORKFLOW.json [...]", file=sys.stderr)
        return 2
    total = 0
    for name in args:
        try:
            findings = check_file(Path(name))
        except (OSError, ValueError) as exc:
            print(f"{name}: cannot read: {exc}", file=sys.stderr)
            return 2
        for f in findings:
            print(f)
        total += len(findings)
    if total:
        print(f"{total} finding(s): a sampler-side mask reaches a pixel compositor.", file=sys.stderr)
        return 1
    print(f"{len(args)} workflow(s) checked: no sampler-side mask reaches a pixel compositor.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
