"""The pack's templates in the real template browser (frontend 1.32.9 on ComfyUI 0.3.75, 1.49.6 on 0.33.0), checked in
headless Chromium: each card says what its graph makes (web/templates.json's description, not the title again).

Screenshots of what the user sees are kept as test artifacts in the test's tmp_path (pytest keeps the last runs)."""
from __future__ import annotations

import json

import pytest

from scripts.comfyui.server import PACK_LINK_NAME
from tests.comfy import frontend
from tests.workflow_cases import TEMPLATE_DIR


@pytest.fixture(scope="module")
def browser(comfy):
    with frontend.chromium(comfy) as b:
        yield b


@pytest.fixture
def page(browser, comfy):
    context, page, log = frontend.open_page(browser, comfy.url)
    try:
        yield page, log
    finally:
        context.close()


# Each card of the template browser as the user reads it: its data-testid (the name it was listed under) and text.
CARDS_JS = """() => Object.fromEntries([...document.querySelectorAll('[data-testid^="template-workflow-"]')]
    .map(c => [c.getAttribute('data-testid').slice('template-workflow-'.length), c.innerText]))"""


def _openable_stems(page) -> list[str]:
    """The templates this core can open (the others are not offered): every node type of its API twin registered."""
    from scripts.workflow.layout import ORDER

    registered = set(page.evaluate("() => Object.keys(LiteGraph.registered_node_types)"))
    return [stem for stem in ORDER if {n["class_type"] for n in json.loads(
        (TEMPLATE_DIR / "api" / f"{stem}.api.json").read_text(encoding="utf-8")).values()} <= registered]


def test_each_template_card_shows_what_its_graph_makes(page, tmp_path):
    from scripts.workflow.layout import DESCRIPTIONS, TITLES

    page, log = page
    stems = _openable_stems(page)
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
    status, _ = bare.request("POST", "/settings", {**frontend.SETTINGS, "Comfy.Workflow.ShowMissingModelsWarning": True})
    assert status == 200
    return browser


PINIA = "document.querySelector('#vue-app').__vue_app__.config.globalProperties.$pinia"

# Load as a user opening the file does (dialogs on), then read what the frontend found missing: 1.49's missing-model
# store (the Errors panel's list) where this frontend has one, else the labels of 1.32's "Missing models" dialog.
LOAD_AND_READ_JS = f"""async ([wf, name]) => {{
    await app.loadGraphData(wf, true, true, name);
    const pinia = {PINIA};
    if (pinia._s.has('missingModel')) {{
        // 1.49 surfaces its list after fetching the folder paths: wait for the store to settle.
        const store = pinia._s.get('missingModel');
        for (let i = 0; i < 50 && store.missingModelCandidates === null; i++) await new Promise(r => setTimeout(r, 100));
        return {{kind: 'store', missing: (store.missingModelCandidates || [])
            .map(c => ({{name: c.name, directory: c.directory, url: c.url}}))}};
    }}
    return {{kind: 'dialog', missing: null}};
}}"""

DIALOG_LABELS_JS = """() => [...document.querySelectorAll('.comfy-missing-models li')].map(li => li.innerText.trim())"""


def _entries(wf) -> list[dict]:
    return wf.get("models", []) + [m for n in wf["nodes"] for m in n.get("properties", {}).get("models", [])]


def _what_the_editor_finds_missing(browser, server, wf, shot):
    context, page, log = frontend.open_page(browser, server.url)
    try:
        log.benign_404 = "/api/view?"  # the workflow names media this server does not have
        got = page.evaluate(LOAD_AND_READ_JS, [wf, "broadcast_wardrobe"])
        if got["kind"] == "dialog":
            # 1.32 opens its dialog after the graph is configured, only when something is missing: wait for the load
            # to end (the afterConfigureGraph hook), then for the dialog where one is due.
            page.wait_for_function("() => window.__ba.missing !== null", polling=100, timeout=30_000)
            page.wait_for_function("""() => document.querySelector('.comfy-missing-models')
                || !document.querySelector('.p-dialog-mask')""", polling=100, timeout=30_000)
            got["missing"] = page.evaluate(DIALOG_LABELS_JS)
        page.screenshot(path=str(shot))
        # Offline, the dialog's size look-ups of the listed URLs (at huggingface.co) fail: expected here.
        assert [p for p in log.problems() if "huggingface.co" not in p and "fetching file size" not in p] == []
        return got
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

    got = _what_the_editor_finds_missing(bare_browser, bare, wf, tmp_path / "models_absent.png")
    if got["kind"] == "dialog":
        # Each label is "<directory> / <name>", followed by the frontend's own note where it will not download.
        assert sorted(label.split("\n")[0] for label in got["missing"]) == sorted(
            f"{m['directory']} / {m['name']}" for m in entries), got
    else:
        assert sorted(got["missing"], key=lambda m: m["name"]) == sorted(core, key=lambda m: m["name"]), got

    made = []
    try:
        for m in entries:
            path = bare.models_dir / m["directory"] / m["name"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"\0" * 8)   # listed by name: the frontend never reads it
            made.append(path)
        got = _what_the_editor_finds_missing(bare_browser, bare, wf, tmp_path / "models_present.png")
        assert got["missing"] == [], got
    finally:
        for path in made:
            path.unlink()
