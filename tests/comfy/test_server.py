"""The real ComfyUI server loads the pack: no import failure, every node listed, typed and documented.

The expected nodes come from the source, not from the server: `__init__.py`'s FAMILIES names each nodes module, and
each module's `NODES = [...]` names its classes (the class name is the node id, by the pack's convention). Read with
`ast`, so this file needs no ComfyUI import of its own.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACK_MODULE = "custom_nodes.broadcast_avatar"
# Types of newer core ComfyUI that a family deliberately shares, so its nodes connect to core's nodes there
# (core's SAM3 nodes carry SAM3_TRACK_DATA). 0.3.75 does not have them yet.
NEWER_CORE_TYPES = {"SAM3_TRACK_DATA"}


def families() -> dict:
    tree = ast.parse((REPO_ROOT / "__init__.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FAMILIES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("__init__.py defines no FAMILIES")


def declared_nodes() -> dict[str, str]:
    """``{node id: family}`` from every family module's ``NODES`` list."""
    out = {}
    for family, (module, _requirements) in families().items():
        path = REPO_ROOT / "nodes" / f"{module}.py"
        assert path.is_file(), f"FAMILIES names nodes/{module}.py for {family!r}, which does not exist"
        tree = ast.parse(path.read_text())
        lists = [n.value for n in tree.body if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", None) == "NODES" for t in n.targets)]
        assert lists and isinstance(lists[-1], (ast.List, ast.Tuple)), f"nodes/{module}.py has no NODES = [...]"
        for element in lists[-1].elts:
            assert isinstance(element, ast.Name), f"nodes/{module}.py: NODES must list classes by name"
            out[element.id] = family
    return out


def declared_custom_types() -> set[str]:
    text = (REPO_ROOT / "nodes" / "types.py").read_text()
    prefix = re.search(r'PREFIX\s*=\s*"([^"]+)"', text).group(1)
    return {prefix + name for name in re.findall(r'io\.Custom\(PREFIX\s*\+\s*"([^"]+)"\)', text)}


@pytest.fixture(scope="module")
def info(comfy):
    return comfy.object_info()


@pytest.fixture(scope="module")
def pack_nodes(info):
    return {name: spec for name, spec in info.items() if str(spec.get("python_module", "")).startswith(PACK_MODULE)}


def test_pack_loads_without_import_failure(comfy):
    failures = comfy.import_failures()
    assert failures == [], "ComfyUI reported import failures:\n" + "\n".join(failures)
    disabled = [line for line in comfy.log_text().splitlines() if "Broadcast Avatar:" in line and "disabled" in line]
    assert disabled == [], "families disabled although the test environment has every package:\n" + \
        "\n".join(disabled)


def test_every_pack_node_is_listed(pack_nodes):
    expected = declared_nodes()
    assert expected, "no family declares any node"
    missing = sorted(set(expected) - set(pack_nodes))
    assert missing == [], f"declared in NODES but not served by /object_info (node id != class name?): {missing}"
    extra = sorted(set(pack_nodes) - set(expected))
    assert extra == [], f"served but not declared in any family's NODES: {extra}"


def test_nodes_follow_the_conventions(pack_nodes):
    problems = []
    for name, spec in sorted(pack_nodes.items()):
        family = declared_nodes().get(name, "?")
        if not name.startswith("Broadcast"):
            problems.append(f"{name}: node id must start with 'Broadcast'")
        if not str(spec.get("category", "")).startswith("Broadcast/"):
            problems.append(f"{name}: category {spec.get('category')!r} is not under 'Broadcast/' ({family})")
        if not spec.get("display_name") or spec["display_name"] == name:
            problems.append(f"{name}: needs a display name with spaced words")
        if not str(spec.get("description", "")).strip():
            problems.append(f"{name}: needs a one-line description")
        for section in ("required", "optional"):
            for input_name, input_spec in (spec.get("input") or {}).get(section, {}).items():
                opts = input_spec[1] if len(input_spec) > 1 and isinstance(input_spec[1], dict) else {}
                if not str(opts.get("tooltip", "")).strip():
                    problems.append(f"{name}: input {input_name!r} has no tooltip")
        types, names = spec.get("output", []), spec.get("output_name", [])
        for i, out_type in enumerate(types):
            shown = names[i] if i < len(names) else None
            if not shown or shown == out_type:
                problems.append(f"{name}: output {i} ({out_type}) has no explicit display name (shows {shown!r})")
    assert problems == [], "\n".join(problems)


def test_custom_types_are_the_packs_own(info, pack_nodes):
    """Every non-core type a pack node uses is one of nodes/types.py's BROADCAST_* types."""
    core = set()
    for name, spec in info.items():
        if name in pack_nodes:
            continue
        core.update(spec.get("output", []))
        for section in ("required", "optional"):
            for s in (spec.get("input") or {}).get(section, {}).values():
                if isinstance(s[0], str):
                    core.update(s[0].split(","))
    declared = declared_custom_types()
    assert declared and all(t.startswith("BROADCAST_") for t in declared)
    problems = []
    for name, spec in pack_nodes.items():
        used = set(spec.get("output", []))
        for section in ("required", "optional"):
            for s in (spec.get("input") or {}).get(section, {}).values():
                if isinstance(s[0], str):
                    used.update(s[0].split(","))
        for t in sorted(used - core - NEWER_CORE_TYPES - {"COMBO", "*"}):
            if t not in declared:
                problems.append(f"{name}: type {t!r} is neither core nor a BROADCAST_* type of nodes/types.py")
    assert problems == [], "\n".join(problems)
