"""What a newcomer meets in the real editor (frontend 1.32.9 on ComfyUI 0.3.75, 1.49.6 on 0.33.0), checked in
headless Chromium: a broadcast queued without its models is refused once with every model and its download command.

Screenshots of what the user sees are kept as test artifacts in the test's tmp_path (pytest keeps the last runs), with
the page as each test left it (`page_at_end.png`, tests/comfy/conftest.py)."""
from __future__ import annotations

import json

import pytest

from tests.comfy import frontend
from tests.workflow_cases import TEMPLATE_DIR

# Run as the Run button does (app.queuePrompt shows the frontend's own refusal), with the two model combos set to
# folders this server lacks.
QUEUE_LIKE_RUN_JS = """async (absent) => {
    for (const [title, value] of Object.entries(absent)) {
        const node = app.graph.nodes.find(n => n.title === title);
        node.widgets.find(w => w.name === "model_name").value = value;
    }
    await app.queuePrompt(0, 1);
}"""
ABSENT = {"OmniVoice Loader": "absent-omnivoice", "Ditto Loader": "absent-ditto"}


def _refusal_as_shown(page) -> str:
    """The refusal's text where this frontend shows it: 1.32 opens a dialog with every node's error; 1.49 shows a
    toast whose "View details" opens the Errors panel, each error's text in the tooltip of its (i) button."""
    page.wait_for_function("""() => document.querySelector('.p-dialog')
        || [...document.querySelectorAll('button')].some(b => b.innerText.includes('View details'))""",
                           polling=100, timeout=60_000)
    dialogs = page.evaluate("() => [...document.querySelectorAll('.p-dialog')].map(d => d.innerText)")
    if dialogs:
        return "\n".join(dialogs)
    page.get_by_text("View details").click()
    row = page.get_by_text("OmniVoice Loader - model_name")
    row.wait_for(timeout=30_000)
    row.locator("xpath=..").locator("button").first.hover()
    page.wait_for_function("() => document.body.innerText.includes('models are missing')", polling=100,
                           timeout=30_000)
    return page.evaluate("() => document.body.innerText")


def test_a_broadcast_without_models_is_refused_once_with_every_download_command(page, comfy, tmp_path):
    wf = json.loads((TEMPLATE_DIR / "broadcast_ditto.json").read_text(encoding="utf-8"))
    page.evaluate(frontend.LOAD_JS, [wf, "broadcast_ditto"])
    history = comfy.get("/history")
    page.evaluate(QUEUE_LIKE_RUN_JS, ABSENT)
    shown = _refusal_as_shown(page)
    page.screenshot(path=str(tmp_path / "missing_models_refusal.png"))
    assert comfy.get("/history").keys() == history.keys(), "something ran"
    assert "2 models are missing" in shown, shown
    assert "OmniVoice Loader needs" in shown and "Ditto Loader needs" in shown, shown
    # Once: each command appears a single time in everything the editor shows.
    flat = " ".join(shown.split())   # the tooltip wraps long lines
    assert flat.count("hf download k2-fsa/OmniVoice") == 1, shown
    assert flat.count("hf download digital-avatar/ditto-talkinghead") == 1, shown
    assert f"--local-dir {comfy.models_dir / 'omnivoice' / 'absent-omnivoice'}" in flat
    for noise in ("Traceback", "ModelFilesMissing", "InputError", "engines."):
        assert noise not in shown, shown


# What users type -> a node it must find (its display name, as the search list shows it). Oracle: the editor's own
# search box, typed into as a user does.
SEARCHES = {"text to speech": "Broadcast OmniVoice Speak", "TTS": "Broadcast OmniVoice Speak",
            "voice clone": "Broadcast Voice Prompt", "lip sync": "Broadcast MuseTalk Lip Sync",
            "talking head": "Broadcast Ditto Render", "avatar": "Broadcast MuseTalk Avatar",
            "wardrobe": "Broadcast Mask Shield", "outfit": "Broadcast Sam3 Video Mask",
            "mask": "Broadcast Sam3 Video Mask", "inpaint": "Broadcast Latent Inpaint Mask",
            "loudness": "Broadcast Audio Master", "mastering": "Broadcast Audio Master", "QC": "Broadcast QC",
            "export": "Broadcast Export Video", "NVENC": "Broadcast Export Video"}
SEARCH_INPUT = "input[placeholder^='Search Nodes'], input[placeholder^='Add a node']"   # 1.32, 1.49
FOUND_JS = """([sel, q, w]) => document.querySelector(sel)?.value === q
    && [...document.querySelectorAll('[role=option]')].some(e => e.innerText.split('\\n')[0].trim() === w)"""
RESULTS_JS = """() => [...document.querySelectorAll('[role=option]')].map(e => e.innerText.split('\\n')[0].trim())"""


def test_search_finds_the_pack_by_what_users_type_and_titles_stay_clean(page, comfy, tmp_path):
    info = comfy.object_info()
    names = {spec["display_name"] for node_id, spec in info.items() if node_id.startswith("Broadcast")}
    assert not [n for n in names if "(" in n], f"keywords in titles: {sorted(n for n in names if '(' in n)}"
    box = page.locator(SEARCH_INPUT).filter(visible=True).first
    # The node search box, as a double click on the canvas opens it (the editor's own command; both frontends).
    page.evaluate("() => app.extensionManager.command.execute('Workspace.SearchBox.Toggle')")
    box.wait_for(timeout=30_000)
    missed = {}
    for query, wanted in SEARCHES.items():
        box.fill("")
        box.press_sequentially(query)   # key by key, as typed (1.49 searches on input events, not on a fill)
        try:
            page.wait_for_function(FOUND_JS, arg=[SEARCH_INPUT, query, wanted], polling=100, timeout=10_000)
        except Exception:
            missed[query] = page.evaluate(RESULTS_JS)[:10]
    page.screenshot(path=str(tmp_path / "search_nvenc.png"))
    assert missed == {}, f"searches that did not find their node (first results shown): {missed}"


# Where the Note's title bar is on screen after the file opens (its saved view, extra.ds), and what the page shows
# there: the canvas, not the side bar or a menu drawn over it.
NOTE_ON_SCREEN_JS = """() => {
    const note = app.graph.nodes.find(n => n.type === "Note");
    const rect = app.canvas.canvas.getBoundingClientRect();
    const scale = app.canvas.ds.scale, [ox, oy] = app.canvas.ds.offset;
    const x = rect.left + (note.pos[0] + ox) * scale, y = rect.top + (note.pos[1] - 15 + oy) * scale;
    const w = note.size[0] * scale;
    const probe = (px) => document.elementFromPoint(px, y);
    const name = (e) => e && (e.id || `${e.tagName.toLowerCase()}.${String(e.className).slice(0, 60)}`);
    return {x, y, w, scale, hits: [probe(x + 4), probe(x + w / 2), probe(x + w - 4)].map(name)};
}"""


@pytest.mark.parametrize("stem", ["demo_export", "broadcast_musetalk", "broadcast_ditto", "tts_master"])
def test_the_opening_view_shows_the_note_at_a_readable_zoom(page, stem, tmp_path):
    wf = json.loads((TEMPLATE_DIR / f"{stem}.json").read_text(encoding="utf-8"))
    frontend.open_at_saved_view(page, wf, stem)  # mask gone before probing what covers the Note
    seen = page.evaluate(NOTE_ON_SCREEN_JS)
    page.screenshot(path=str(tmp_path / f"{stem}_opening.png"))
    assert seen["scale"] >= 0.75, seen
    assert seen["hits"] == ["graph-canvas"] * 3, f"the Note's title bar is covered on opening: {seen}"
