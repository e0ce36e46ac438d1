"""Static checks of every shipped workflow file (no server): twins, formats, no machine paths.

Each workflow ships as `workflows/<stem>.json` (UI format, for the editor's template browser) and
`workflows/api/<stem>.api.json` (its API twin, for headless queueing); both name the same node types. The template
folder holds only UI-format files: ComfyUI lists every `*.json` in it as a template, and an API-format file opens as an
empty canvas with a validation error. Models and media are referenced by their names inside
ComfyUI's folders, never by absolute paths, so a shared file works on someone else's machine.
"""
from __future__ import annotations

import json
import re

import pytest

from scripts.workflow.api import FRONTEND_ONLY, json_strings, workflow_kind
from tests.workflow_cases import API_DIR, REPO_ROOT, TEMPLATE_DIR, shipped_api_twin, stem_of

TEMPLATES = sorted(TEMPLATE_DIR.glob("*.json"))
TWINS = sorted(API_DIR.glob("*.json"))
SHIPPED = TEMPLATES + TWINS
ABSOLUTE = re.compile(r"^(/|~/|[A-Za-z]:[\\/]|\\\\)|/(root|home|Users|work|tmp)/")


def _values(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    if path.name.endswith(".api.json"):
        return data, [node.get("inputs", {}) for node in data.values()]
    return data, [node.get("widgets_values") for node in data.get("nodes", [])]


def _types(data):
    if workflow_kind(data) == "api":
        return {node["class_type"] for node in data.values()}
    return {node["type"] for node in data["nodes"] if node["type"] not in FRONTEND_ONLY and node.get("mode") != 2}


def test_template_folder_holds_only_ui_workflows():
    api_named = [p.name for p in TEMPLATES if p.name.endswith(".api.json")]
    assert api_named == [], f"API twins belong in workflows/api/, not the template folder: {api_named}"
    assert TEMPLATES, "no UI workflows in workflows/"
    not_twins = [p.name for p in TWINS if not p.name.endswith(".api.json")]
    assert not_twins == [], f"workflows/api/ holds only <stem>.api.json twins: {not_twins}"


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO_ROOT)) for p in SHIPPED])
def test_format_matches_name_and_no_machine_paths(path):
    data, values = _values(path)
    expected = "api" if path.name.endswith(".api.json") else "ui"
    assert workflow_kind(data, path.name) == expected, f"{path.name} is not in {expected.upper()} format"
    bad = [s for s in json_strings(values) if ABSOLUTE.search(s)]
    assert bad == [], f"{path.name} names absolute paths (use names inside ComfyUI's folders): {bad}"


@pytest.mark.parametrize("stem", sorted({stem_of(p) for p in SHIPPED}))
def test_ui_and_api_twins_exist_and_agree(stem):
    ui, api = TEMPLATE_DIR / f"{stem}.json", shipped_api_twin(stem)
    assert ui.exists(), f"workflows/api/{stem}.api.json has no UI-format twin workflows/{stem}.json"
    assert api.exists(), f"workflows/{stem}.json has no API-format twin workflows/api/{stem}.api.json"
    ui_types = _types(json.loads(ui.read_text(encoding="utf-8")))
    api_types = _types(json.loads(api.read_text(encoding="utf-8")))
    assert ui_types == api_types, f"{stem}: node types differ: only in UI {sorted(ui_types - api_types)}, " \
                                  f"only in API {sorted(api_types - ui_types)}"
