"""Static checks of every shipped workflow file (no server): twins, formats, no machine paths.

Each workflow ships as `workflows/<stem>.json` (UI format, for the editor) and `workflows/<stem>.api.json` (its API
twin, for headless queueing); both name the same node types. Models and media are referenced by their names inside
ComfyUI's folders, never by absolute paths, so a shared file works on someone else's machine.
"""
from __future__ import annotations

import json
import re

import pytest

from scripts.workflow_api import FRONTEND_ONLY, workflow_kind
from tests.workflow_cases import REPO_ROOT, stem_of

SHIPPED = sorted((REPO_ROOT / "workflows").glob("*.json"))
ABSOLUTE = re.compile(r"^(/|~/|[A-Za-z]:[\\/]|\\\\)|/(root|home|Users|work|tmp)/")


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _values(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    if path.name.endswith(".api.json"):
        return data, [node.get("inputs", {}) for node in data.values()]
    return data, [node.get("widgets_values") for node in data.get("nodes", [])]


def _types(data):
    if workflow_kind(data) == "api":
        return {node["class_type"] for node in data.values()}
    return {node["type"] for node in data["nodes"] if node["type"] not in FRONTEND_ONLY and node.get("mode") != 2}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_format_matches_name_and_no_machine_paths(path):
    data, values = _values(path)
    expected = "api" if path.name.endswith(".api.json") else "ui"
    assert workflow_kind(data, path.name) == expected, f"{path.name} is not in {expected.upper()} format"
    bad = [s for s in _strings(values) if ABSOLUTE.search(s)]
    assert bad == [], f"{path.name} names absolute paths (use names inside ComfyUI's folders): {bad}"


@pytest.mark.parametrize("stem", sorted({stem_of(p) for p in SHIPPED}))
def test_ui_and_api_twins_exist_and_agree(stem):
    ui, api = REPO_ROOT / "workflows" / f"{stem}.json", REPO_ROOT / "workflows" / f"{stem}.api.json"
    assert ui.exists(), f"workflows/{stem}.api.json has no UI-format twin workflows/{stem}.json"
    assert api.exists(), f"workflows/{stem}.json has no API-format twin workflows/{stem}.api.json"
    ui_types = _types(json.loads(ui.read_text(encoding="utf-8")))
    api_types = _types(json.loads(api.read_text(encoding="utf-8")))
    assert ui_types == api_types, f"{stem}: node types differ: only in UI {sorted(ui_types - api_types)}, " \
                                  f"only in API {sorted(api_types - ui_types)}"
