"""How the suite runs each shipped workflow on the test server: the registry `CASES`.

The browser test loads every `workflows/<stem>.json` in the real frontend and queues it; the `comfy run` test queues
every `workflows/api/<stem>.api.json`. Both look the stem up here. A case's `prepare(comfy)` creates what the workflow
needs on the test server (tiny models under `comfy.models_dir/<family>/<name>`, sample media in `comfy.input_dir`)
and returns overrides ``{"<node id or title>.<input>": value}`` applied to the API prompt before queueing. It is
called once per test that queues the workflow, so it must be idempotent (reuse what already exists).

- `runs_on_test_comfy=False`: the workflow needs something the test machine cannot have (real weights, a GPU); the
  browser test only loads it.
- `expected_missing`: node types the test server is known to lack (a peer pack the workflow uses); the browser test
  checks that exactly these are missing and then only loads it.
- `core_nodes`: core node types that only newer ComfyUI cores have (MiniMax H3 is in 0.33.0, not in 0.3.75). On a
  server that lacks them they count as expected missing (the workflow is only loaded); on one that has them the
  workflow runs. `expected_missing_on(server node types)` is what the tests compare against: the feature is
  detected from the server, never from a version string.
- `check(comfy, history_entry)`: what the finished run must have produced (its output files), called after the
  editor's run and after the `comfy run` run alike.

A workflow with no entry gets `WorkflowCase()` (no overrides). Families add their entry with a small local edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
# The editor's template browser lists every `*.json` directly in `workflows/`, so only UI-format files live there;
# their API twins (for headless queueing) are in `workflows/api/`. The harness's own files stay side by side.
TEMPLATE_DIR = REPO_ROOT / "workflows"
API_DIR = TEMPLATE_DIR / "api"
HARNESS_DIR = REPO_ROOT / "tests" / "data" / "workflows"


def _no_overrides(comfy: Any) -> dict:
    return {}


def _no_check(comfy: Any, entry: dict) -> None:
    return None


@dataclass(frozen=True)
class WorkflowCase:
    prepare: Callable[[Any], dict] = _no_overrides
    runs_on_test_comfy: bool = True
    expected_missing: tuple = field(default_factory=tuple)
    core_nodes: tuple = field(default_factory=tuple)
    check: Callable[[Any, dict], None] = _no_check

    def expected_missing_on(self, available) -> tuple:
        """The node types that must be missing on a server offering `available` (e.g. its /object_info keys)."""
        return tuple(self.expected_missing) + tuple(n for n in self.core_nodes if n not in set(available))


# -- harness self-check (tests/data/workflows): core nodes only ------------------------------------------------------
def _harness_core_preview(comfy: Any) -> dict:
    return {"Blank.width": 40, "Blank.color": 0x3366CC}


# -- export (issue 2) -----------------------------------------------------------------------------------------------
def _demo_export(comfy: Any) -> dict:
    """The sample clip the demo uses, made once in the server's input folder."""
    from scripts import sample_clip

    name = sample_clip.SAMPLE_NAME
    if not (comfy.input_dir / name).exists():
        sample_clip.make_sample_clip(comfy.input_dir / name)
    return {}


# -- wardrobe VACE (issue 8) ----------------------------------------------------------------------------------------
def _wardrobe_vace(comfy: Any) -> dict:
    """Tiny random Wan 2.1 VACE weights, the synthetic wardrobe clip, its masks in the mask cache (no SAM3)."""
    from tests.fixtures import vace_wardrobe

    return vace_wardrobe.prepare(comfy)


# -- wardrobe (issue 3) ---------------------------------------------------------------------------------------------
WARDROBE_CHECK_FRAMES = 24


def _wardrobe_mask_check(comfy: Any) -> dict:
    """The sample clip plus a lossless mask video (red garment, green hands) at its size: no weights needed."""
    from scripts import sample_clip
    from tests.fixtures.wardrobe_clip import write_mask_video

    clip = comfy.input_dir / sample_clip.SAMPLE_NAME
    if not clip.exists():
        sample_clip.make_sample_clip(clip)
    masks = comfy.input_dir / "wardrobe_check_masks.mp4"
    if not masks.exists():
        write_mask_video(masks, WARDROBE_CHECK_FRAMES, 448, 256)
    return {"Load Clip.video": sample_clip.SAMPLE_NAME, "Load Clip.frame_cap": WARDROBE_CHECK_FRAMES,
            "Load Mask Video.video": masks.name, "Load Mask Video.frame_cap": WARDROBE_CHECK_FRAMES}


H3_CORE_NODES = ("EmptyMiniMaxH3LatentAV", "MiniMaxH3ReferenceToVideo", "MiniMaxH3SigmaShift")


def _wardrobe_minimax_h3(comfy: Any) -> dict:
    """On a core with MiniMax H3 (0.33.0): tiny random H3, the synthetic clip, its masks and conditioning cached.
    On an older core it is only loaded; its garment reference image is then a plain PNG."""
    if all(n in comfy.object_info() for n in H3_CORE_NODES):
        from tests.fixtures import h3_wardrobe

        return h3_wardrobe.prepare(comfy)
    from PIL import Image

    ref = comfy.input_dir / "sapphire_dress_3view.png"
    if not ref.exists():
        Image.new("RGB", (96, 32), (20, 50, 160)).save(ref)
    return {}


def _wardrobe_core_sam3_masks(comfy: Any) -> dict:
    """On a core with SAM3 (0.33.0): the synthetic clip and its masks cached under the workflow's key (core's SAM3
    cannot be made small); on an older core it is only loaded."""
    if "SAM3_VideoTrack" not in comfy.object_info():
        return {}
    from tests.fixtures import core_sam3_wardrobe

    return core_sam3_wardrobe.prepare(comfy)


# -- ditto (issue 7) -----------------------------------------------------------------------------------------------
def _ditto_talking_head(comfy: Any) -> dict:
    """Tiny random Ditto (upstream layout), a synthetic portrait and 24 kHz speech in the input folder."""
    from tests.fixtures import tiny_ditto

    return tiny_ditto.prepare_workflow(comfy)


# -- musetalk (issue 6) --------------------------------------------------------------------------------------------
def _musetalk_lipsync(comfy: Any) -> dict:
    """Tiny random MuseTalk (upstream layout), an astronaut avatar loop clip and a speech-like wav."""
    from tests.fixtures import tiny_musetalk

    return tiny_musetalk.prepare_workflow(comfy)


# -- omnivoice (issue 5) -------------------------------------------------------------------------------------------
def _tts_master(comfy: Any) -> dict:
    """Tiny random OmniVoice and a synthetic 3 s reference clip in the input folder."""
    from tests.fixtures import tiny_omnivoice

    return tiny_omnivoice.prepare_tts_workflow(comfy)


def _tts_dialogue(comfy: Any) -> dict:
    """Tiny random OmniVoice and the two saved voices the dialogue casts (issue 16)."""
    from tests.fixtures import tiny_omnivoice

    return tiny_omnivoice.prepare_dialogue_workflow(comfy)


# -- the broadcast (issue 12): script + saved voice -> speech -> master -> lip-sync -> export --------------------------
def _broadcast_musetalk(comfy: Any) -> dict:
    """Tiny OmniVoice + tiny MuseTalk, the 3 s voice clip and the astronaut presenter loop."""
    from tests.fixtures import broadcast

    return broadcast.prepare_musetalk(comfy)


def _broadcast_ditto(comfy: Any) -> dict:
    """Tiny OmniVoice + tiny Ditto, the 3 s voice clip and the synthetic presenter loop."""
    from tests.fixtures import broadcast

    return broadcast.prepare_ditto(comfy)


def _broadcast_wardrobe(comfy: Any) -> dict:
    """The VACE swap's tiny fixture feeding the MuseTalk broadcast (tiny OmniVoice + tiny MuseTalk)."""
    from tests.fixtures import broadcast

    return broadcast.prepare_wardrobe(comfy)


def _broadcast_output(comfy: Any, entry: dict) -> None:
    """A/V durations within a frame of the mastered speech; the MP4's audio is that speech (by correlation)."""
    from tests.fixtures import broadcast

    broadcast.check_output(comfy, entry)


CASES: dict[str, WorkflowCase] = {
    "harness_core_preview": WorkflowCase(prepare=_harness_core_preview),
    "demo_export": WorkflowCase(prepare=_demo_export),
    "wardrobe_mask_check": WorkflowCase(prepare=_wardrobe_mask_check),
    # Core's MiniMax H3 nodes are in ComfyUI 0.33.0, not in 0.3.75: run on the one, only loaded on the other.
    "wardrobe_minimax_h3": WorkflowCase(prepare=_wardrobe_minimax_h3, core_nodes=H3_CORE_NODES),
    # Core's SAM3 nodes are in ComfyUI 0.33.0, not in 0.3.75.
    "wardrobe_core_sam3_masks": WorkflowCase(prepare=_wardrobe_core_sam3_masks, core_nodes=("SAM3_VideoTrack",)),
    "wardrobe_vace": WorkflowCase(prepare=_wardrobe_vace),
    "ditto_talking_head": WorkflowCase(prepare=_ditto_talking_head),
    "tts_master": WorkflowCase(prepare=_tts_master),
    "tts_dialogue": WorkflowCase(prepare=_tts_dialogue),
    "musetalk_lipsync": WorkflowCase(prepare=_musetalk_lipsync),
    "broadcast_musetalk": WorkflowCase(prepare=_broadcast_musetalk, check=_broadcast_output),
    "broadcast_ditto": WorkflowCase(prepare=_broadcast_ditto, check=_broadcast_output),
    "broadcast_wardrobe": WorkflowCase(prepare=_broadcast_wardrobe, check=_broadcast_output),
    # The UMT5-XXL text encoder (about 11 GB) cannot be made small: this workflow is only loaded.
    "wardrobe_vace_prompt": WorkflowCase(runs_on_test_comfy=False),
}


def case_for(stem: str) -> WorkflowCase:
    return CASES.get(stem, WorkflowCase())


def registration_hint(stem: str) -> str:
    """Added to a failure message when the workflow has no case yet."""
    if stem in CASES:
        return ""
    return (f"\n(workflow '{stem}' has no entry in tests/workflow_cases.py: add one whose prepare() creates its tiny "
            "models and inputs on the test server, or mark it runs_on_test_comfy=False if it needs real weights)")


def stem_of(path: Path) -> str:
    name = path.name
    return name[: -len(".api.json")] if name.endswith(".api.json") else name[: -len(".json")]


def shipped_api_twin(stem: str) -> Path:
    """`workflows/api/<stem>.api.json`: the API-format twin of the shipped `workflows/<stem>.json`."""
    return API_DIR / f"{stem}.api.json"


def ui_workflows() -> list[Path]:
    """Every UI-format workflow file (`*.json` that is not `*.api.json`), shipped ones first."""
    return [p for d in (TEMPLATE_DIR, HARNESS_DIR) for p in sorted(d.glob("*.json")) if not p.name.endswith(".api.json")]


def api_workflows() -> list[Path]:
    """Every API-format workflow file (`*.api.json`), shipped ones first."""
    return [p for d in (API_DIR, HARNESS_DIR) for p in sorted(d.glob("*.api.json"))]


def workflow_id(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))
