"""Which model files each loader of the pack needs, where they come from, and one refusal naming every missing one.

The one implementation behind "a model is missing": the loaders' queue-time checks (nodes/model_check.py), the
`/broadcast_avatar/missing_models` route that `scripts/run_workflow.py` and the batch runner ask before queueing,
the demo's table (`scripts/broadcast_demo.py`) and the workflows' Notes all read this table, so the user reads the
same sentences and the same `hf download` commands wherever they meet a missing model.

Each family's entries list, per download, the files the loader checks (relative to the model folder, in the form
`model_files.require_files` takes) and the command that fetches exactly them into that folder. Nothing here imports
ComfyUI; finding the registered `models/<family>` folders is the caller's job (it passes them in).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

Entry = Union[str, Sequence[str]]
HF_HINT = "pip install -U huggingface_hub   # provides the `hf` command"
NONE_CHOICES = ("(none)", "none")   # the Whisper combos' "no model" entry (nodes/tts_common.WHISPER_NONE)


@dataclass(frozen=True)
class Download:
    """One `hf download` that fills part of a model folder."""

    repo: str
    provides: tuple            # entries the loader checks, relative to `into` (str, or a tuple of alternatives)
    into: str = ""             # subfolder of the model folder the command writes to ("" = the folder itself)
    fetch: tuple = ()          # file names for the command line; () with no `include` = the whole repository
    include: tuple = ()        # --include patterns instead of file names
    revision: Optional[str] = None
    note: str = ""             # said before the command (a gated repository, a licence)

    def command(self, model_folder: Union[str, Path]) -> str:
        local = Path(model_folder) / self.into if self.into else Path(model_folder)
        parts = ["hf download", self.repo]
        if self.revision:
            parts += ["--revision", self.revision]
        parts += list(self.fetch)
        for pattern in self.include:     # one flag per pattern: `hf` (huggingface_hub 1.x) reads a second value
            parts += ["--include", f'"{pattern}"']   # after one --include as a file name
        parts += ["--local-dir", _quote(str(local))]
        return " ".join(parts)

    def missing(self, model_folder: Path) -> list[str]:
        base = model_folder / self.into if self.into else model_folder
        out = []
        for entry in self.provides:
            options = (entry,) if isinstance(entry, str) else tuple(entry)
            if not any((base / o).exists() for o in options):
                shown = " or ".join(options)
                out.append(f"{self.into}/{shown}" if self.into else shown)
        return out


@dataclass(frozen=True)
class Family:
    """A loader family: its folder under models/, the folder name the shipped workflows use, its downloads."""

    folder: str
    default_name: str
    label: str                                  # what the model is, in words
    downloads: tuple
    name_downloads: Optional[Callable[[str], tuple]] = None   # downloads that depend on the chosen name
    # Only the folder's presence is checked before the run: the model runs only when a cache misses (SAM3 behind
    # the Mask Sequence Cache, whose hit never evaluates it), so a folder without the files is legitimate then and
    # the loader names the missing files itself if it does run.
    folder_only: bool = False

    def downloads_for(self, name: str) -> tuple:
        return self.name_downloads(name) if self.name_downloads else self.downloads


def _whisper_downloads(name: str) -> tuple:
    # A folder named after an OpenAI Whisper checkpoint comes from that repository; any other name gets the
    # checkpoint the pack's docs suggest, downloaded under the chosen name.
    repo = f"openai/{name}" if name.startswith("whisper-") else "openai/whisper-large-v3-turbo"
    return (Download(repo, ("config.json", "model.safetensors", "preprocessor_config.json", "generation_config.json",
                            ("tokenizer.json", "vocab.json")),
                     include=("*.json", "*.txt", "model.safetensors")),)


DITTO_WEIGHTS = ("appearance_extractor.pth", "motion_extractor.pth", "warp_network.pth", "decoder.pth",
                 "stitch_network.pth", "lmdm_v0.4_hubert.pth")
DITTO_AUX = ("det_10g.onnx", "2d106det.onnx", "landmark203.onnx", "hubert_streaming_fix_kv.onnx")
DITTO_FILES = ("ditto_cfg/v0.4_hubert_cfg_pytorch.pkl", *(f"ditto_pytorch/models/{f}" for f in DITTO_WEIGHTS),
               *(f"ditto_pytorch/aux_models/{f}" for f in DITTO_AUX))

FAMILIES: dict[str, Family] = {
    "omnivoice": Family("omnivoice", "omnivoice", "OmniVoice (the cloned voice)", (
        Download("k2-fsa/OmniVoice", ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                      "audio_tokenizer/config.json", "audio_tokenizer/model.safetensors",
                                      "audio_tokenizer/preprocessor_config.json")),)),
    "musetalk": Family("musetalk", "musetalk-v15", "MuseTalk v1.5 (lip sync)", (
        Download("TMElyralab/MuseTalk", ("musetalkV15/musetalk.json",
                                         ("musetalkV15/unet.safetensors", "musetalkV15/unet.pth")),
                 fetch=("musetalkV15/musetalk.json", "musetalkV15/unet.pth")),
        Download("stabilityai/sd-vae-ft-mse", ("config.json", ("diffusion_pytorch_model.safetensors",
                                                               "diffusion_pytorch_model.bin")),
                 into="sd-vae", fetch=("config.json", "diffusion_pytorch_model.safetensors")),
        Download("openai/whisper-tiny", ("config.json", ("model.safetensors", "pytorch_model.bin"),
                                         "preprocessor_config.json"),
                 into="whisper", fetch=("config.json", "model.safetensors", "preprocessor_config.json")),
    )),
    "ditto": Family("ditto", "ditto-talkinghead", "Ditto (talking head)", (
        Download("digital-avatar/ditto-talkinghead",
                 DITTO_FILES, include=("ditto_cfg/*", "ditto_pytorch/*")),)),
    "sam3": Family("sam3", "sam3", "SAM3 (garment and hands masks)", (
        Download("facebook/sam3", ("config.json", ("model.safetensors", "model.safetensors.index.json"),
                                   "processor_config.json", ("tokenizer.json", "vocab.json")),
                 include=("*.json", "*.txt", "*.safetensors"),
                 note="facebook/sam3 is gated: accept its licence on huggingface.co and run `hf auth login` first."),),
        folder_only=True),
    "whisper": Family("whisper", "whisper-large-v3-turbo", "Whisper (speech recognition)", (),
                      name_downloads=_whisper_downloads),
}

# The pack's loaders: node type -> (the input that names the model folder, the family).
LOADERS: dict[str, tuple[str, str]] = {
    "BroadcastOmniVoiceLoader": ("model_name", "omnivoice"),
    "BroadcastMuseTalkLoader": ("model_name", "musetalk"),
    "BroadcastDittoLoader": ("model_name", "ditto"),
    "BroadcastSam3Loader": ("model_name", "sam3"),
    "BroadcastVoicePrompt": ("whisper_model", "whisper"),
    "BroadcastSpeechVerify": ("whisper_model", "whisper"),
    "BroadcastQC": ("whisper_model", "whisper"),
}


@dataclass
class MissingModel:
    """What one loader lacks: the folder, the files, and the downloads that bring them."""

    family: str
    name: str
    folder: Path
    files: list = field(default_factory=list)
    downloads: list = field(default_factory=list)
    node: str = ""                 # the node's title (empty when not known)
    problem: str = ""              # a sentence about the folder itself (missing, or the models folder missing)

    def sentences(self, problem_said: bool = False) -> list[str]:
        """The paragraph about this model; ``problem_said``: the folder's problem is already stated above (several
        models share it, e.g. a missing models folder), so it is not repeated here."""
        fam = FAMILIES[self.family]
        who = f"{self.node} needs {fam.label}" if self.node else f"{fam.label} is needed"
        lines = [f"{who}, in the folder {self.folder}."]
        if self.problem:
            if not problem_said:
                lines.append(self.problem)
        else:
            lines.append("Missing there: " + ", ".join(self.files) + ".")
        lines.append("Download it with:" if len(self.downloads) == 1 else "Download them with:")
        for d in self.downloads:
            if d.note:
                lines.append(f"  ({d.note})")
            lines.append("  " + d.command(self.folder))
        return lines


def check_model(family: str, name: str, roots: Sequence[Union[str, Path]], node: str = "") -> Optional[MissingModel]:
    """What is missing for model folder `name` of `family`, looked for in `roots` (its registered folders, the
    first being where new files go); None when every checked file is there."""
    fam = FAMILIES[family]
    roots = [Path(r) for r in roots] or [Path("models") / fam.folder]
    downloads = fam.downloads_for(name)
    for root in roots:
        folder = root / name
        if folder.is_dir() and fam.folder_only:
            return None
        if folder.is_dir():
            needed = [(d, d.missing(folder)) for d in downloads]
            needed = [(d, m) for d, m in needed if m]
            if not needed:
                return None
            return MissingModel(family, name, folder, [f for _, m in needed for f in m], [d for d, _ in needed],
                                node)
    folder = roots[0] / name
    if not roots[0].parent.is_dir():
        problem = (f"ComfyUI's models folder {roots[0].parent} does not exist: check the models folder given "
                   "(--models-dir, or --base-directory of the server).")
    elif not roots[0].is_dir():
        problem = f"The folder {roots[0]} does not exist yet; the command below creates it."
    else:
        problem = f"{roots[0]} has no folder named '{name}'."
    return MissingModel(family, name, folder, [], list(downloads), node, problem)


def graph_missing(prompt: Mapping, roots_of: Callable[[str], Sequence[Union[str, Path]]]) -> list[tuple[str, MissingModel]]:
    """Every missing model of an API prompt, as (node id, what is missing), in node-id order.

    Only the pack's loaders are looked at; a linked input (its value comes from another node) and the Whisper
    combos' "none" are skipped. Each model folder is reported once, under the first node that names it."""
    found, seen = [], set()
    for node_id in sorted(prompt, key=_id_order):
        node = prompt[node_id]
        spec = LOADERS.get(node.get("class_type")) if isinstance(node, Mapping) else None
        if spec is None:
            continue
        input_name, family = spec
        name = (node.get("inputs") or {}).get(input_name)
        if not isinstance(name, str) or not name or name in NONE_CHOICES or (family, name) in seen:
            continue
        seen.add((family, name))
        title = (node.get("_meta") or {}).get("title") or node.get("class_type")
        missing = check_model(family, name, roots_of(FAMILIES[family].folder), node=title)
        if missing is not None:
            found.append((str(node_id), missing))
    return found


def refusal(missing: Iterable[MissingModel]) -> str:
    """The refusal's text: one paragraph per missing model with its commands, then how to get `hf`."""
    missing = list(missing)
    if not missing:
        return ""
    count = len(missing)
    head = ("This workflow cannot run yet: 1 model is missing." if count == 1 else
            f"This workflow cannot run yet: {count} models are missing.")
    # A problem several models share (the models folder itself missing) is said once, under the head.
    shared = [p for p in dict.fromkeys(m.problem for m in missing) if p and sum(m.problem == p for m in missing) > 1]
    paragraphs = [head, *shared] + ["\n".join(m.sentences(m.problem in shared)) for m in missing]
    paragraphs.append(f"The `hf` command comes with {HF_HINT.split('#')[0].strip()}. Nothing is downloaded by the "
                      "pack; after downloading, press R in the editor (or restart) so the lists show the new folders.")
    return "\n\n".join(paragraphs)


def table_rows() -> list[dict]:
    """Every family's model downloads under the folder name the shipped workflows use, one row per command:
    folder inside models/, repository, family, command with ``<ComfyUI>/models``."""
    rows = []
    for fam in FAMILIES.values():
        for d in fam.downloads:
            folder = f"{fam.folder}/{fam.default_name}" + (f"/{d.into}" if d.into else "")
            rows.append({"folder": folder, "repo": d.repo,
                         "command": d.command(Path("<ComfyUI>/models") / fam.folder / fam.default_name),
                         "family": fam.folder, "download": d})
    return rows


def _quote(path: str) -> str:
    return f'"{path}"' if any(c.isspace() for c in path) else path


def _id_order(node_id) -> tuple:
    text = str(node_id)
    return (0, int(text), "") if text.isdigit() else (1, 0, text)

