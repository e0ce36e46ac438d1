"""Which shipped workflows this ComfyUI core can run: one log line per workflow whose core nodes it lacks.

`wardrobe_minimax_h3` is built on core's MiniMax H3 nodes, which came with ComfyUI 0.33.0; on an older core the
pack still loads every node family, and this says once, by workflow name, what is missing and which core brings it.
The check reads the node types of the shipped API workflows and looks the ones known to come with newer cores
(`CORE_NODES_SINCE`) up in core's registry: the feature, never a version string; the version in the message is only
advice. Other node types are not judged here (a setup that loads the pack without core's extra nodes, as the pack's
own guard test does, must not be told to update), and the runner names any missing type before queueing anyway.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("broadcast_avatar")

WORKFLOWS_DIR = Path(__file__).resolve().parent.parent / "workflows"
# Core node types the shipped workflows use that older cores lack, and the first core release that has them.
CORE_NODES_SINCE = {
    "EmptyMiniMaxH3LatentAV": "0.33.0",
    "MiniMaxH3ReferenceToVideo": "0.33.0",
    "MiniMaxH3SigmaShift": "0.33.0",
    "SAM3_VideoTrack": "0.33.0",
}
_reported: set = set()


def missing_core_nodes(available, workflows_dir: Path = WORKFLOWS_DIR) -> dict:
    """``{workflow stem: sorted newer-core node types it uses that are not in `available`}`` (only those lacking some)."""
    out = {}
    for path in sorted(workflows_dir.rglob("*.api.json")):
        try:
            prompt = json.loads(path.read_text(encoding="utf-8"))
            types = {n["class_type"] for n in prompt.values() if isinstance(n, dict) and "class_type" in n}
        except (OSError, ValueError, AttributeError):
            continue  # a broken file is the workflow tests' business, not a reason to fail loading the pack
        lacking = sorted(t for t in types if t in CORE_NODES_SINCE and t not in available)
        if lacking:
            out[path.name[: -len(".api.json")]] = lacking
    return out


def report_missing_core_nodes(available) -> None:
    """Log once per workflow (per process) that this core cannot run it, naming the nodes and the core needed."""
    for stem, lacking in missing_core_nodes(available).items():
        if stem in _reported:
            continue
        _reported.add(stem)
        since = max((CORE_NODES_SINCE[t] for t in lacking), key=lambda v: tuple(int(x) for x in v.split(".")))
        log.warning("Broadcast Avatar: workflow %s needs core nodes this ComfyUI lacks (%s): update to ComfyUI %s or "
                    "newer to run it; the pack's other nodes and workflows are unaffected", stem, ", ".join(lacking),
                    since)


ROUTE = "/broadcast_avatar/core_templates"


def register_route() -> None:
    """GET /broadcast_avatar/core_templates -> {"lacking": missing_core_nodes(core's registry)}: the editor
    extension hides those templates, which this core could not open (web/js/templates.js)."""
    try:
        from aiohttp import web
        from server import PromptServer

        routes = PromptServer.instance.routes
    except Exception as exc:  # not inside a running ComfyUI server
        log.debug("Broadcast Avatar: no template route registered (%s)", exc)
        return

    @routes.get(ROUTE)
    async def _core_templates(request):
        import nodes as core_nodes

        return web.json_response({"lacking": missing_core_nodes(set(core_nodes.NODE_CLASS_MAPPINGS))})
