"""Workflow files as API prompts: loading, UI-format conversion, `--set` overrides, missing-model checks.

Shared by `scripts/run_workflow.py`, the browser test and the `comfy run` test, so an override means the same thing
everywhere: ``"<node id or title>.<input>": value``.

The UI-format conversion follows the server's /object_info (the order of a node's widget inputs is the order of its
saved ``widgets_values``). It covers plain graphs with Reroute, Note, PrimitiveNode, muted and bypassed nodes;
anything it cannot map with certainty (subgraphs, group nodes, widget lists that do not line up) is refused with a
message saying how to export the API format from the editor instead. Only the standard library is used.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
FRONTEND_ONLY = {"Note", "MarkdownNote", "Reroute", "PrimitiveNode"}
CONTROL_VALUES = {"fixed", "increment", "decrement", "randomize"}
UPLOAD_FLAGS = ("image_upload", "video_upload", "audio_upload")
EXPORT_HINT = "Open it in the ComfyUI editor and use Workflow > Export (API), then run that file."

# Which models folder a combo input of a loader names (for the missing-model report).
# "*" = every combo input of the node whose name says it picks a file or folder (FILE_INPUT_WORDS).
FILE_INPUT_WORDS = ("model", "name", "file", "video", "audio", "image", "ckpt", "checkpoint")
MODEL_FOLDERS: dict[str, dict[str, str]] = {
    "CheckpointLoaderSimple": {"ckpt_name": "checkpoints"},
    "CheckpointLoader": {"ckpt_name": "checkpoints", "config_name": "configs"},
    "ImageOnlyCheckpointLoader": {"ckpt_name": "checkpoints"},
    "unCLIPCheckpointLoader": {"ckpt_name": "checkpoints"},
    "VAELoader": {"vae_name": "vae"},
    "LoraLoader": {"lora_name": "loras"},
    "LoraLoaderModelOnly": {"lora_name": "loras"},
    "UNETLoader": {"unet_name": "diffusion_models"},
    "CLIPLoader": {"clip_name": "text_encoders"},
    "DualCLIPLoader": {"clip_name1": "text_encoders", "clip_name2": "text_encoders"},
    "TripleCLIPLoader": {"clip_name1": "text_encoders", "clip_name2": "text_encoders", "clip_name3": "text_encoders"},
    "CLIPVisionLoader": {"clip_name": "clip_vision"},
    "ControlNetLoader": {"control_net_name": "controlnet"},
    "DiffControlNetLoader": {"control_net_name": "controlnet"},
    "UpscaleModelLoader": {"model_name": "upscale_models"},
    "StyleModelLoader": {"style_model_name": "style_models"},
    "GLIGENLoader": {"gligen_name": "gligen"},
    "HypernetworkLoader": {"hypernetwork_name": "hypernetworks"},
    "ModelPatchLoader": {"name": "model_patches"},
    "LoadImage": {"image": "input"},
    "LoadImageMask": {"image": "input"},
    "LoadVideo": {"file": "input"},
    "LoadAudio": {"audio": "input"},
    # The pack's loaders: model folders under models/<family>, media files in ComfyUI's input folder.
    "BroadcastSam3Loader": {"model_name": "sam3"},
    "BroadcastOmniVoiceLoader": {"model_name": "omnivoice"},
    "BroadcastVoicePrompt": {"whisper_model": "whisper", "saved_voice": "omnivoice_voices"},
    "BroadcastSpeechVerify": {"whisper_model": "whisper"},
    "BroadcastMuseTalkLoader": {"model_name": "musetalk"},
    "BroadcastDittoLoader": {"model_name": "ditto"},
    "BroadcastLoadVideo": {"video": "input"},
    "BroadcastLoadAudio": {"audio_file": "input"},
}


class WorkflowError(ValueError):
    """A workflow file or an override that cannot be used; the message says what to do."""


# -- loading ------------------------------------------------------------------------------------------------------
def load_workflow(path: str | Path) -> tuple[dict, str]:
    """Read a workflow file; return ``(data, "api" | "ui")``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WorkflowError(f"workflow file not found: {path}") from None
    except ValueError as exc:
        raise WorkflowError(f"{path} is not valid JSON: {exc}") from None
    return data, workflow_kind(data, str(path))


def workflow_kind(data: Any, name: str = "workflow") -> str:
    if isinstance(data, dict) and isinstance(data.get("nodes"), list) and "links" in data:
        return "ui"
    if isinstance(data, dict) and data and all(isinstance(v, dict) and "class_type" in v for v in data.values()):
        return "api"
    if isinstance(data, dict) and isinstance(data.get("prompt"), dict):
        raise WorkflowError(f"{name} wraps its prompt in {{\"prompt\": ...}}; save only the inner prompt object")
    raise WorkflowError(f"{name} is neither an API-format prompt ({{id: {{class_type, inputs}}}}) nor a UI-format "
                        "workflow (nodes + links)")


# -- combos and specs ---------------------------------------------------------------------------------------------
def input_specs(object_info: dict, class_type: str) -> dict[str, list]:
    """``{input name: [type, options]}`` over required then optional inputs, in schema order."""
    info = object_info.get(class_type) or {}
    specs: dict[str, list] = {}
    for section in ("required", "optional"):
        for name, spec in (info.get("input") or {}).get(section, {}).items():
            specs[name] = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    return specs


def spec_type(spec: list) -> str:
    return "COMBO" if isinstance(spec[0], list) else str(spec[0])


def spec_options(spec: list) -> dict:
    return spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}


def combo_choices(spec: list) -> Optional[list]:
    if isinstance(spec[0], list):
        return spec[0]
    if spec[0] == "COMBO":
        return list(spec_options(spec).get("options", []))
    return None


def widget_default(spec: list) -> Any:
    """The value the editor gives a widget that has none saved: the schema's default, else a combo's first choice."""
    opts = spec_options(spec)
    if "default" in opts:
        return opts["default"]
    choices = combo_choices(spec)
    return choices[0] if choices else None


def is_widget(spec: list) -> bool:
    return spec_type(spec) in WIDGET_TYPES and not spec_options(spec).get("forceInput")


def json_strings(value: Any):
    """Every string inside a JSON value (a workflow, its widget values, a job's overrides), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from json_strings(v)


# -- UI format -> API format --------------------------------------------------------------------------------------
def ui_links(wf: dict) -> dict[int, tuple]:
    """``{link id: (origin id, origin slot, target id, target slot, type)}`` of a UI-format workflow (both the
    list and the dict form of a saved link)."""
    out = {}
    for link in wf.get("links") or []:
        if isinstance(link, dict):
            out[link["id"]] = (link["origin_id"], link["origin_slot"], link["target_id"], link["target_slot"],
                               link.get("type"))
        else:
            out[link[0]] = tuple(link[1:6])
    return out


def api_links(prompt: dict) -> list[tuple[str, int, str, str]]:
    """``(source id, output slot, target id, input name)`` of every link of an API prompt: an input whose value is
    ``[node id, slot]`` naming a node of the prompt."""
    ids = {str(k) for k, v in prompt.items() if isinstance(v, dict) and "class_type" in v}
    out = []
    for nid, node in prompt.items():
        if str(nid) not in ids:
            continue
        for name, value in (node.get("inputs") or {}).items():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[1], int) and str(value[0]) in ids:
                out.append((str(value[0]), value[1], str(nid), name))
    return out


def ui_to_api(wf: dict, object_info: dict) -> dict:
    """Convert a UI-format workflow to an API prompt using the server's /object_info."""
    if (wf.get("definitions") or {}).get("subgraphs") or (wf.get("extra") or {}).get("groupNodes"):
        raise WorkflowError(f"the workflow uses subgraphs or group nodes, which this runner does not expand. "
                            f"{EXPORT_HINT}")
    nodes = {n["id"]: n for n in wf["nodes"]}
    links = ui_links(wf)
    missing = sorted({n["type"] for n in nodes.values()
                      if n["type"] not in object_info and n["type"] not in FRONTEND_ONLY and n.get("mode") != 2})
    if missing:
        raise WorkflowError(f"node types not installed on this server: {', '.join(missing)}")

    def source(link_id: int, seen=()) -> Optional[list | tuple]:
        """Follow a link through Reroutes and bypassed nodes to a real output ([node id, slot])."""
        if link_id is None or link_id not in links or link_id in seen:
            return None
        origin_id, slot, _, _, link_type = links[link_id]
        origin = nodes.get(origin_id)
        if origin is None:
            return None
        if origin["type"] == "Reroute" or origin.get("mode") == 4:
            for inp in origin.get("inputs") or []:
                if inp.get("link") is not None and (origin["type"] == "Reroute" or inp.get("type") == link_type):
                    return source(inp["link"], seen + (link_id,))
            return None
        if origin.get("mode") == 2:
            return None
        if origin["type"] == "PrimitiveNode":
            return ("value", (origin.get("widgets_values") or [None])[0])
        return [str(origin_id), slot]

    prompt = {}
    for node in sorted(nodes.values(), key=lambda n: n["id"]):
        if node["type"] in FRONTEND_ONLY or node.get("mode") in (2, 4):
            continue
        prompt[str(node["id"])] = {"class_type": node["type"], "inputs": _node_inputs(node, object_info, source),
                                   "_meta": {"title": node.get("title") or object_info[node["type"]].get(
                                       "display_name") or node["type"]}}
    return prompt


def _node_inputs(node: dict, object_info: dict, source) -> dict:
    where = f"node {node['id']} ({node['type']})"
    linked = {inp["name"]: inp.get("link") for inp in node.get("inputs") or [] if inp.get("link") is not None}
    values = node.get("widgets_values")
    by_name = values if isinstance(values, dict) else None
    queue = list(values) if isinstance(values, list) else []
    inputs: dict[str, Any] = {}
    specs = input_specs(object_info, node["type"])
    uploads_after = sum(1 for spec in specs.values()
                        if is_widget(spec) and any(spec_options(spec).get(flag) for flag in UPLOAD_FLAGS))
    # Inputs the saving editor drew as widgets (its input entry names one): their values are in widgets_values even
    # where this server makes them link-only (core 0.33.0's MakeTrainingDataset `texts` is force_input, 0.3.75's was a
    # widget), so they are read off the queue in their place, as the editor does.
    saved_as_widget = {inp["name"] for inp in node.get("inputs") or [] if inp.get("widget")}
    for name, spec in specs.items():
        value, has_value = None, False
        if is_widget(spec) or (name in saved_as_widget and by_name is None):
            if by_name is not None:
                has_value, value = name in by_name, by_name.get(name)
            elif queue:
                has_value, value = True, queue.pop(0)
                opts = spec_options(spec)
                # Extra frontend widgets saved after their input: seed control, upload button.
                if spec_type(spec) == "INT" and queue and queue[0] in CONTROL_VALUES and (
                        opts.get("control_after_generate") or name in ("seed", "noise_seed")):
                    queue.pop(0)
                if any(opts.get(flag) for flag in UPLOAD_FLAGS) and queue and queue[0] in (
                        "image", "video", "audio", "upload", None):
                    queue.pop(0)
                    uploads_after -= 1
            if not is_widget(spec):
                has_value = False  # link-only on this server: the saved value is read past, never sent
        if name in linked:
            src = source(linked[name])
            if isinstance(src, tuple):
                inputs[name] = src[1]
            elif src is not None:
                inputs[name] = src
            elif has_value:
                inputs[name] = value
        elif has_value:
            inputs[name] = value
        elif is_widget(spec) and name not in linked:
            # A file saved before the node gained this input: the editor gives the new widget its default and
            # sends it (optional ones too), so the runner does the same.
            default = widget_default(spec)
            if default is not None:
                inputs[name] = default
    # The editor adds the upload button of a combo after the node's last input (V3 nodes with more than one
    # widget), so its saved value can also come last.
    while queue and uploads_after > 0 and queue[-1] in ("image", "video", "audio", "upload", None):
        queue.pop()
        uploads_after -= 1
    if queue:
        raise WorkflowError(f"{where}: {len(queue)} saved widget value(s) {queue!r} do not match the inputs this "
                            f"server lists for {node['type']} (another version of the node?). {EXPORT_HINT}")
    return inputs


# -- overrides ----------------------------------------------------------------------------------------------------
def parse_set(text: str) -> tuple[str, Any]:
    """``"node.input=value"`` -> ``("node.input", value)``; the value is JSON if it parses, else the raw string."""
    key, sep, raw = text.partition("=")
    if not sep or "." not in key:
        raise WorkflowError(f"--set {text!r}: expected <node id or title>.<input>=<value>")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def find_node(prompt: dict, node_key: str) -> str:
    """The id of the node named by its id or by its title (``_meta.title``); ambiguity is an error."""
    if node_key in prompt:
        return node_key
    hits = [nid for nid, node in prompt.items() if (node.get("_meta") or {}).get("title") == node_key]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise WorkflowError(f"override target {node_key!r}: {len(hits)} nodes have that title ({', '.join(hits)}); "
                            "use the node id")
    titles = sorted({(n.get("_meta") or {}).get("title", "") for n in prompt.values()} - {""})
    raise WorkflowError(f"override target {node_key!r}: no node has that id or title. Ids: {', '.join(prompt)}; "
                        f"titles: {', '.join(titles)}")


def apply_overrides(prompt: dict, overrides: dict, object_info: Optional[dict] = None) -> dict:
    """A copy of `prompt` with ``{"<node id or title>.<input>": value}`` applied.

    An input name the node does not have (per /object_info when given, else per the prompt) is an error. A string
    given to a numeric input is converted; a number given to a STRING input becomes its text.
    """
    out = json.loads(json.dumps(prompt))
    for key, value in overrides.items():
        node_key, _, input_name = key.rpartition(".")
        if not node_key or not input_name:
            raise WorkflowError(f"override {key!r}: expected <node id or title>.<input>")
        node_id = find_node(out, node_key)
        node = out[node_id]
        specs = input_specs(object_info, node["class_type"]) if object_info else {}
        known = specs or node.get("inputs", {})
        if input_name not in known:
            raise WorkflowError(f"override {key!r}: node {node_id} ({node['class_type']}) has no input "
                                f"{input_name!r}; it has {', '.join(known)}")
        if input_name in specs:
            value = _coerce(value, specs[input_name], key)
        node.setdefault("inputs", {})[input_name] = value
    return out


def _coerce(value: Any, spec: list, key: str) -> Any:
    kind = spec_type(spec)
    try:
        if kind == "STRING" and not isinstance(value, str):
            return json.dumps(value) if isinstance(value, (list, dict)) else str(value)
        if kind == "INT" and isinstance(value, (str, float)) and not isinstance(value, bool):
            return int(float(value))
        if kind == "FLOAT" and isinstance(value, (str, int)) and not isinstance(value, bool):
            return float(value)
        if kind == "BOOLEAN" and isinstance(value, str):
            return {"true": True, "false": False, "1": True, "0": False}[value.lower()]
    except (ValueError, KeyError):
        raise WorkflowError(f"override {key!r}: {value!r} is not a valid {kind}") from None
    return value


# -- checks before queueing ---------------------------------------------------------------------------------------
def without_pack_models(problems: list[str], prompt: dict) -> list[str]:
    """`check_prompt`'s problems less the pack loaders' model folders: the server's own missing-model list
    (`ComfyClient.missing_models`, the text its loaders refuse a prompt with) names those, with download commands."""
    pack = {nid for nid, n in prompt.items() if str(n.get("class_type", "")).startswith("Broadcast")}
    return [p for p in problems if not ("is not in models/" in p and p.split(" ", 2)[1] in pack)]


def check_prompt(prompt: dict, object_info: dict) -> list[str]:
    """Problems found before queueing: unknown node types, missing model files/folders, combo values not offered.

    Each line names the node, the input, the file and the folder it was looked for in (``models/<folder>`` or
    ``input``).
    """
    problems = []
    for node_id, node in prompt.items():
        class_type = node.get("class_type")
        if class_type not in object_info:
            problems.append(f"node {node_id}: node type {class_type!r} is not installed on this server")
            continue
        folders = MODEL_FOLDERS.get(class_type, {})
        for name, spec in input_specs(object_info, class_type).items():
            value = node.get("inputs", {}).get(name)
            choices = combo_choices(spec)
            if choices is None or not isinstance(value, str) or value in choices:
                continue
            folder = folders.get(name)
            if folder is None and "*" in folders and any(w in name for w in FILE_INPUT_WORDS):
                folder = folders["*"]
            if folder == "input":
                problems.append(f"node {node_id} ({class_type}) input {name}: file {value!r} is not in ComfyUI's "
                                "input folder")
            elif folder:
                problems.append(f"node {node_id} ({class_type}) input {name}: model {value!r} is not in "
                                f"models/{folder}")
            else:
                shown = ", ".join(map(repr, choices[:12])) + (" ..." if len(choices) > 12 else "")
                problems.append(f"node {node_id} ({class_type}) input {name}: {value!r} is not one of {shown}")
    return problems
