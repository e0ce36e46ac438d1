"""Missing models refused once, before anything runs, with every model of the queued graph and its download command.

ComfyUI validates a queued prompt node by node (`validate_inputs`), and a node's check cannot see the rest of the
graph: the hidden `prompt` input is empty while validating (read in `execution.get_input_data` of cores 0.3.75 and
0.33.0: no dynprompt is passed there). So the graph-wide list is made where the whole prompt is seen: a handler on
`PromptServer.add_on_prompt_handler` (called with the request before validation on both cores) lists every missing
model of the graph (`engines.common.model_downloads.graph_missing`) and keeps it under the prompt's id (it gives the
request one when the client sent none). Each loader's `validate_inputs` checks its own folder (so a loader checked
alone still refuses), finds the graph's list through the prompt id ComfyUI's execution context carries during
validation, and returns: the whole list on the first node that lacks a model, a one-line pointer to that node on the
others. The editor shows each node's error once; names one input per node (see `loader_check`).

The same list answers `POST /broadcast_avatar/missing_models` ({"prompt": ...} -> {"missing": [...], "text": ...}),
which `scripts/run_workflow.py` and the batch runner ask before queueing, so every way of running a workflow reads
the same sentences.
"""
from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from typing import Optional

import folder_paths

from ..engines.common.model_downloads import FAMILIES, NONE_CHOICES, MissingModel, check_model, graph_missing, refusal

ROUTE = "/broadcast_avatar/missing_models"
# The node types whose validate_inputs calls `loader_check` (Voice Prompt's names only save_as: a second named input
# would repeat each refusal under both). The graph's list is shown on the first of these that lacks a model.
CHECKED_AT_QUEUE = ("BroadcastOmniVoiceLoader", "BroadcastMuseTalkLoader", "BroadcastDittoLoader",
                    "BroadcastSam3Loader", "BroadcastSpeechVerify", "BroadcastQC")
_KEEP = 64                    # prompts whose list is kept until their validation (one request validates right away)
_GRAPHS: "OrderedDict[str, tuple[str, str, str]]" = OrderedDict()   # prompt id -> (first node id, its title, text)
log = logging.getLogger("broadcast_avatar")


def roots(folder: str) -> list[str]:
    """The registered folders of `folder` (models/<folder> first, then extra_model_paths)."""
    try:
        return list(folder_paths.get_folder_paths(folder))
    except KeyError:
        return [str(folder_paths.models_dir) + "/" + folder]


def prompt_missing(prompt: dict) -> list[tuple[str, MissingModel]]:
    return graph_missing(prompt, roots)


def on_prompt(json_data: dict) -> dict:
    """The on-prompt handler: remember the graph's missing models under the prompt's id (made here if absent)."""
    prompt = json_data.get("prompt") if isinstance(json_data, dict) else None
    if not isinstance(prompt, dict):
        return json_data
    missing = prompt_missing(prompt)
    if not missing:
        return json_data
    prompt_id = str(json_data.setdefault("prompt_id", str(uuid.uuid4())))
    shown = [(nid, m) for nid, m in missing if prompt[nid].get("class_type") in CHECKED_AT_QUEUE] or missing
    first_id, first = shown[0]
    _GRAPHS[prompt_id] = (first_id, first.node, refusal(m for _, m in missing))
    while len(_GRAPHS) > _KEEP:
        _GRAPHS.popitem(last=False)
    return json_data


def loader_check(family: str, input_name: str, name: Optional[str]):
    """A loader's `validate_inputs` result for its model folder `name`: True, the graph's whole refusal (first
    loader lacking a model), a pointer to it (the others), or this loader's own refusal (checked outside a queued
    prompt). The loader names only this one input in `validate_inputs`, since ComfyUI repeats a refusal under every
    input the method names."""
    if name is None or name in NONE_CHOICES:    # linked, or the Whisper combos' "no model"
        return True
    folder = FAMILIES[family].folder
    own = check_model(family, name, roots(folder))
    if own is None:
        return True
    graph = _GRAPHS.get(_current_prompt_id() or "")
    if graph is None:
        return f"{input_name}: {refusal([own])}"
    first_id, first_title, text = graph
    if _current_node_id() == first_id:
        return f"{input_name}: {text}"
    return (f"{input_name}: {FAMILIES[family].label} is missing in {own.folder}. The list of every missing model of "
            f"this workflow, with the commands that download them, is under '{first_title}'.")


def _context():
    try:
        from comfy_execution.utils import get_executing_context
    except ImportError:
        return None
    return get_executing_context()


def _current_prompt_id() -> Optional[str]:
    context = _context()
    return None if context is None else context.prompt_id


def _current_node_id() -> Optional[str]:
    context = _context()
    return None if context is None else str(context.node_id)


def register() -> None:
    """Install the on-prompt handler and the route (inside a running server only)."""
    try:
        from aiohttp import web
        from server import PromptServer

        server = PromptServer.instance
    except Exception as exc:  # not inside a running ComfyUI server
        log.debug("Broadcast Avatar: no missing-model check registered (%s)", exc)
        return
    server.add_on_prompt_handler(on_prompt)

    @server.routes.post(ROUTE)
    async def _missing(request):
        body = await request.json()
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(prompt, dict):
            return web.json_response({"error": "POST {\"prompt\": <API prompt>}"}, status=400)
        missing = prompt_missing(prompt)
        return web.json_response({
            "missing": [{"node": node_id, "title": m.node, "folder": str(m.folder), "files": m.files,
                         "commands": [d.command(m.folder) for d in m.downloads]} for node_id, m in missing],
            "text": refusal(m for _, m in missing)})
