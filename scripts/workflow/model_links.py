"""The `models` metadata of each shipped UI workflow: what the editor's own missing-model support reads.

Read in the frontends' sources (1.32.9 on core 0.3.75, 1.49.6 on 0.33.0):
- 1.32.9 (`src/scripts/app.ts`, `loadGraphData`): the workflow's top-level `models` and each node's
  `properties.models` entries whose `name` is one of that node's widget values (`getSelectedModelsMetadata`,
  `src/workbench/utils/modelMetadataUtil.ts`) are checked against `/experiment/models/<directory>` (core lists every
  file of that registered folder, recursively, as a path relative to it, with the extensions of
  `folder_paths.supported_pt_extensions`); each one not found is listed in the "Missing models" dialog as
  `<directory> / <name>` with a download button (`src/components/dialog/content/MissingModelsWarning.vue`: only for
  https://huggingface.co/ or civitai URLs and names ending in .safetensors or .sft; another name is listed with the
  frontend's own note on allowed suffixes).
- 1.49.6 (`src/platform/missingModel/missingModelScan.ts`, `missingModelPipeline.ts`): a missing model is a combo
  widget whose value is a model file name (.safetensors, .pth, .bin ...) the combo does not offer; the `models`
  entries only add the URL and folder to such a widget (its Errors panel then offers the download). The pack's
  loaders choose a folder name ("omnivoice"), which is no model file name, so 1.49.6 shows nothing for them on load;
  the queue-time refusal (engines/common/model_downloads.py) names them. Core loaders (UNETLoader, VAELoader ...)
  choose a file, and both frontends use their entries.

So the entries are:
- the pack's models, on the workflow's top level: per `hf download` of each loader's model folder
  (engines/common/model_downloads.py, the one table), the first weight file the loader checks that the command
  fetches, as `<model folder>/<file>` under the registered folder (`directory` = the family's folder, e.g.
  `omnivoice`), with its Hugging Face `resolve` URL. SAM3 is left out: its loader checks the folder only (its masks
  may come from the Mask Sequence Cache, which runs it only on a miss), so its weights are not missing on load.
- core's files, in the `properties.models` of the core loader node that chooses them, as core's own templates do:
  name, `resolve` URL and folder exactly as core's workflow templates (the `comfyui_workflow_templates*` packages
  ComfyUI installs) list them; `CORE_FILES` holds them and tests/unit/test_workflow_models.py checks each against the
  installed templates. A file found in no core template (the MiniMax H3 files of wardrobe_minimax_h3) gets no entry.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engines.common.model_downloads import FAMILIES, LOADERS, NONE_CHOICES, Download  # noqa: E402

# File types core lists in a model folder (folder_paths.supported_pt_extensions, 0.3.75 and 0.33.0): a key file the
# frontend can find there. (.onnx is not among them: Ditto's ONNX helpers are never the key file.)
WEIGHT_SUFFIXES = (".safetensors", ".sft", ".pth", ".bin", ".pt", ".ckpt")

# Core's files the shipped graphs choose, as core's own workflow templates list them (name -> directory, URL). The
# URLs are copied from those templates, never composed: tests/unit/test_workflow_models.py finds each in the
# installed comfyui_workflow_templates* packages (the Wan files are in both cores' templates, SAM 3.1 in 0.33.0's).
CORE_FILES: dict[str, tuple[str, str]] = {
    "wan2.1_vace_14B_fp16.safetensors": (
        "diffusion_models",
        "https://huggingface.co/Comfy-Org/Wan_2.1_ComfyUI_repackaged/resolve/main/split_files/diffusion_models/"
        "wan2.1_vace_14B_fp16.safetensors"),
    "wan_2.1_vae.safetensors": (
        "vae",
        "https://huggingface.co/Comfy-Org/Wan_2.1_ComfyUI_repackaged/resolve/main/split_files/vae/"
        "wan_2.1_vae.safetensors"),
    "umt5_xxl_fp8_e4m3fn_scaled.safetensors": (
        "text_encoders",
        "https://huggingface.co/Comfy-Org/Wan_2.1_ComfyUI_repackaged/resolve/main/split_files/text_encoders/"
        "umt5_xxl_fp8_e4m3fn_scaled.safetensors"),
    "sam3.1_multiplex_fp16.safetensors": (
        "checkpoints",
        "https://huggingface.co/Comfy-Org/sam3.1/resolve/main/checkpoints/sam3.1_multiplex_fp16.safetensors"),
}


def key_file(download: Download) -> str:
    """The first weight file `download` provides (relative to its `into`) that its command fetches."""
    fetched = set(download.fetch)
    for entry in download.provides:
        for option in (entry,) if isinstance(entry, str) else entry:
            if option.endswith(WEIGHT_SUFFIXES) and (not fetched or option in fetched):
                return option
    raise ValueError(f"{download.repo}: no weight file among {download.provides}")


def hf_url(repo: str, path: str, revision: str | None = None) -> str:
    return f"https://huggingface.co/{repo}/resolve/{revision or 'main'}/{path}"


def _ordered(api: dict) -> list[tuple[str, dict]]:
    return sorted(api.items(), key=lambda kv: (0, int(kv[0]), "") if kv[0].isdigit() else (1, 0, kv[0]))


def pack_models(api: dict) -> list[dict]:
    """The top-level `models` entries of the API prompt `api`'s pack loaders, each model folder once."""
    entries: list[dict] = []
    for _, node in _ordered(api):
        input_name, family = LOADERS.get(node.get("class_type"), (None, None))
        name = (node.get("inputs") or {}).get(input_name) if input_name else None
        if not isinstance(name, str) or not name or name in NONE_CHOICES or FAMILIES[family].folder_only:
            continue
        fam = FAMILIES[family]
        for d in fam.downloads_for(name):
            file = key_file(d)
            entry = {"name": "/".join(p for p in (name, d.into, file) if p),
                     "url": hf_url(d.repo, file, d.revision), "directory": fam.folder}
            if entry not in entries:
                entries.append(entry)
    return entries


def core_models(api: dict) -> dict[str, list[dict]]:
    """Node id -> the `properties.models` of each core loader of `api` that chooses a file of CORE_FILES."""
    out: dict[str, list[dict]] = {}
    for node_id, node in _ordered(api):
        if node.get("class_type", "").startswith("Broadcast"):
            continue
        chosen = [v for v in (node.get("inputs") or {}).values() if isinstance(v, str) and v in CORE_FILES]
        if chosen:
            out[node_id] = [{"name": v, "url": CORE_FILES[v][1], "directory": CORE_FILES[v][0]} for v in chosen]
    return out


def with_models(wf: dict, api: dict) -> dict:
    """`wf` (a UI workflow) with the `models` metadata of its API twin `api`: the pack's on the top level, core's in
    their loader nodes' properties; entries of earlier runs are replaced, nothing else changes."""
    top = pack_models(api)
    if top:
        wf["models"] = top
    else:
        wf.pop("models", None)
    per_node = core_models(api)
    for node in wf.get("nodes", []):
        models = per_node.get(str(node["id"]))
        if models:
            node.setdefault("properties", {})["models"] = models
        elif "models" in node.get("properties", {}):
            del node["properties"]["models"]
    return wf

