"""A seeded fuzz of every pack node through a real ComfyUI: malformed but schema-valid API prompts.

Each case takes one shipped workflow (prepared as the suite runs it: tiny models, sample media) or one small chain
of its own (for nodes no runnable workflow executes), and changes ONE input of ONE pack node to an edge case:
NaN and +-inf floats, the minimum and maximum numbers, empty, huge and hostile strings, every combo option and
names that are not options, missing and corrupt files, and, for linked inputs, 1-pixel and odd-sized images,
masks that do not match the frames, and empty, 1-sample, silent, clipped and NaN audio.

What a case may do: run, or be refused before it runs (ComfyUI's validation or the node's `validate_inputs`), or fail
in a pack node with an `InputError` whose message starts with the name of one of that node's inputs. What it must
never do: fail in a pack node with any other exception (a raw error reaching the user), be refused by a pack
node's `validate_inputs` with a reason that does not start with one of its inputs, crash validation, fail in a core
node downstream of a pack node (the pack handed on what the core could not take), or kill the server. A failure
in the core node that makes a linked edge case (`PROVIDER_ID`: a corrupt file through Load Image) is counted, not
judged.

`run_fuzz` is used by tests/comfy/test_fuzz_nodes.py (a bounded, seeded sample in CI) and by hand:
`BA_FUZZ_CASES=all bash scripts/test.sh tests/comfy/test_fuzz_nodes.py` runs every case.
"""
from __future__ import annotations

import copy
import json
import math
import random
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

PACK_MODULE = "custom_nodes.broadcast_avatar"
USER_ERRORS = {"InputError", "ModelFilesMissing"}
WIDGETS = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}

HOSTILE_STRINGS = [
    "", " ", "\n\n\t", "x" * 5000, "../../../../etc/passwd", "/etc/passwd", "C:\\Windows\\win.ini",
    "bad\x00name", "broadcast/" + "a" * 300, "a/" * 200, "💥🎬 ñandú", "%s%n{0}{}", "<script>alert(1)</script>",
    "CON", ".", "..", "-1", "nan",
]
FLOATS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324]
INTS = [0, -1, 2 ** 63 - 1, -(2 ** 63), 2 ** 31, -(2 ** 31)]

AUDIO_FILES = ("fuzz_empty.wav", "fuzz_one_sample.wav", "fuzz_silent.wav", "fuzz_clipped.wav", "fuzz_nan.wav",
               "fuzz_corrupt.wav")
CORRUPT_FILES = ("fuzz_corrupt.mp4", "fuzz_corrupt.png")
MISSING_FILE = "fuzz_missing_file.mp4"
PROVIDER_ID = "fuzz_provider"   # the core node that makes a linked edge case (an odd-sized image, a bad clip)


def write_hostile_media(input_dir: Path) -> None:
    """Edge-case audio and corrupt files in the server's input folder (idempotent)."""
    import soundfile as sf

    input_dir.mkdir(parents=True, exist_ok=True)
    sr = 16000
    t = np.arange(sr) / sr
    clips = {
        "fuzz_one_sample.wav": np.array([0.5], np.float32),
        "fuzz_silent.wav": np.zeros(sr, np.float32),
        "fuzz_clipped.wav": np.clip(3.0 * np.sin(2 * np.pi * 220 * t), -1, 1).astype(np.float32),
        "fuzz_nan.wav": np.where(np.arange(sr) % 7 == 0, np.nan, 0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32),
    }
    for name, samples in clips.items():
        if not (input_dir / name).exists():
            sf.write(str(input_dir / name), samples, sr, subtype="FLOAT")
    if not (input_dir / "fuzz_empty.wav").exists():
        with wave.open(str(input_dir / "fuzz_empty.wav"), "wb") as w:  # a valid header, no samples
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(sr)
    for name in ("fuzz_corrupt.wav",) + CORRUPT_FILES:
        if not (input_dir / name).exists():
            (input_dir / name).write_bytes(b"\x00\x01not a media file" * 64)


# -- link replacements: core nodes making edge-case images and masks, the pack's audio loader on hostile files ----
def image_providers() -> list[dict]:
    return [{"class_type": "EmptyImage", "inputs": {"width": w, "height": h, "batch_size": b, "color": 0x808080}}
            for w, h, b in ((1, 1, 1), (7, 3, 2), (65, 33, 3))]


def mask_providers() -> list[dict]:
    return [{"class_type": "SolidMask", "inputs": {"value": v, "width": w, "height": h}}
            for v, w, h in ((1.0, 1, 1), (0.5, 13, 7), (0.0, 64, 64))]


def audio_providers() -> list[dict]:
    return [{"class_type": "BroadcastLoadAudio",
             "inputs": {"audio_file": name, "start_seconds": 0.0, "duration_seconds": 0.0}}
            for name in AUDIO_FILES[:-1]]  # the corrupt one fails in the loader itself (a case of its own)


LINK_PROVIDERS: dict[str, Callable[[], list]] = {"IMAGE": image_providers, "MASK": mask_providers,
                                                 "AUDIO": audio_providers}


@dataclass
class Case:
    base: str                 # workflow stem or chain name
    node_id: str
    class_type: str
    input_name: str
    value: Any                # a widget value, or a provider node dict for a link
    is_link: bool = False

    def describe(self) -> str:
        shown = self.value if not self.is_link else f"<{self.value['class_type']} {self.value['inputs']}>"
        text = repr(shown)
        return f"{self.base}: {self.class_type}.{self.input_name} = {text[:120]}"


@dataclass
class Outcome:
    ran: int = 0
    refused: int = 0
    input_errors: int = 0
    core_errors: int = 0
    problems: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def cases(self) -> int:
        return self.ran + self.refused + self.input_errors + self.core_errors + len(self.problems)


def pack_nodes(object_info: dict) -> dict:
    return {n: s for n, s in object_info.items() if str(s.get("python_module", "")).startswith(PACK_MODULE)}


def input_specs(spec: dict) -> dict:
    out = {}
    for section in ("required", "optional"):
        out.update((spec.get("input") or {}).get(section, {}))
    return out


def spec_kind(input_spec: list) -> str:
    kind = input_spec[0]
    return "COMBO" if isinstance(kind, list) else str(kind)


def widget_values(input_spec: list) -> list:
    kind = spec_kind(input_spec)
    opts = input_spec[1] if len(input_spec) > 1 and isinstance(input_spec[1], dict) else {}
    if kind == "FLOAT":
        extra = [opts[k] for k in ("min", "max") if isinstance(opts.get(k), (int, float))]
        return FLOATS + extra
    if kind == "INT":
        extra = [opts[k] for k in ("min", "max") if isinstance(opts.get(k), int)]
        return INTS + extra
    if kind == "STRING":
        return HOSTILE_STRINGS
    if kind == "BOOLEAN":
        return [True, False]
    if kind == "COMBO":
        options = opts.get("options") if isinstance(input_spec[0], str) else input_spec[0]
        return list(options or []) + ["not-an-option", "", MISSING_FILE, *CORRUPT_FILES, "fuzz_corrupt.wav"]
    return []


def cases_for(base: str, prompt: dict, object_info: dict) -> list[Case]:
    """Every single-input change of every pack node in `prompt`."""
    packs = pack_nodes(object_info)
    out = []
    for node_id, node in prompt.items():
        class_type = node.get("class_type")
        if class_type not in packs:
            continue
        for name, spec in input_specs(packs[class_type]).items():
            kind = spec_kind(spec)
            current = node.get("inputs", {}).get(name)
            linked = isinstance(current, list) and len(current) == 2 and isinstance(current[0], str)
            if kind in WIDGETS and not linked:
                out.extend(Case(base, node_id, class_type, name, v) for v in widget_values(spec))
            elif any(k in LINK_PROVIDERS for k in kind.split(",")):     # "IMAGE,BROADCAST_FRAME_STREAM": a union
                provide = next(LINK_PROVIDERS[k] for k in kind.split(",") if k in LINK_PROVIDERS)
                out.extend(Case(base, node_id, class_type, name, p, is_link=True) for p in provide())
    return out


def apply_case(prompt: dict, case: Case) -> dict:
    out = copy.deepcopy(prompt)
    if case.is_link:
        provider_id = PROVIDER_ID
        out[provider_id] = copy.deepcopy(case.value)
        out[case.node_id]["inputs"][case.input_name] = [provider_id, 0]
    else:
        out[case.node_id]["inputs"][case.input_name] = case.value
    return out


def judge(case: Case, outcome: Outcome, comfy, prompt: dict, object_info: dict, timeout: float) -> None:
    """Run one case and file its result in `outcome`."""
    from scripts.comfyui.client import PromptFailed

    packs = pack_nodes(object_info)
    try:
        prompt_id = comfy.queue(prompt)
    except PromptFailed as exc:
        node_errors = exc.payload.get("node_errors") or {}
        raw = [e for errs in node_errors.values() for e in errs.get("errors", [])
               if str(e.get("type", "")).startswith("exception_during")]
        unnamed = unnamed_refusals(node_errors, packs)
        if raw:
            outcome.problems.append(f"{case.describe()}: validation crashed: {raw[0].get('details', '')[:300]}")
        elif unnamed:
            outcome.problems.append(f"{case.describe()}: refused without naming the input: {unnamed[0][:300]}")
        else:
            outcome.refused += 1
        return
    try:
        entry = comfy.wait(prompt_id, timeout)
    except TimeoutError:
        outcome.problems.append(f"{case.describe()}: did not finish within {timeout:.0f} s")
        return
    status = entry.get("status") or {}
    failure = None
    for kind, payload in status.get("messages", []):
        if kind == "execution_error":
            failure = payload
    if failure is None:
        outcome.ran += 1
        return
    node_type = failure.get("node_type")
    if node_type not in packs:
        if str(failure.get("node_id")) == PROVIDER_ID:   # the core node making the edge case itself refused it
            outcome.core_errors += 1
        else:                                            # a pack node handed on what a core node could not take
            outcome.problems.append(f"{case.describe()}: raw {failure.get('exception_type', '')} in core node "
                                    f"{node_type} (node {failure.get('node_id')}) downstream of the pack: "
                                    f"{str(failure.get('exception_message', '')).strip()[:300]}")
        return
    message = str(failure.get("exception_message", "")).strip()
    exc_type = failure.get("exception_type", "")
    names = set(input_specs(packs[node_type]))
    named = message.split(":", 1)[0] in names
    if exc_type.rsplit(".", 1)[-1] not in USER_ERRORS:
        outcome.problems.append(f"{case.describe()}: raw {exc_type} in {node_type}: {message[:300]}")
    elif not named:
        outcome.problems.append(f"{case.describe()}: {node_type}'s error does not start with one of its inputs "
                                f"({', '.join(sorted(names))}): {message[:200]}")
    else:
        outcome.input_errors += 1


def unnamed_refusals(node_errors: dict, packs: dict) -> list[str]:
    """A pack node's own refusals (its `validate_inputs`) whose reason does not start with one of its inputs.

    ComfyUI words a `validate_inputs` refusal as ``"<input> - <reason>"`` once per input it was given (core's
    execution.py), so the reason after the first " - " is the node's own text; its range and type checks name the
    input themselves (``extra_info.input_name``)."""
    found = []
    for errs in node_errors.values():
        node_type = errs.get("class_type")
        if node_type not in packs:
            continue
        names = set(input_specs(packs[node_type]))
        for err in errs.get("errors", []):
            if err.get("type") != "custom_validation_failed":
                continue
            details = str(err.get("details", ""))
            reason = details.split(" - ", 1)[1] if " - " in details else ""
            if reason.split(":", 1)[0].strip() not in names:
                found.append(f"{node_type}: {details}")
    return found


def ancestors(prompt: dict, node_id: str) -> set:
    seen, todo = set(), [node_id]
    while todo:
        nid = todo.pop()
        for value in (prompt.get(nid) or {}).get("inputs", {}).values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and value[0] not in seen:
                seen.add(value[0])
                todo.append(value[0])
    return seen


def node_bases(prompts: dict[str, dict], object_info: dict) -> dict[str, tuple[str, dict]]:
    """One small prompt per pack node type: the node, what feeds it (ids and inputs as in the source prompt, so
    ComfyUI's cache reuses them from one case to the next) and a PreviewAny on its first output. A change to the
    node then re-runs only the node."""
    packs = pack_nodes(object_info)
    out: dict = {}
    for base, prompt in prompts.items():
        for node_id, node in prompt.items():
            class_type = node.get("class_type")
            if class_type not in packs or class_type in out:
                continue
            small = {nid: copy.deepcopy(prompt[nid]) for nid in ancestors(prompt, node_id) | {node_id}}
            if packs[class_type].get("output"):
                small["fuzz_out"] = {"class_type": "PreviewAny", "inputs": {"source": [node_id, 0]}}
            out[class_type] = (f"{base}/{node_id}", small)
    return out


def run_fuzz(comfy, prompts: dict[str, dict], object_info: dict, seed: int, per_node: Optional[int],
             max_seconds: float, not_executable: tuple = (), case_timeout: float = 240) -> Outcome:
    """For every pack node (in the order of the source prompts, so shared upstream stays cached): run its small
    base prompt unchanged, then `per_node` of its cases (all when None), drawn with `seed`; stop at `max_seconds`."""
    bases = node_bases(prompts, object_info)
    rng = random.Random(seed)
    outcome = Outcome()
    outcome.total_cases = 0
    outcome.nodes = []
    start = time.monotonic()
    for index, (class_type, (name, base)) in enumerate(bases.items()):
        cases = [c for c in cases_for(name, base, object_info) if c.class_type == class_type]
        outcome.total_cases += len(cases)
        now = time.monotonic() - start
        # Every node gets its base and one case whatever the budget (coverage is the point); more cases only while
        # the node stays within its share of what is left, so a slow family cannot starve the nodes after it.
        share_end = now + max(0.0, max_seconds - now) / (len(bases) - index)
        if class_type not in not_executable:
            try:
                comfy.run(base, timeout=case_timeout)
            except Exception as exc:  # the unchanged base must run, or its cases prove nothing
                outcome.problems.append(f"{name} ({class_type}): the unchanged base failed: {str(exc)[:300]}")
                continue
        rng.shuffle(cases)
        for i, case in enumerate(cases[:per_node] if per_node is not None else cases):
            if i and time.monotonic() - start > (share_end if per_node is not None else max_seconds):
                break
            before = len(outcome.problems)
            judge(case, outcome, comfy, apply_case(base, case), object_info, case_timeout)
            for problem in outcome.problems[before:]:
                print(f"[fuzz] PROBLEM {problem}", flush=True)
            if not comfy.alive():
                outcome.problems.append(f"{case.describe()}: the server died")
                return outcome
        outcome.nodes.append(class_type)
    outcome.seconds = time.monotonic() - start
    return outcome


def stray_files(*folders: Path) -> list[str]:
    """Files that look half-written: partial exports, cache writes never renamed into place."""
    out = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            name = path.name
            if ".partial" in name or name.startswith((".tmp-", ".trash-")) or name.endswith((".tmp", ".part")):
                out.append(str(path.relative_to(folder)))
    return out


def dump(outcome: Outcome) -> str:
    return json.dumps({"nodes": len(getattr(outcome, "nodes", [])), "cases": outcome.cases, "ran": outcome.ran, "refused": outcome.refused,
                       "input_errors": outcome.input_errors, "core_errors": outcome.core_errors,
                       "problems": len(outcome.problems), "seconds": round(outcome.seconds, 1)})
