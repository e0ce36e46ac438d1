"""What a newcomer meets in the real editor (frontend 1.32.9 on ComfyUI 0.3.75, 1.49.6 on 0.33.0), checked in
headless Chromium: a broadcast queued without its models is refused once with every model and its download command.

Screenshots of what the user sees are kept as test artifacts in the test's tmp_path (pytest keeps the last runs)."""
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


@pytest.fixture(scope="module")
def browser(comfy):
    with frontend.chromium(comfy) as b:
        yield b


@pytest.fixture
def page(browser, comfy):
    context, page, log = frontend.open_page(browser, comfy.url)
    try:
        yield page
    finally:
        context.close()


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
