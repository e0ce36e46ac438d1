"""The `models` metadata of the shipped UI workflows (scripts/workflow/model_links.py), against what it must say:
the pack's entries against engines/common/model_downloads.py's commands and the file types core lists in a model
folder, core's entries against core's own workflow templates (the installed comfyui_workflow_templates* packages).
"""
from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import sys
from pathlib import Path

import pytest

from engines.common.model_downloads import FAMILIES, LOADERS, NONE_CHOICES
from scripts.workflow.model_links import CORE_FILES
from tests.workflow_cases import TEMPLATE_DIR, shipped_api_twin

UI_FILES = sorted(TEMPLATE_DIR.glob("*.json"))
HF = re.compile(r"^https://huggingface\.co/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _core_listed_extensions() -> set[str]:
    """core's folder_paths.supported_pt_extensions (what /experiment/models/<folder> lists), read from its source."""
    root = os.environ.get("COMFYUI_PATH")
    if not root:
        pytest.skip("COMFYUI_PATH is not set (source scripts/env.sh)")
    tree = ast.parse(Path(root, "folder_paths.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if getattr(target, "id", None) == "supported_pt_extensions":
            return set(ast.literal_eval(node.value))
    raise AssertionError("no supported_pt_extensions in core's folder_paths.py")


def _pack_folders(stem: str) -> dict[str, str]:
    """Model folder name -> family, for each pack loader of the graph (the input its loader names, in the API twin,
    whose values the UI file's widgets hold: tests/unit/test_workflow_layout.py)."""
    out = {}
    for node in _load(shipped_api_twin(stem)).values():
        spec = LOADERS.get(node["class_type"])
        value = (node.get("inputs") or {}).get(spec[0]) if spec else None
        if isinstance(value, str) and value not in NONE_CHOICES:
            out[value] = spec[1]
    return out


def _fetched_by(download, path: str) -> bool:
    """Whether `download`'s `hf download` brings `path` (repository-relative): a named file, an --include pattern,
    or the whole repository."""
    if download.fetch:
        return path in download.fetch
    if download.include:
        return any(fnmatch.fnmatch(path, p) for p in download.include)
    return True


@pytest.mark.parametrize("path", UI_FILES, ids=lambda p: p.stem)
def test_pack_models_are_the_download_tables_key_files(path):
    """Every top-level entry is a file one of that graph's `hf download` commands fetches into the folder its loader
    names, at the URL of that repository's file, under the registered folder, of a type core lists there; and every
    model folder of the graph (SAM3's aside: checked for the folder only) has one entry per download."""
    wf = _load(path)
    folders = _pack_folders(path.stem)
    extensions = _core_listed_extensions()
    listed = wf.get("models", [])
    covered = set()
    for entry in listed:
        assert set(entry) == {"name", "url", "directory"}, entry
        folder, _, rel = entry["name"].partition("/")
        assert folder in folders, f"{path.stem}: {entry['name']} names no loader's folder ({sorted(folders)})"
        fam = FAMILIES[folders[folder]]
        assert entry["directory"] == fam.folder and not fam.folder_only, entry
        assert Path(rel).suffix in extensions, f"{entry['name']}: core does not list {Path(rel).suffix} files"
        url = HF.match(entry["url"])
        assert url, entry["url"]
        local = lambda d: f"{d.into}/{url['path']}" if d.into else url["path"]  # noqa: E731 (where it lands)
        matching = [d for d in fam.downloads_for(folder) if d.repo == url["repo"]
                    and url["rev"] == (d.revision or "main") and local(d) == rel and _fetched_by(d, url["path"])]
        assert matching, f"{path.stem}: {entry} is no file a download of {fam.folder} fetches"
        # The loader checks that file (one of the entries, or of an entry's alternatives, its download provides).
        d = matching[0]
        checked = {o for e in d.provides for o in ((e,) if isinstance(e, str) else e)}
        assert url["path"] in checked, f"{entry}: the loader checks {sorted(checked)}"
        covered.add((folder, matching[0].repo, matching[0].into))
    expected = {(folder, d.repo, d.into) for folder, family in folders.items() if not FAMILIES[family].folder_only
                for d in FAMILIES[family].downloads_for(folder)}
    assert covered == expected, f"{path.stem}: entries for {sorted(covered)}, downloads {sorted(expected)}"
    assert len(listed) == len(expected)


def _core_template_entries() -> dict[str, set[tuple[str, str]]]:
    """Every model entry (name -> {(directory, URL without ?query)}) of core's installed workflow templates."""
    found: dict[str, set] = {}
    roots = [Path(p) for p in sys.path if p and Path(p).is_dir()]
    files = {f for r in roots for f in r.glob("comfyui_workflow_templates*/templates/*.json")}

    def walk(o):
        if isinstance(o, dict):
            if {"name", "url", "directory"} <= set(o) and isinstance(o["name"], str):
                found.setdefault(o["name"], set()).add((o["directory"], str(o["url"]).split("?")[0]))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for f in files:
        if any(name in f.read_text(encoding="utf-8", errors="replace") for name in CORE_FILES):
            walk(json.loads(f.read_text(encoding="utf-8")))
    return found


@pytest.fixture(scope="module")
def core_templates():
    found = _core_template_entries()
    if not found:
        pytest.skip("no comfyui_workflow_templates package on this Python (core's requirements install it)")
    return found


@pytest.mark.parametrize("name", sorted(CORE_FILES))
def test_core_files_are_listed_as_cores_own_templates_list_them(name, core_templates):
    if name not in core_templates:
        pytest.skip(f"{name} is in no workflow template of this core's packages (checked on the other core)")
    directory, url = CORE_FILES[name]
    assert (directory, url) in core_templates[name], f"core's templates list {name} as {core_templates[name]}"


@pytest.mark.parametrize("path", UI_FILES, ids=lambda p: p.stem)
def test_each_core_loader_carries_its_chosen_files_metadata(path):
    """A core node choosing a file of CORE_FILES carries exactly that entry in its properties (where both frontends
    read it: entries whose name is one of the node's widget values); no other node carries any."""
    for node in _load(path)["nodes"]:
        values = [v for v in (node.get("widgets_values") or []) if isinstance(v, str)]
        chosen = [v for v in values if v in CORE_FILES] if not node["type"].startswith("Broadcast") else []
        expected = [{"name": v, "url": CORE_FILES[v][1], "directory": CORE_FILES[v][0]} for v in chosen]
        assert node.get("properties", {}).get("models", []) == expected, f"{path.stem} node {node['id']}"
