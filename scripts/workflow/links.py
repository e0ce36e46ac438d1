"""Where the editor draws a UI workflow's links, and which of them run behind a node.

The editor (LiteGraph in ComfyUI's frontend 1.32.9 and 1.49.6; `Comfy.LinkRenderMode` defaults to spline) draws a
link as one cubic Bezier curve from the output slot to the input slot, its control points a quarter of the straight
distance d straight out of each slot: P0 = output, P1 = P0 + (d/4, 0), P2 = P3 - (d/4, 0), P3 = input
(`renderLinkDirect` / `applySplineOffset`, read in the frontends' bundles). A straight segment between the slots would
miss the curve's bulge: a link between two slots at different heights leaves and enters horizontally, so it can pass
behind a node beside either end that the straight line misses (and the reverse). `crossings` samples that curve.

Slot positions follow the editor's rules (`calculateInputSlotPosFromSlot`, `calculateOutputSlotPos`, the widget
layout): an output i at (x + w + 1 - 10, y + (i + 0.7) * 20); an input without a widget at (x + 10, y + (j + 0.7) * 20)
with j its index among such inputs; an input that is a widget's socket at the height of its widget, which start 6 px
under the slot rows (max(inputs without widget, outputs) rows of 20 px) and are 24 px apart (the plain widgets every
linked one follows here; a seed's control widget adds one; under a multi-line text box the socket is only
approximate: `input_pos_is_exact`). `tests/comfy/test_workflows_browser.py` checks these positions against the
editor's own `getInputPos` / `getOutputPos` for every shipped workflow.
"""
from __future__ import annotations

SLOT_H = 20
TITLE_H = 30
WIDGET_H = 24
SAMPLES = 48
SEED_INPUTS = ("seed", "noise_seed")   # numbers the editor gives a control_after_generate widget below


def node_rect(node) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a node as drawn: its title bar sits above `pos`."""
    (x, y), (w, h) = node["pos"], node["size"]
    return x, y - TITLE_H, x + w, y + h


def output_pos(node, slot: int) -> tuple[float, float]:
    (x, y), (w, _) = node["pos"], node["size"]
    return x + w + 1 - SLOT_H / 2, y + (slot + 0.7) * SLOT_H


def input_pos(node, slot: int) -> tuple[float, float]:
    (x, y) = node["pos"]
    inputs = node.get("inputs") or []
    target = inputs[slot]
    plain = [i for i in inputs if not i.get("widget")]
    if not target.get("widget"):
        return x + SLOT_H / 2, y + (plain.index(target) + 0.7) * SLOT_H
    rows = max(len(plain), len(node.get("outputs") or []))
    above = 0
    for i in inputs:
        if i is target:
            break
        if i.get("widget"):
            above += 2 if i["name"] in SEED_INPUTS else 1
    return x + SLOT_H / 2, y + rows * SLOT_H + 6 + above * WIDGET_H + SLOT_H / 2


def input_pos_is_exact(node, slot: int) -> bool:
    """False for a widget's socket under a text widget: a multi-line box is drawn as tall as the node leaves room
    for (1.32.9 shares the free height among such boxes, 1.49.6 sizes them otherwise), which a UI file does not say,
    so `input_pos` counts it as one row and the socket may sit lower in the editor."""
    inputs = node.get("inputs") or []
    for i in inputs[:slot]:
        if i.get("widget") and i.get("type") == "STRING":
            return False
    return True


def link_curve(p0, p3, samples: int = SAMPLES) -> list[tuple[float, float]]:
    """Points along the editor's spline from p0 (an output) to p3 (an input)."""
    d = ((p3[0] - p0[0]) ** 2 + (p3[1] - p0[1]) ** 2) ** 0.5
    p1, p2 = (p0[0] + d / 4, p0[1]), (p3[0] - d / 4, p3[1])
    out = []
    for k in range(samples + 1):
        t = k / samples
        a, b, c, e = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t ** 2, t ** 3
        out.append((a * p0[0] + b * p1[0] + c * p2[0] + e * p3[0], a * p0[1] + b * p1[1] + c * p2[1] + e * p3[1]))
    return out


def _segment_hits(p, q, rect) -> bool:
    """Does the segment p-q pass through the inside of rect (Liang-Barsky clipping)?"""
    x0, y0, x1, y1 = rect
    t0, t1 = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for edge_p, edge_q in ((-dx, p[0] - x0), (dx, x1 - p[0]), (-dy, p[1] - y0), (dy, y1 - p[1])):
        if edge_p == 0:
            if edge_q <= 0:
                return False
            continue
        r = edge_q / edge_p
        if edge_p < 0:
            t0 = max(t0, r)
        else:
            t1 = min(t1, r)
        if t0 >= t1:
            return False
    return True


def _label(node) -> str:
    return node.get("title") or node["type"]


def link_ends(wf: dict) -> list[tuple[dict, dict, tuple, tuple, list]]:
    """(origin node, target node, output position, input position, link) for every link of a UI workflow."""
    nodes = {n["id"]: n for n in wf["nodes"]}
    out = []
    for link in wf.get("links") or []:
        _, origin, o_slot, target, t_slot = link[:5]
        a, b = nodes[origin], nodes[target]
        out.append((a, b, output_pos(a, o_slot), input_pos(b, t_slot), link))
    return out


def hits(wf: dict, inset: float = 1.0):
    """(origin node, target node, link, crossed node, curve points) for every link whose drawn curve passes behind a
    node other than its ends. `inset` shrinks each rectangle a little: a curve that only touches an edge is fine."""
    for a, b, p0, p3, link in link_ends(wf):
        pts = link_curve(p0, p3)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        for other in wf["nodes"]:
            if other is a or other is b:
                continue
            x0, y0, x1, y1 = node_rect(other)
            rect = (x0 + inset, y0 + inset, x1 - inset, y1 - inset)
            if rect[0] >= max(xs) or rect[2] <= min(xs) or rect[1] >= max(ys) or rect[3] <= min(ys):
                continue
            if any(_segment_hits(p, q, rect) for p, q in zip(pts, pts[1:])):
                yield a, b, link, other, pts


def crossings(wf: dict) -> list[tuple[str, str, str]]:
    """("<from node>.<output>", "<to node>.<input>", "<node crossed>") for every link that runs behind a node."""
    return [(f"{_label(a)}.{a['outputs'][link[2]]['name']}", f"{_label(b)}.{b['inputs'][link[4]]['name']}",
             _label(other)) for a, b, link, other, _ in hits(wf)]
