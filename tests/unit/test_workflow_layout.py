"""What a user sees when a shipped workflow opens (no server): a Note, stage groups, no overlapping nodes, a current
titled thumbnail for the template browser.

Node rectangles include the title bar LiteGraph draws above `pos`. That no widget is cut off needs the editor's own
size computation: tests/comfy/test_workflows_browser.py checks it after loading each file.
"""
from __future__ import annotations

import hashlib
import json

import pytest

from nodes.core_workflows import CORE_NODES_SINCE, missing_core_nodes
from scripts.workflow import layout as spec
from tests.workflow_cases import REPO_ROOT, TEMPLATE_DIR, shipped_api_twin

TITLE_H = 30
UI_FILES = sorted(TEMPLATE_DIR.glob("*.json"))
NOTE_TYPES = ("Note", "MarkdownNote")


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _rect(node):
    (x, y), (w, h) = node["pos"], node["size"]
    return x, y - TITLE_H, x + w, y + h


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize("path", UI_FILES, ids=[p.stem for p in UI_FILES])
def test_no_two_nodes_overlap(path):
    nodes = _load(path)["nodes"]
    clashes = [(a.get("title") or a["type"], b.get("title") or b["type"])
               for i, a in enumerate(nodes) for b in nodes[i + 1:] if _overlap(_rect(a), _rect(b))]
    assert clashes == [], f"{path.name}: overlapping nodes {clashes} (run scripts/workflow/editor.py layout)"


@pytest.mark.parametrize("path", UI_FILES, ids=[p.stem for p in UI_FILES])
def test_note_and_stage_groups(path):
    wf = _load(path)
    notes = [n for n in wf["nodes"] if n["type"] in NOTE_TYPES]
    assert len(notes) == 1, f"{path.name}: expected one Note saying what to provide, got {len(notes)}"
    text = notes[0]["widgets_values"][0]
    for word in ("Provide", "Expect", "Time"):
        assert word in text, f"{path.name}: the Note does not say '{word}'"
    # The Note's download commands come from the loaders' table (engines/common/model_downloads.py): a changed
    # command leaves every saved Note stale until the file is laid out again.
    for command in spec.model_commands(path.stem):
        assert command in text, f"{path.name}: the Note lacks {command!r} (run scripts/workflow/editor.py layout)"
    stages = spec.STAGES[path.stem]
    assert [g["title"] for g in wf["groups"]] == [title for title, _ in stages]
    for group, (title, ids) in zip(wf["groups"], stages):
        gx, gy, gw, gh = group["bounding"]
        for node in (n for n in wf["nodes"] if str(n["id"]) in ids):
            x0, y0, x1, y1 = _rect(node)
            assert gx <= x0 and gy < y0 and x1 <= gx + gw and y1 <= gy + gh, \
                f"{path.name}: node {node.get('title')} sticks out of its group {title!r}"


NEEDS_NEWER_CORE = missing_core_nodes(set())   # {stem: core node types only newer cores have}


@pytest.mark.parametrize("stem", sorted(NEEDS_NEWER_CORE))
def test_workflows_for_a_newer_core_say_so(stem):
    note = next(n for n in _load(TEMPLATE_DIR / f"{stem}.json")["nodes"] if n["type"] in NOTE_TYPES)
    types = NEEDS_NEWER_CORE[stem]
    version = max(CORE_NODES_SINCE[t] for t in types)
    assert f"NEEDS A NEWER COMFYUI ({version} or newer)" in note["widgets_values"][0]
    for node_type in types:
        assert node_type in note["widgets_values"][0]


def test_every_template_is_in_the_order_and_has_a_stage_plan():
    stems = sorted(p.stem for p in UI_FILES)
    assert sorted(spec.ORDER) == stems, "scripts/workflow/layout.py ORDER must list every UI workflow once"
    assert sorted(spec.STAGES) == stems and sorted(spec.NOTES) == stems
    assert spec.ORDER[0] == "demo_export", "the first template needs no models"
    for stem in stems:
        assert shipped_api_twin(stem).exists()


@pytest.mark.parametrize("path", UI_FILES, ids=[p.stem for p in UI_FILES])
def test_thumbnail_is_a_titled_picture_of_the_current_graph(path):
    """The JPEG's comment (scripts/workflow/thumbnails.py) records what it was made from: the API twin's hash (the
    graph that ran) and the title drawn on it; both must be the current ones. Sized for the ~270 px card."""
    from PIL import Image

    thumb = path.with_suffix(".jpg")
    assert thumb.exists(), f"no thumbnail {thumb.relative_to(REPO_ROOT)}: run scripts/workflow/editor.py thumbnails"
    with Image.open(thumb) as img:
        assert img.format == "JPEG" and 320 <= img.width <= 640 and img.height >= 200
        made_from = json.loads(img.info.get("comment", b"{}").decode() or "{}")
    assert thumb.stat().st_size <= 60 * 1024, f"{thumb.name}: {thumb.stat().st_size // 1024} KB"
    run = f"run BA_CORE=0.33.0 scripts/workflow/editor.py thumbnails {path.stem}"
    assert made_from.get("api") == hashlib.sha256(shipped_api_twin(path.stem).read_bytes()).hexdigest()[:16], (
        f"{thumb.name} shows a result of an older workflows/api/{path.stem}.api.json: {run}")
    assert made_from.get("title") == spec.TITLES[path.stem], f"{thumb.name} is titled {made_from.get('title')!r}: {run}"
    assert made_from.get("source"), f"{thumb.name} does not say what it was made from: {run}"


def test_every_template_has_a_readable_title_the_editor_can_name_a_file_after():
    """The editor opens a template under the title it lists it with, and saves it as `<title>.json`."""
    titles = [spec.TITLES[stem] for stem in spec.ORDER]
    assert len(set(titles)) == len(titles), f"two templates share a title: {titles}"
    for stem, title in spec.TITLES.items():
        assert title.strip() == title and 8 <= len(title) <= 60, f"{stem}: title {title!r}"
        assert title != stem and not set(title) & set('<>:"/\\|?*%'), (
            f"{stem}: title {title!r} (a file name on every system, no URL escapes)")
    assert spec.TITLES[spec.ORDER[0]].startswith("Start here")


def test_each_template_card_says_what_its_graph_makes_in_one_sentence():
    """A description per template, not its title again, one sentence short enough for the card's two lines (about
    38 characters each on a 270 px card of a 1280 px wide editor, both frontends; the browser test checks that
    none is cut off)."""
    assert set(spec.DESCRIPTIONS) == set(spec.ORDER)
    for stem, text in spec.DESCRIPTIONS.items():
        assert 30 <= len(text) <= 72, f"{stem}: description of {len(text)} characters: {text!r}"
        assert text.lower() != spec.TITLES[stem].lower() and spec.TITLES[stem] not in text, f"{stem}: {text!r}"
        assert "." not in text.rstrip(".").replace("2.1", ""), f"{stem}: more than one sentence: {text!r}"


def test_the_editor_extension_reads_order_and_titles_from_the_one_list():
    """web/js/templates.js fetches web/templates.json (the file workflow/layout.py reads), never a copy."""
    import re

    js = (REPO_ROOT / "web" / "js" / "templates.js").read_text(encoding="utf-8")
    assert 'new URL("../templates.json", import.meta.url)' in js
    assert spec.TEMPLATES_JSON == REPO_ROOT / "web" / "templates.json"
    assert not [stem for stem in spec.ORDER if re.search(rf'"{stem}"', js)], \
        "the extension names templates itself: order and titles belong in web/templates.json"
