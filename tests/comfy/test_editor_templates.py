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
