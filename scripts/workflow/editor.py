"""Build the shipped UI workflows and their template thumbnails in the real ComfyUI frontend.

    $BA_PYTHON scripts/workflow/editor.py layout [stem ...]     # workflows/<stem>.json from workflows/api/<stem>.api.json
    $BA_PYTHON scripts/workflow/editor.py thumbnails [stem ...] # workflows/<stem>.jpg (the template browser's picture)
    $BA_PYTHON scripts/workflow/editor.py models [stem ...]     # only the `models` metadata of workflows/<stem>.json

Both start a headless ComfyUI with the pack (no models needed) and drive its editor in Chromium, so what is written
is what the editor itself makes of the graph:
- layout: the API twin is loaded the way the editor opens an API file (`app.loadApiJson`); every node gets the size
  the editor computes for its widgets (nothing hidden); nodes are placed in stage groups left to right
  (scripts/workflow/layout.py), columns by link depth inside a stage, so links run forward and no two nodes
  overlap; then nodes that a link's curve passes behind are moved down under it, one at a time, until none is left
  or no move helps (`plan_untangled`; the curve as the editor draws it, scripts/workflow/links.py), and the best
  of a few variants is kept; the crossings left are printed (tests/unit/test_workflow_links.py lists them); a Note (what to provide, where models go, what to expect, how long) goes first. Workflows whose node
  types this core lacks keep their UI file and are only re-laid out.
- layout and models: the `models` metadata the editor's missing-model support reads (scripts/workflow/model_links.py:
  the pack's model folders from engines/common/model_downloads.py, core's files as core's templates list them);
  `models` writes only that, without a browser.
- thumbnails: each workflow is run as the suite runs it (tests/workflow_cases.py: tiny random models, synthetic
  media) and a picture of its result (the exported video's middle frame, the saved mask, the mastered speech's
  waveform) gets the template's title (scripts/workflow/thumbnails.py). Run it with BA_CORE=0.33.0 to include the
  graphs that need that core's nodes; on 0.3.75 their pictures are kept.
Run `layout` after changing an API twin or layout.py, then `thumbnails`; the tests check both are current.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.workflow import layout as spec  # noqa: E402
from scripts.workflow import links  # noqa: E402
from scripts.workflow import model_links  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = REPO_ROOT / "workflows"

TITLE_H = 30           # LiteGraph's node title bar, drawn above `pos`
GROUP_HEAD = 50        # a group's title bar plus margin above its first node's title
PAD = 24               # group border around its nodes
GAP_X, GAP_Y = 60, 40  # between columns / between a node and the next node's title
NOTE_W = 420

MEASURE_JS = """async ([api, ui, name]) => {
    if (ui) { await app.loadGraphData(ui, true, false, name); }
    else { app.loadApiJson(api, name); }
    await new Promise(r => setTimeout(r, 200));
    return app.graph.nodes.map(n => {
        const c = n.computeSize ? n.computeSize() : n.size;
        const multiline = (n.widgets || []).some(w => w.type === "customtext" || (w.options && w.options.multiline)
                                                  || w.element instanceof HTMLTextAreaElement);
        const link = i => (i.link != null ? app.graph.links[i.link] : null);
        return {id: String(n.id), title: n.title, type: n.type, computed: [c[0], c[1]], size: [n.size[0], n.size[1]],
                multiline,
                links: (n.inputs || []).filter(i => link(i)).map(i => String(link(i).origin_id)),
                // The slots, as the editor places them (tests/unit: scripts/workflow/links.py).
                inputs: (n.inputs || []).map(i => ({name: i.name, widget: i.widget ? {name: i.widget.name} : undefined,
                                                    origin: link(i) ? [String(link(i).origin_id), link(i).origin_slot]
                                                                    : null})),
                outputs: (n.outputs || []).map(o => ({name: o.name}))};
    });
}"""

APPLY_JS = """([placed, groups, note]) => {
    for (const p of placed) {
        const n = app.graph.getNodeById(isNaN(+p.id) ? p.id : +p.id);
        n.pos = [p.pos[0], p.pos[1]];
        n.size = [p.size[0], p.size[1]];
        // The API file's seed is the one to use: the editor's default would re-randomise it on every run.
        for (const w of n.widgets || []) if (w.name === "control_after_generate") w.value = "fixed";
    }
    for (const n of app.graph.nodes.filter(n => n.type === "Note" || n.type === "MarkdownNote")) app.graph.remove(n);
    app.graph._groups.splice(0);
    const noteNode = LiteGraph.createNode("Note");
    noteNode.title = "Read me";
    noteNode.widgets[0].value = note.text;
    app.graph.add(noteNode);
    noteNode.pos = [note.pos[0], note.pos[1]];
    noteNode.size = [note.size[0], note.size[1]];
    for (const g of groups) {
        const group = new LiteGraph.LGraphGroup(g.title);
        group.pos = [g.rect[0], g.rect[1]];
        group.size = [g.rect[2], g.rect[3]];
        app.graph.add(group);
    }
    const wf = app.graph.serialize();
    // The opening view: readable (0.8) with the Note clear of the side bar (58 px in frontends 1.32 and 1.49).
    wf.extra = {ds: {scale: 0.8, offset: [110, 100]}};
    // As the editor saves a file: through JSON, so undefined fields are dropped (not sent back as null).
    return JSON.parse(JSON.stringify(wf));
}"""


def _depths(nodes: dict, late_sources: bool = False) -> dict:
    depth: dict = {}

    def visit(nid, seen=()):
        if nid in depth:
            return depth[nid]
        ups = [u for u in nodes[nid]["links"] if u in nodes and u not in seen]
        depth[nid] = 1 + max((visit(u, seen + (nid,)) for u in ups), default=-1)
        return depth[nid]

    for nid in nodes:
        visit(nid)
    if late_sources:
        # A node with no inputs (a loader) goes in the column just before its first consumer, not in the first
        # column: its links then skip fewer columns (fewer nodes for them to pass behind).
        for nid, n in nodes.items():
            if not [u for u in n["links"] if u in nodes]:
                below = [depth[m] for m, other in nodes.items() if nid in other["links"]]
                if below:
                    depth[nid] = max(depth[nid], min(below) - 1)
    return depth


def plan_layout(stem: str, measured: list[dict], drop: dict | None = None,
                late_sources: bool = False, rank: dict | None = None) -> tuple[list, list, dict]:
    """Positions and sizes of every node, the stage groups and the Note: stages left to right, columns by depth.

    `drop[id]` moves a node (and those under it in its column) that much further down: room for links to pass;
    `rank[id]` orders the nodes of a column (default: their order in the stage).
    """
    drop, rank = drop or {}, rank or {}
    nodes = {m["id"]: m for m in measured if m["id"] is not None}
    stages = spec.STAGES[stem]
    listed = [nid for _, ids in stages for nid in ids]
    if sorted(listed) != sorted(nodes) or len(set(listed)) != len(listed):
        raise SystemExit(f"{stem}: layout.py STAGES must list every node once: listed {sorted(listed)}, "
                         f"graph has {sorted(nodes)}")
    depth = _depths(nodes, late_sources)
    note_text = spec.NOTES[stem]
    note_h = 60 + 18 * sum(1 + len(line) // 52 for line in note_text.splitlines())
    left = PAD + NOTE_W + GAP_X
    x = left
    top = GROUP_HEAD + TITLE_H
    row_bottom = top
    placed, groups = [], []
    for index, (title, ids) in enumerate(stages):
        if index in spec.ROW_BREAKS.get(stem, ()):
            x, top = left, row_bottom + PAD + 2 * GAP_Y + GROUP_HEAD + TITLE_H
        columns: dict = {}
        for nid in ids:
            columns.setdefault(depth[nid], []).append(nid)
        gx = x - PAD
        bottom = top
        for d in sorted(columns):
            y, width = top, 0
            column = columns[d]
            if late_sources:  # a loader moved next to its consumer goes under the nodes that have inputs
                column = sorted(column, key=lambda nid: not [u for u in nodes[nid]["links"] if u in nodes])
            column = sorted(column, key=lambda nid: rank.get(nid, 0))
            for nid in column:
                n = nodes[nid]
                w = max(320.0, n["computed"][0])
                # Some room beyond the computed minimum: a loader's picked-file preview grows it a little on load.
                h = n["computed"][1] + 30 + (120 if n["multiline"] else 0)
                y += drop.get(nid, 0)
                placed.append({"id": nid, "pos": [x, y], "size": [w, h]})
                y += h + GAP_Y + TITLE_H
                width = max(width, w)
            bottom = max(bottom, y - GAP_Y - TITLE_H)
            x += width + GAP_X
        groups.append({"title": title, "rect": [gx, top - TITLE_H - GROUP_HEAD, x - GAP_X + PAD - gx,
                                                 bottom - (top - TITLE_H - GROUP_HEAD) + PAD]})
        row_bottom = max(row_bottom, bottom)
        x += 2 * PAD
    note = {"text": note_text, "pos": [PAD, GROUP_HEAD + TITLE_H], "size": [NOTE_W, note_h]}
    return placed, groups, note


MAX_ROUNDS = 150
MAX_DROP = 600   # the most a node is moved down for links to pass
CLEAR = 24   # how far a node is moved under a link that ran behind it


def as_workflow(placed: list, note: dict, measured: list[dict]) -> dict:
    """The planned graph in the shape of a UI file (nodes with pos, size and slots; links), for links.py."""
    by_id = {m["id"]: m for m in measured}
    nodes, links = [], []
    for p in placed:
        m = by_id[p["id"]]
        nodes.append({"id": p["id"], "title": m.get("title"), "type": m.get("type"), "pos": p["pos"],
                      "size": p["size"], "inputs": [{k: v for k, v in i.items() if k != "origin" and v is not None}
                                                    for i in m["inputs"]], "outputs": m["outputs"]})
        for slot, i in enumerate(m["inputs"]):
            if i.get("origin") and i["origin"][0] in by_id:
                links.append([len(links) + 1, i["origin"][0], i["origin"][1], p["id"], slot])
    nodes.append({"id": "note", "title": "Read me", "type": "Note", "pos": note["pos"], "size": note["size"],
                  "inputs": [], "outputs": []})
    return {"nodes": nodes, "links": links}


def plan_untangled(stem: str, measured: list[dict], late_sources: bool = False,
                   clear: float = CLEAR) -> tuple[list, list, dict, list, dict]:
    """plan_layout, with nodes moved down until no link runs behind one (or no move helps); returns the plan, the
    crossings left and the moves (`drop`).

    Each round, every node a link's curve (as the editor draws it: scripts/workflow/links.py) passes behind is moved
    under the lowest point of that curve over the node's width, then the plan is made again (a node moved down
    moves those under it, and a taller row moves the rows below).
    """
    drop: dict = {}
    best = None
    for _ in range(MAX_ROUNDS):
        placed, groups, note = plan_layout(stem, measured, drop, late_sources)
        wf = as_workflow(placed, note, measured)
        found = list(links.hits(wf))
        if best is None or len(found) < best[0]:
            best = (len(found), placed, groups, note, links.crossings(wf), dict(drop))
        if not found:
            break
        need: dict = {}
        for _a, _b, _link, other, pts in found:
            if other["id"] == "note":
                continue
            x0, y0, x1, _ = links.node_rect(other)
            dense = links.link_curve(pts[0], pts[-1], samples=400)
            under = max(py for px, py in dense if x0 - clear <= px <= x1 + clear)
            if under + clear - y0 + drop.get(other["id"], 0) > MAX_DROP:
                continue  # that far down the node would leave its row: the link stays behind it
            need[other["id"]] = max(need.get(other["id"], 0), under + clear - y0)
        if not need:
            break
        # One node a round (the one most links pass behind, leftmost first): moving two at once can undo each other,
        # a node moved down for one link pulls its own links across the other.
        count: dict = {}
        for _a, _b, _link, other, _ in found:
            count[other["id"]] = count.get(other["id"], 0) + 1
        where = {n["id"]: n["pos"][0] for n in wf["nodes"]}
        nid = min(need, key=lambda k: (-count[k], where[k]))
        drop[nid] = drop.get(nid, 0) + need[nid]
    return best[1], best[2], best[3], best[4], best[5]


MAX_GROWTH = 1.6     # the most the search may grow the canvas's area over the plan without moves
SEARCH_STEPS = 1200  # tries of the local search per workflow (seeded: the same files every run)


def _score(stem, measured, drop, late, rank):
    placed, groups, note = plan_layout(stem, measured, drop, late, rank)
    wf = as_workflow(placed, note, measured)
    area = max(p["pos"][0] + p["size"][0] for p in placed) * max(p["pos"][1] + p["size"][1] for p in placed)
    found = list(links.hits(wf))
    return (len(found), area), (placed, groups, note, links.crossings(wf)), found


def best_plan(stem: str, measured: list[dict]) -> tuple[list, list, dict, list]:
    """The plan that leaves the fewest links behind nodes, then the smallest canvas.

    Starts from the best plan_untangled variant (loaders in the first column or next to their consumer; 24 or 48 px
    of clearance), then a local search seeded by the workflow's name (the same files every run) tries one change at
    a time: a crossed node put under the curve behind it (or that link's lower end under the node), a node moved to
    a random height or a little up or down (at most MAX_DROP), a column reordered; it keeps each try that leaves fewer
    crossings, or as many on no larger a canvas, on at most MAX_GROWTH times the area of the plan without moves.
    """
    import random

    starts = []
    for late in (False, True):
        for clear in (CLEAR, 2 * CLEAR):
            drop = plan_untangled(stem, measured, late, clear)[4]
            starts.append((_score(stem, measured, drop, late, {})[0], late, drop))
    score, late, drop = min(starts, key=lambda s: (s[0], s[1]))
    rank: dict = {}
    base = _score(stem, measured, {}, late, {})[0][1]
    rng = random.Random(stem)
    ids = sorted(m["id"] for m in measured)
    result = _score(stem, measured, drop, late, rank)
    for _ in range(SEARCH_STEPS if score[0] else 0):
        nid = rng.choice(ids)
        new_drop, new_rank = dict(drop), dict(rank)
        move = rng.random()
        hit = rng.choice(result[2]) if result[2] else None
        if move < 0.3 and hit and hit[3]["id"] != "note":
            # A crossed node under the curve that runs behind it (or the curve's lower end under the node).
            other, pts = hit[3], hit[4]
            x0, y0, x1, y1 = links.node_rect(other)
            dense = links.link_curve(pts[0], pts[-1], samples=200)
            under = max([py for px, py in dense if x0 - CLEAR <= px <= x1 + CLEAR] or [y1])
            if rng.random() < 0.6:
                new_drop[other["id"]] = drop.get(other["id"], 0.0) + under + CLEAR - y0
            else:
                end = hit[1] if pts[-1][1] >= pts[0][1] else hit[0]
                new_drop[end["id"]] = drop.get(end["id"], 0.0) + y1 - min(pts[0][1], pts[-1][1]) + CLEAR
        elif move < 0.55:
            new_drop[nid] = rng.choice((0.0, rng.uniform(0, MAX_DROP)))
        elif move < 0.85:
            new_drop[nid] = max(0.0, drop.get(nid, 0.0) + rng.uniform(-160, 160))
        else:
            new_rank[nid] = rng.uniform(-1, 1)
        new_drop = {k: min(v, MAX_DROP) for k, v in new_drop.items()}
        tried = _score(stem, measured, new_drop, late, new_rank)
        if tried[0] <= score and tried[0][1] <= MAX_GROWTH * base:
            score, drop, rank, result = tried[0], new_drop, new_rank, tried
            if score[0] == 0:
                break
    return result[1]


def _session():
    """(server, page) context: a headless ComfyUI with the pack and a ready editor page."""
    from contextlib import contextmanager

    @contextmanager
    def session():
        from playwright.sync_api import sync_playwright

        from scripts.comfyui.server import ComfyServer
        from tests.comfy import frontend

        with tempfile.TemporaryDirectory(prefix="ba-editor-") as base:
            server = ComfyServer(base)
            server.start()
            try:
                server.request("POST", "/settings", frontend.SETTINGS)
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=frontend.CHROMIUM, headless=True,
                                                args=frontend.CHROMIUM_ARGS)
                    try:
                        context, page, _ = frontend.open_page(browser, server.url)
                        yield server, page
                        context.close()
                    finally:
                        browser.close()
            finally:
                server.stop()

    return session()


def layout(stems: list[str]) -> None:
    with _session() as (_server, page):
        registered = set(page.evaluate("() => Object.keys(LiteGraph.registered_node_types)"))
        for stem in stems:
            api = spec.api_of(stem)
            ui_path = TEMPLATES / f"{stem}.json"
            lacking = {n["class_type"] for n in api.values()} - registered
            # The editor can only build nodes it knows: a workflow for a newer core keeps its file, re-laid out.
            ui = json.loads(ui_path.read_text(encoding="utf-8")) if lacking else None
            measured = page.evaluate(MEASURE_JS, [api, ui, stem])
            measured = [m for m in measured if m["id"] in {str(k) for k in api}]
            placed, groups, note, behind = best_plan(stem, measured)
            wf = page.evaluate(APPLY_JS, [placed, groups, note])
            # A node of a type this core lacks serialises what it was loaded with: give it its place here.
            where = {p["id"]: p for p in placed}
            for node in wf["nodes"]:
                if str(node["id"]) in where:
                    node["pos"], node["size"] = where[str(node["id"])]["pos"], where[str(node["id"])]["size"]
            model_links.with_models(wf, api)
            ui_path.write_text(json.dumps(wf, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"{ui_path.relative_to(REPO_ROOT)}: {len(placed)} nodes in {len(groups)} groups, "
                  f"{len(behind)} link-behind-node crossings left"
                  + (f" (kept: this core lacks {sorted(lacking)})" if lacking else ""))
            for crossing in behind:
                print("    link %s -> %s runs behind %s" % crossing)


def models(stems: list[str]) -> None:
    """Write each UI file's `models` metadata from its API twin (no browser: nothing else of the file changes)."""
    for stem in stems:
        ui_path = TEMPLATES / f"{stem}.json"
        wf = model_links.with_models(json.loads(ui_path.read_text(encoding="utf-8")), spec.api_of(stem))
        ui_path.write_text(json.dumps(wf, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        count = len(wf.get("models", [])) + sum(len(n.get("properties", {}).get("models", [])) for n in wf["nodes"])
        print(f"{ui_path.relative_to(REPO_ROOT)}: {count} model entries")


def _not_run_card(stem: str, api: dict) -> list[str]:
    """What a graph the test server cannot run makes, in words, for its picture (wardrobe_vace_prompt)."""
    caption = next((n["inputs"]["value"] for n in api.values() if n["class_type"].startswith("PrimitiveString")), "")
    folder = next((n["inputs"]["folder_name"] for n in api.values() if n["class_type"] == "SaveTrainingDataset"), "")
    return [spec.DESCRIPTIONS[stem], f"Prompt: \u201c{caption}\u201d" if caption else "",
            f"Writes: the folder {folder}, which the VACE swap loads" if folder else ""]


def thumbnails(stems: list[str]) -> None:
    """workflows/<stem>.jpg from a real result of the graph (scripts/workflow/thumbnails.py): each workflow is run the
    way the suite runs it (tests/workflow_cases.py: tiny random models, synthetic media) on a fresh server."""
    import os

    from scripts.comfyui.server import ComfyServer
    from scripts.workflow import thumbnails as thumbs
    from scripts.workflow.api import apply_overrides
    from tests.workflow_cases import case_for

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"   # as in the suite: no model hub is contacted
    with tempfile.TemporaryDirectory(prefix="ba-thumbs-") as base:
        server = ComfyServer(base)
        server.start()
        try:
            info = server.object_info()
            for stem in stems:
                title, case, api = spec.TITLES[stem], case_for(stem), spec.api_of(stem)
                out = TEMPLATES / f"{stem}.jpg"
                lacking = case.expected_missing_on(info)
                if not case.runs_on_test_comfy:
                    picture, source, tag = thumbs.card([t for t in _not_run_card(stem, api) if t]), \
                        "what it makes, in words (the test server cannot run it)", ""
                elif lacking:
                    print(f"{out.relative_to(REPO_ROOT)}: kept (this core lacks {sorted(lacking)}: run with "
                          "BA_CORE=0.33.0)")
                    continue
                else:
                    entry = server.run(apply_overrides(api, case.prepare(server), info), timeout=1800)
                    picture, source = thumbs.from_run(server, entry)
                    tag = "suite test run: tiny random models, synthetic media"
                size = thumbs.save(thumbs.titled(picture, title, tag), out, thumbs.stamp(stem, title, source))
                print(f"{out.relative_to(REPO_ROOT)}: {thumbs.SIZE[0]}x{thumbs.SIZE[1]}, {size // 1024} KB, {source}")
        finally:
            server.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("layout", "thumbnails", "models"))
    p.add_argument("stems", nargs="*", help="workflow names (default: every shipped workflow)")
    args = p.parse_args(argv)
    stems = args.stems or list(spec.ORDER)
    unknown = [s for s in stems if s not in spec.STAGES]
    if unknown:
        p.error(f"not in scripts/workflow/layout.py: {unknown}")
    {"layout": layout, "thumbnails": thumbnails, "models": models}[args.command](stems)
    return 0


if __name__ == "__main__":
    sys.exit(main())
