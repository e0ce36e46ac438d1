"""The pack's templates in the real template browser (frontend 1.32.9 on ComfyUI 0.3.75, 1.49.6 on 0.33.0), checked in
headless Chromium: each card says what its graph makes (web/templates.json's description, not the title again); the
workflows' `models` metadata makes the editor's own missing-model support list what is absent, and nothing once it is
there; every offered workflow opens with its first stage readable.

Screenshots of what the user sees are kept as test artifacts in the test's tmp_path (pytest keeps the last runs)."""
from __future__ import annotations

import json

import pytest

from scripts.comfyui.server import PACK_LINK_NAME
from tests.comfy import frontend
from tests.workflow_cases import TEMPLATE_DIR


# Each card of the template browser as the user reads it: its data-testid (the name it was listed under) and text.
CARDS_JS = """() => Object.fromEntries([...document.querySelectorAll('[data-testid^="template-workflow-"]')]
    .map(c => [c.getAttribute('data-testid').slice('template-workflow-'.length), c.innerText]))"""


def test_each_template_card_shows_what_its_graph_makes(editor, tmp_path):
    from scripts.workflow.layout import DESCRIPTIONS, TITLES

    page, log, _ = editor
    stems = frontend.openable_stems(page)
    page.evaluate("() => app.extensionManager.command.execute('Comfy.BrowseTemplates')")
    page.get_by_text(PACK_LINK_NAME, exact=True).first.click()
    wanted = {TITLES[s]: DESCRIPTIONS[s] for s in stems}
    try:
        page.wait_for_function("""(wanted) => {
            const cards = [...document.querySelectorAll('[data-testid^="template-workflow-"]')];
            return Object.entries(wanted).every(([title, text]) => cards.some(c =>
                c.getAttribute('data-testid') === 'template-workflow-' + title && c.innerText.includes(text)));
        }""", arg=wanted, polling=100, timeout=60_000)
    finally:
        page.screenshot(path=str(tmp_path / "template_cards.png"))
    cards = page.evaluate(CARDS_JS)
    for stem in stems:
        shown = cards[TITLES[stem]]
        # The title once (the heading), the description once, and the listed name no more as a second line.
        assert shown.count(TITLES[stem]) == 1 and shown.count(DESCRIPTIONS[stem]) == 1, f"{stem}'s card: {shown!r}"
    # Each description is read in full: it has a size and the card's two-line clamp cuts nothing off (a clamped
    # paragraph scrolls: its scrollHeight exceeds its clientHeight).
    shown = page.evaluate("""() => [...document.querySelectorAll('p.broadcast-template-description')]
        .map(p => ({text: p.textContent, width: p.clientWidth, height: p.clientHeight, full: p.scrollHeight}))""")
    assert sorted(p["text"] for p in shown) == sorted(wanted.values())
    cut = [p for p in shown if not (p["width"] > 50 and 12 <= p["height"] and p["full"] <= p["height"] + 1)]
    assert cut == [], f"descriptions not shown in full: {cut}"
    assert log.problems() == []


# --- The editor's own missing-model support, from the workflows' `models` metadata --------------------------------

@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """A server of this module's own, whose models folder holds only what a test puts there."""
    from scripts.comfyui.server import ComfyServer

    server = ComfyServer(tmp_path_factory.mktemp("bare"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bare_browser(browser, bare):
    """The module's Chromium (one Playwright per process), on `bare` with the harness's settings but 1.32's
    "Missing models" dialog on, as a user has it."""
    settings = {**frontend.SETTINGS, "Comfy.Workflow.ShowMissingModelsWarning": True}
    status, _ = bare.request("POST", "/settings", settings)
    assert status == 200
    return browser


PINIA = "document.querySelector('#vue-app').__vue_app__.config.globalProperties.$pinia"

# Load as a user opening the file does (dialogs on); say which kind of missing-model support this frontend has:
# 1.49's missing-model store (the Errors panel's list), or 1.32's "Missing models" dialog.
LOAD_JS = f"""async ([wf, name]) => {{
    await app.loadGraphData(wf, true, true, name);
    return {PINIA}._s.has('missingModel') ? 'store' : 'dialog';
}}"""
STORE_JS = f"""() => ({PINIA}._s.get('missingModel').missingModelCandidates || [])
    .map(c => ({{name: c.name, directory: c.directory, url: c.url}}))"""
STORE_FILLED_JS = f"() => {PINIA}._s.get('missingModel').missingModelCandidates !== null"
# What 1.49's scan decides a combo by (missingModelScan.ts: missing = the value is not among the combo's options), for
# each node that carries `models` metadata.
OFFERED_JS = """() => app.graph.nodes.filter(n => n.properties?.models?.length).flatMap(n => n.widgets
    .filter(w => n.properties.models.some(m => m.name === w.value))
    .map(w => [w.value, (w.options?.values || []).includes(w.value)]))"""

DIALOG_LABELS_JS = """() => [...document.querySelectorAll('.comfy-missing-models li')].map(li => li.innerText.trim())"""


def _entries(wf) -> list[dict]:
    return wf.get("models", []) + [m for n in wf["nodes"] for m in n.get("properties", {}).get("models", [])]


def _what_the_editor_finds_missing(browser, server, wf, shot, absent: bool):
    """(kind, what this frontend lists as missing) after opening `wf` on `server`; `absent`: whether the files are."""
    context, page, log = frontend.open_page(browser, server.url)
    try:
        log.benign_404 = "/api/view?"  # the workflow names media this server does not have
        kind = page.evaluate(LOAD_JS, [wf, "broadcast_wardrobe"])
        if kind == "dialog":
            # 1.32 puts its dialog on the dialog stack inside loadGraphData (awaited), only when something is missing;
            # Vue draws it on a later tick: wait for its rows where it is due.
            due = page.evaluate(f"() => {PINIA}._s.get('dialog').dialogStack"
                                ".some(d => d.key === 'global-missing-models-warning')")
            if due:
                page.wait_for_selector(".comfy-missing-models li", timeout=30_000)
            missing = page.evaluate(DIALOG_LABELS_JS) if due else []
        elif absent:
            # 1.49 fills its store once it has the folder paths (after the load): wait for that.
            page.wait_for_function(STORE_FILLED_JS, polling=100, timeout=30_000)
            missing = page.evaluate(STORE_JS)
        else:
            # Nothing to wait for when nothing is missing: the scan's own criterion, each chosen file offered by its
            # combo, and the store still empty after a folder-paths round trip (the pipeline fills it after one).
            offered = page.evaluate(OFFERED_JS)
            assert offered and all(ok for _, ok in offered), f"combos not offering their files: {offered}"
            page.evaluate("async () => { await app.api.getFolderPaths(); }")
            missing = page.evaluate(STORE_JS)
        page.screenshot(path=str(shot))
        # Offline, the dialog's size look-ups of the listed URLs (at huggingface.co) fail: expected here.
        assert [p for p in log.problems() if "huggingface.co" not in p and "fetching file size" not in p] == []
        return kind, missing
    finally:
        context.close()


def test_the_editor_offers_the_graphs_models_until_they_are_there(bare, bare_browser, tmp_path):
    """broadcast_wardrobe (pack models and core's Wan files) opened without its models: frontend 1.32 lists every
    entry in its "Missing models" dialog as `<folder> / <file>`; 1.49 lists core's two files with their download
    URL and nothing for the pack's loaders (a folder name is no model file name to its scan). With the files in
    place, neither lists anything."""
    wf = json.loads((TEMPLATE_DIR / "broadcast_wardrobe.json").read_text(encoding="utf-8"))
    entries = _entries(wf)
    core = [m for n in wf["nodes"] for m in n.get("properties", {}).get("models", [])]
    assert len(wf.get("models", [])) == 4 and len(core) == 2, entries

    kind, missing = _what_the_editor_finds_missing(bare_browser, bare, wf, tmp_path / "models_absent.png", True)
    if kind == "dialog":
        # Each label is "<directory> / <name>", followed by the frontend's own note where it will not download.
        assert sorted(label.split("\n")[0] for label in missing) == sorted(
            f"{m['directory']} / {m['name']}" for m in entries), missing
    else:
        assert sorted(missing, key=lambda m: m["name"]) == sorted(core, key=lambda m: m["name"]), missing

    made = []
    try:
        for m in entries:
            path = bare.models_dir / m["directory"] / m["name"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"\0" * 8)   # listed by name: the frontend never reads it
            made.append(path)
        kind, missing = _what_the_editor_finds_missing(bare_browser, bare, wf, tmp_path / "models_present.png",
                                                       False)
        assert missing == [], (kind, missing)
    finally:
        for path in made:
            path.unlink()


# --- The opening view: the first stage readable without zooming ------------------------------------------------------

# Where the opened graph's groups and node titles land on screen, at the zoom the file opens with, and what the user
# sees at the first group's title (the canvas, or something drawn over it).
OPENING_JS = """() => {
    const ds = app.canvas.ds, canvas = app.canvas.canvas.getBoundingClientRect();
    const toScreen = ([x, y]) => [canvas.left + (x + ds.offset[0]) * ds.scale,
                                  canvas.top + (y + ds.offset[1]) * ds.scale];
    const groups = app.graph._groups.map(g => {
        const [x, y] = toScreen([g.pos[0], g.pos[1]]);
        return {title: g.title, x, y, w: g.size[0] * ds.scale, font_px: (g.font_size || 24) * ds.scale};
    }).sort((a, b) => a.y - b.y || a.x - b.x);
    const first = groups[0];
    const probe = first && document.elementFromPoint(Math.max(first.x, canvas.left) + 12, first.y + first.font_px / 2);
    return {scale: ds.scale, view: [canvas.left, canvas.top, canvas.right, canvas.bottom], groups,
            node_title_px: LiteGraph.NODE_TEXT_SIZE * ds.scale,
            first_seen: probe ? (probe.id || `${probe.tagName}.${String(probe.className).slice(0, 60)}`) : null};
}"""


@pytest.mark.parametrize("stem", [p.stem for p in sorted(TEMPLATE_DIR.glob("*.json"))])
def test_the_opening_view_shows_the_first_stage_readably(editor, stem, tmp_path):
    """Each shipped workflow opens (its saved view) with group titles drawn at 14 px or more and node titles at 10 px or
    more, and the first stage's group title on screen, uncovered (the canvas is what is under it)."""
    page, log, _ = editor
    if stem not in frontend.openable_stems(page):
        pytest.skip(f"{stem} needs core nodes this core lacks: the template browser does not offer it here")
    wf = json.loads((TEMPLATE_DIR / f"{stem}.json").read_text(encoding="utf-8"))
    log.benign_404 = "/api/view?"  # the workflow names media this server does not have
    frontend.open_at_saved_view(page, wf, stem)
    seen = page.evaluate(OPENING_JS)
    page.screenshot(path=str(tmp_path / f"{stem}_opening.png"))
    first = seen["groups"][0]
    left, top, right, bottom = seen["view"]
    assert all(g["font_px"] >= 14 for g in seen["groups"]), seen
    assert seen["node_title_px"] >= 10, seen
    assert left <= first["x"] + 12 < right and top <= first["y"] < bottom - first["font_px"], \
        f"the first stage's title is off screen on opening: {first} in {seen['view']}"
    assert seen["first_seen"] == "graph-canvas", f"{first['title']!r} is covered on opening by {seen['first_seen']}"
