"""Every UI-format workflow loads in the real ComfyUI frontend (headless Chromium) and runs when queued from it.

For each `workflows/*.json` (the template folder: UI files only), picked up automatically: a fresh browser context opens the page
served by the test server, loads the file, and finds no missing node types (other than the case's
`expected_missing`, which must be exactly what is missing), no error dialog, no toast and no console error. Then the
page converts the graph with `app.graphToPrompt`, the case's overrides are applied, the page queues it with
`app.api.queuePrompt`, and the prompt must succeed on the server.

Screenshots are kept as test artifacts in each test's tmp_path (pytest keeps the last runs): `<workflow>_loaded.png`
and `<workflow>_ran.png` of a template as loaded and after its run, and `page_at_end.png` of every test
(tests/comfy/conftest.py).
"""
from __future__ import annotations

import json

import pytest

from scripts.comfyui.server import PACK_LINK_NAME
from scripts.workflow.api import apply_overrides, combo_choices, input_specs, ui_to_api
from tests.comfy import frontend
from tests.workflow_cases import TEMPLATE_DIR, case_for, registration_hint, stem_of, ui_workflows, workflow_id

WORKFLOWS = ui_workflows()

# Nodes drawn smaller than the editor needs for their widgets (a widget would be cut off or hidden). Media previews
# are left out: they take the size of the file the user picks (the editor grows the node then).
CRAMPED_JS = """() => app.graph.nodes.filter(n => n.type !== "Note" && n.computeSize).map(n => {
    const media = w => w.element && (w.element.matches?.("video, audio, img")
                                     || w.element.querySelector?.("video, audio, img"));
    const all = n.widgets;
    if (all) n.widgets = all.filter(w => !media(w));
    const c = n.computeSize();
    n.widgets = all;
    return {title: n.title, size: [n.size[0], n.size[1]], needs: [c[0], c[1]]};
}).filter(x => x.size[0] + 1 < x.needs[0] || x.size[1] + 1 < x.needs[1])"""

# After a run: the media elements the editor shows in nodes (video previews, audio players).
MEDIA_JS = """() => [...document.querySelectorAll('video, audio')].map(e => ({tag: e.tagName.toLowerCase(),
    src: e.currentSrc || e.src || (e.querySelector('source') || {}).src || ''}))"""


def _screenshot_is_a_drawn_graph(page, path):
    """Saves the editor as the user sees it and checks it is a drawn canvas (not a blank or error page)."""
    from PIL import Image, ImageStat

    page.screenshot(path=str(path))
    with Image.open(path) as img:
        spread = ImageStat.Stat(img.convert("L")).stddev[0]
    assert spread > 8, f"the screenshot {path} is nearly uniform (stddev {spread:.1f}): nothing drawn?"


def test_frontend_starts_without_pack_errors(editor):
    """The pack's web extension and node definitions raise nothing while the editor starts."""
    _, _, startup = editor
    assert startup == [], "errors while the editor started:\n" + "\n".join(startup)


def _types_naming_absent_files(wf: dict, info: dict) -> set:
    """Node types in `wf` with a combo value the server does not offer (a model or media file it lacks).

    Newer frontends (1.49, ComfyUI 0.33.0) flag such nodes as having errors on load; 1.32 (0.3.75) does not. Files
    a case's overrides replace, or that a load-only workflow names, are legitimately absent on the test server.
    """
    flagged = set()
    if any(n.get("type") not in info for n in wf.get("nodes", []) if n.get("type") not in ("Note", "Reroute",
                                                                                              "PrimitiveNode")):
        return flagged  # only loaded (types missing): the frontend flags just those, checked by the caller
    for node in ui_to_api(wf, info).values():
        for name, spec in input_specs(info, node["class_type"]).items():
            value, choices = node["inputs"].get(name), combo_choices(spec)
            if choices is not None and isinstance(value, str) and value not in choices:
                flagged.add(node["class_type"])
    return flagged


@pytest.mark.parametrize("path", WORKFLOWS, ids=[workflow_id(p) for p in WORKFLOWS])
def test_workflow_loads_and_runs_from_the_editor(path, editor, comfy, tmp_path):
    page_, log, _ = editor
    case = case_for(stem_of(path))
    wf = json.loads(path.read_text(encoding="utf-8"))

    expected = sorted(case.expected_missing_on(comfy.object_info()))
    runs = case.runs_on_test_comfy and not expected
    # Like a user who has the models and media: they exist before the editor loads the file.
    overrides = case.prepare(comfy)
    page_.evaluate(frontend.REFRESH_DEFS_JS)  # the page opened before the case wrote its files
    # The editor previews the media a loader names; a name the case overrides (or a load-only workflow's media)
    # is not in the input folder, and that preview's 404 says nothing about the workflow.
    log.benign_404 = "/api/view?type=input"
    result = page_.evaluate(frontend.LOAD_JS, [wf, path.stem])

    assert sorted(result["preMissing"]) == expected, (
        f"missing node types {result['preMissing']} (expected {expected}); a pack node failed to register, or the "
        "workflow uses a node of another pack: list it in the case's expected_missing")
    assert sorted(set(result["hookMissing"] or [])) == expected, (
        f"the load did not finish (afterConfigureGraph saw {result['hookMissing']}); dialogs: {result['dialogs']}")
    dialogs = [d for d in result["dialogs"] if not (expected and d.startswith("This workflow has missing nodes"))]
    assert dialogs == [], f"dialogs after loading: {dialogs}"
    assert result["toasts"] == [], f"toasts after loading (validation problems in the file?): {result['toasts']}"
    flagged = set(result["errorNodes"])
    absent_files = _types_naming_absent_files(wf, comfy.object_info())
    assert set(expected) <= flagged <= set(expected) | absent_files, (
        f"nodes flagged with errors: {result['errorNodes']} (allowed: the missing types {expected} and nodes naming "
        f"files this server lacks {sorted(absent_files)})")
    assert result["nodeCount"] > 0
    problems = log.problems()
    assert problems == [], "console errors while loading:\n" + "\n".join(problems)
    if path.parent == TEMPLATE_DIR:
        cramped = page_.evaluate(CRAMPED_JS)
        assert cramped == [], f"nodes too small for their widgets (run scripts/workflow/editor.py layout): {cramped}"
        _screenshot_is_a_drawn_graph(page_, tmp_path / f"{path.stem}_loaded.png")
        _check_slot_model(page_, wf)

    if expected:
        return  # only loaded: node types of another pack are missing here

    # The headless runner's own UI->API conversion must agree with the editor's.
    converted = page_.evaluate("async () => (await app.graphToPrompt()).output")
    info = comfy.object_info()
    ours = ui_to_api(wf, info)

    def strip(prompt):  # frontend-only widgets (an audio player's "audioUI") are not inputs of the node
        return {k: {"class_type": v["class_type"],
                    "inputs": {i: x for i, x in v["inputs"].items() if i in input_specs(info, v["class_type"])}}
                for k, v in prompt.items()}
    assert strip(ours) == strip(converted), (
        f"scripts/workflow/api.ui_to_api differs from the editor's graphToPrompt:\n ours:   {strip(ours)}\n "
        f"editor: {strip(converted)}")

    if not runs:
        return  # only loaded: the test machine cannot run it (documented in tests/workflow_cases.py)
    output = apply_overrides(converted, overrides, info) if overrides else None
    queued = page_.evaluate(frontend.QUEUE_JS, output)
    hint = registration_hint(stem_of(path))
    assert queued["ok"], f"the server refused the prompt from the editor: {queued['error']}\n" \
                         f"{json.dumps(queued['response'], indent=1)[:3000]}{hint}"
    assert not queued["node_errors"], f"outputs skipped for node errors: {queued['node_errors']}{hint}"
    try:
        entry = comfy.finish(queued["prompt_id"], timeout=300)
    except AssertionError as exc:
        raise AssertionError(f"{exc}{hint}") from None
    assert entry["status"]["status_str"] == "success"
    case.check(comfy, entry)
    _check_previews(page_, entry)
    _check_summaries(page_, entry)
    _screenshot_is_a_drawn_graph(page_, tmp_path / f"{path.stem}_ran.png")
    problems = log.problems()
    assert problems == [], "console errors while running:\n" + "\n".join(problems)


# The editor's own slot positions of every link's ends (nodes of types it knows; widgets are placed when drawn).
SLOTS_JS = """async () => {
    app.canvas.setDirty(true, true);
    app.canvas.draw(true, true);
    const known = n => n.type in LiteGraph.registered_node_types;
    const links = app.graph.links instanceof Map ? [...app.graph.links.values()] : Object.values(app.graph.links ?? {});
    return links.filter(l => l).map(l => {
        const o = app.graph.getNodeById(l.origin_id), t = app.graph.getNodeById(l.target_id);
        return known(o) && known(t) ? {id: l.id, out: o.getOutputPos(l.origin_slot), in: t.getInputPos(l.target_slot)}
                                    : null;
    }).filter(x => x);
}"""


def _check_slot_model(page, wf):
    """tests/unit/test_workflow_links.py finds links behind nodes from the file alone, placing each link's ends as
    scripts/workflow/links.py says the editor does: here the editor's own positions must agree (within 2 px; the
    output's x is left out: the editor may widen a node whose preview needs it; so is a socket under a multi-line
    text box, which the model only approximates)."""
    from scripts.workflow import links as workflow_links

    page.evaluate(frontend.FIT_JS)
    nodes = {n["id"]: n for n in wf["nodes"]}
    wrong, editor = [], page.evaluate(SLOTS_JS)
    assert editor or not wf["links"] or any(n["type"] not in page.evaluate(
        "() => Object.keys(LiteGraph.registered_node_types)") for n in wf["nodes"]), "the editor reports no links"
    for got in editor:
        link = next(x for x in wf["links"] if x[0] == got["id"])
        if not workflow_links.input_pos_is_exact(nodes[link[3]], link[4]):
            continue  # under a multi-line text box, whose height the file does not give
        out = workflow_links.output_pos(nodes[link[1]], link[2])
        inp = workflow_links.input_pos(nodes[link[3]], link[4])
        if abs(out[1] - got["out"][1]) > 2 or max(abs(a - b) for a, b in zip(inp, got["in"])) > 2:
            wrong.append(f"link {got['id']} {nodes[link[3]]['type']}.{nodes[link[3]]['inputs'][link[4]]['name']}: "
                         f"editor {got['out']} -> {got['in']}, model {out} -> {inp}")
    assert wrong == [], "scripts/workflow/links.py places slots where the editor does not:\n" + "\n".join(wrong)


def _check_previews(page, entry):
    """Every video and audio file the run's nodes reported is shown in the editor (a player in its node)."""
    wanted = {item["filename"] for ui in entry["outputs"].values() for key in ("images", "audio")
              for item in ui.get(key, []) if item["filename"].rsplit(".", 1)[-1] in ("mp4", "flac", "wav", "mp3")}
    if not wanted:
        return
    page.evaluate(frontend.FIT_JS)
    shown = []
    for _ in range(50):
        shown = page.evaluate(MEDIA_JS)
        if all(any(name in m["src"] for m in shown) for name in wanted):
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"outputs without a player in their node: "
                         f"{sorted(n for n in wanted if not any(n in m['src'] for m in shown))}; shown: {shown}")


def _check_summaries(page, entry):
    """Each text a pack node returned (the export's encode summary) is shown in that node."""
    prompt = entry["prompt"][2]
    wanted = [t for nid, ui in entry["outputs"].items() if prompt[nid]["class_type"].startswith("Broadcast")
              for t in ui.get("text", [])]
    if not wanted:
        return
    shown = page.evaluate("() => [...document.querySelectorAll('textarea.broadcast-summary')].map(t => t.value)")
    missing = [t for t in wanted if not any(t in s for s in shown)]
    assert missing == [], f"texts not shown in their nodes: {missing}; shown: {shown}"


# Through the URLs the editor builds for a listed template (api.apiURL("/workflow_templates/<pack>/<listed name>")
# + ".jpg", and the same with ".json" for the workflow): what each listed title fetches.
TEMPLATE_FETCH_JS = """async ([pack, titles]) => Promise.all(titles.map(async t => {
    const jpg = await fetch(app.api.apiURL(`/workflow_templates/${pack}/${t}`) + ".jpg");
    const wf = await fetch(app.api.apiURL(`/workflow_templates/${pack}/${t}.json`));
    return {title: t, jpg: [jpg.status, jpg.headers.get("content-type")], wf: wf.ok ? await wf.json() : wf.status};
}))"""


def test_editor_lists_the_templates_in_start_here_order_under_their_titles(editor):
    """The editor gets this pack's templates in ORDER, each under its title, and each title fetches its own file."""
    from scripts.workflow.layout import TITLES

    page_, log, _ = editor
    # A template using core nodes this server lacks (newer core's MiniMax H3 and SAM3 on 0.3.75) is not offered.
    openable = frontend.openable_stems(page_)
    titles = [TITLES[stem] for stem in openable]
    listing = page_.evaluate("async () => await app.api.getWorkflowTemplates()")
    assert listing.get(PACK_LINK_NAME) == titles
    for stem, got in zip(openable, page_.evaluate(TEMPLATE_FETCH_JS, [PACK_LINK_NAME, titles])):
        assert got["jpg"] == [200, "image/jpeg"], f"{got['title']}: thumbnail {got['jpg']}"
        assert got["wf"] == json.loads((TEMPLATE_DIR / f"{stem}.json").read_text(encoding="utf-8")), \
            f"{got['title']} does not fetch workflows/{stem}.json"

    # As a user: the template browser shows the titles in that order; picking one opens that workflow.
    page_.evaluate("() => app.extensionManager.command.execute('Comfy.BrowseTemplates')")
    page_.get_by_text(PACK_LINK_NAME, exact=True).first.click()
    pick = titles[1]
    page_.get_by_text(pick, exact=True).first.wait_for(timeout=30_000)
    shown = page_.evaluate("() => document.body.innerText")
    where = [shown.find(t) for t in titles]
    assert -1 not in where and where == sorted(where), f"the template browser shows {shown!r}"
    log.benign_404 = "/api/view?"  # the opened workflow names media this server does not have
    page_.get_by_text(pick, exact=True).first.click()
    wf = json.loads((TEMPLATE_DIR / f"{openable[1]}.json").read_text(encoding="utf-8"))
    expected = sorted(n["type"] for n in wf["nodes"])
    try:
        page_.wait_for_function("(types) => JSON.stringify(app.graph.nodes.map(n => n.type).sort()) === types",
                                arg=json.dumps(expected, separators=(",", ":")), timeout=30_000)
    except Exception:
        opened = page_.evaluate("() => app.graph.nodes.map(n => n.type).sort()")
        raise AssertionError(f"picking {pick!r} opened {opened}, not workflows/{openable[1]}.json's {expected}")
    assert log.problems() == []


def test_template_browser_lists_each_ui_workflow_once_with_a_thumbnail(comfy):
    import urllib.request

    status, listing = comfy.request("GET", "/workflow_templates")
    assert status == 200
    names = listing.get(PACK_LINK_NAME, [])
    shipped = sorted(p.stem for p in TEMPLATE_DIR.glob("*.json"))
    assert sorted(names) == shipped, f"the template browser lists {sorted(names)}, the pack ships {shipped}"
    for name in names:
        url = f"{comfy.url}/api/workflow_templates/{PACK_LINK_NAME}/{urllib.request.quote(name)}.jpg"
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"] == "image/jpeg", url
