"""Fuzz of every pack node through the real server (tests/fuzz.py): every error is an InputError naming an input,
validation never crashes, the server never dies, nothing is left half-written.

CI runs a bounded, seeded sample: BA_FUZZ_SEED (default 15), BA_FUZZ_CASES cases per node (default 3; ``all`` for
every case), BA_FUZZ_SECONDS (default 240). The figures are printed (run with -s to see them).
"""
from __future__ import annotations

import json
import os

import pytest

from scripts.run_workflow import prepare_prompt
from tests import fuzz
from tests.workflow_cases import API_DIR, CASES, case_for


def runnable(object_info: dict) -> tuple:
    """Every shipped workflow the suite runs on this server's core (the API twins, prepared as the suite does)."""
    return tuple(stem for stem, case in CASES.items()
                 if case.runs_on_test_comfy and (API_DIR / f"{stem}.api.json").is_file()
                 and not case.expected_missing_on(object_info))


# Pack nodes no base prompt here can execute, and why.
NOT_EXECUTABLE_HERE = {
    # Its only link is core's SAM3_TRACK_DATA, which ComfyUI 0.3.75 has no node to make (tests/unit/test_sam3_core_track.py
    # covers the engine; its widgets are still fuzzed up to validation).
    "BroadcastSam3TrackToMasks": "SAM3_TRACK_DATA does not exist in ComfyUI 0.3.75",
}


def defaults(object_info: dict, class_type: str, **links) -> dict:
    """A node with every required widget at its default (a combo's default or first option) plus `links`."""
    inputs = {}
    for name, spec in (object_info[class_type]["input"].get("required") or {}).items():
        kind = fuzz.spec_kind(spec)
        opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
        if kind in fuzz.WIDGETS:
            if "default" in opts:
                inputs[name] = opts["default"]
            elif kind == "COMBO":
                inputs[name] = (opts.get("options") or spec[0])[0]
    inputs.update(links)
    return {"class_type": class_type, "inputs": inputs}


def own_chains(comfy, object_info: dict) -> dict:
    """Small prompts for the nodes no runnable workflow executes: SAM3 (the vace workflow hits its mask cache),
    Speech Verify, QC, and the track-data node (refused at validation on this core)."""
    from scripts import sample_clip
    from tests.fixtures.tiny_musetalk import write_inputs
    from tests.fixtures.tiny_sam3 import install_tiny_sam3
    from tests.fixtures.tiny_whisper import install_tiny_whisper

    clip = comfy.input_dir / sample_clip.SAMPLE_NAME
    if not clip.exists():
        sample_clip.make_sample_clip(clip)
    install_tiny_sam3(comfy.models_dir)
    whisper = install_tiny_whisper(comfy.models_dir).name
    _loop, speech = write_inputs(comfy.input_dir, loop_frames=6, fps=10.0, seconds=1.0)
    video = {"class_type": "BroadcastLoadVideo",
             "inputs": {"video": clip.name, "frame_cap": 3, "skip_first_frames": 0, "target_fps": 0.0}}
    audio = {"class_type": "BroadcastLoadAudio", "inputs": {"audio_file": speech, "start_seconds": 0.0,
                                                            "duration_seconds": 0.0}}
    sam3 = {"1": video, "2": defaults(object_info, "BroadcastSam3Loader", model_name="sam3"),
            "3": defaults(object_info, "BroadcastSam3VideoMask", sam3_model=["2", 0], images=["1", 0]),
            "4": {"class_type": "MaskToImage", "inputs": {"mask": ["3", 0]}},
            "5": {"class_type": "PreviewImage", "inputs": {"images": ["4", 0]}}}
    verify = {"1": audio, "2": defaults(object_info, "BroadcastSpeechVerify", audio=["1", 0],
                                        expected_text="hello", whisper_model=whisper)}
    qc = {"1": video, "2": defaults(object_info, "BroadcastQC", images=["1", 0], audio=["1", 1], fps=["1", 2])}
    track = {"1": defaults(object_info, "BroadcastSam3TrackToMasks"),
             "2": {"class_type": "MaskToImage", "inputs": {"mask": ["1", 0]}},
             "3": {"class_type": "PreviewImage", "inputs": {"images": ["2", 0]}}}
    chains = {"sam3": sam3, "speech_verify": verify, "track_to_masks": track}
    if "BroadcastQC" in object_info:
        chains["qc"] = qc
    return chains


@pytest.fixture(scope="module")
def bases(comfy):
    info = comfy.object_info()
    fuzz.write_hostile_media(comfy.input_dir)
    out = own_chains(comfy, info)  # first: the vace workflow's SAM3 nodes point at an empty folder on purpose
    for stem in runnable(info):
        overrides = case_for(stem).prepare(comfy)
        workflow = json.loads((API_DIR / f"{stem}.api.json").read_text(encoding="utf-8"))
        out[stem] = prepare_prompt(workflow, overrides, info)
    # A node that only a newer core's workflow runs (e.g. the H3 Conditioning Cache on 0.3.75) is fuzzed up to
    # validation here; the suite's run on the newer core fuzzes it for real.
    present = {n["class_type"] for p in out.values() for n in p.values()}
    for class_type in sorted(set(fuzz.pack_nodes(info)) - present):
        out[f"validation_only/{class_type}"] = {"1": defaults(info, class_type)}
        NOT_EXECUTABLE_HERE.setdefault(class_type, "only a newer core's workflow runs it")
    yield info, out
    # The fuzzed prompts (NaN and inf among their values) stay in the session server's /history, which ComfyUI
    # serves as JSON with bare NaN: the editor opened by later tests would fail to parse it. Leave no history behind.
    comfy.post("/history", {"clear": True})


def test_every_pack_node_is_fuzzed(bases):
    info, prompts = bases
    present = {n["class_type"] for p in prompts.values() for n in p.values()}
    missing = sorted(set(fuzz.pack_nodes(info)) - present)
    assert missing == [], f"pack nodes in no fuzz base prompt: {missing}"


def test_fuzz_gives_only_input_errors_and_leaves_nothing_half_written(comfy, bases):
    info, prompts = bases
    raw = os.environ.get("BA_FUZZ_CASES", "3")
    outcome = fuzz.run_fuzz(comfy, prompts, info, seed=int(os.environ.get("BA_FUZZ_SEED", "15")),
                            per_node=None if raw == "all" else int(raw),
                            max_seconds=float(os.environ.get("BA_FUZZ_SECONDS", "240")),
                            not_executable=tuple(NOT_EXECUTABLE_HERE))
    print(f"\n[fuzz] {fuzz.dump(outcome)} of {outcome.total_cases} possible cases")
    assert comfy.alive(), "the server died"
    assert outcome.problems == [], f"{len(outcome.problems)} of {outcome.cases} cases gave raw errors:\n" + \
        "\n".join(outcome.problems[:40])
    unfuzzed = sorted(set(fuzz.pack_nodes(info)) - set(outcome.nodes))
    assert unfuzzed == [], f"nodes without a single case: {unfuzzed} ({fuzz.dump(outcome)})"
    stray = fuzz.stray_files(comfy.output_dir, comfy.temp_dir, comfy.models_dir, comfy.input_dir)
    assert stray == [], f"half-written files left behind: {stray}"


def _base_of(prompts: dict, info: dict, class_type: str) -> tuple[str, dict]:
    name, base = fuzz.node_bases(prompts, info)[class_type]
    node_id = next(nid for nid, n in base.items() if n["class_type"] == class_type)
    return node_id, base


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_float_is_an_input_error_naming_it(comfy, bases, value):
    """The issue's own example: NaN reached an integer conversion ("cannot convert float NaN to integer"). ComfyUI's
    range check lets NaN through; every pack node's Float inputs refuse it (and inf) by name."""
    info, prompts = bases
    node_id, base = _base_of(prompts, info, "BroadcastLoadAudio")
    base[node_id]["inputs"]["start_seconds"] = value
    err = comfy.run_error(base)
    if err["exception_type"] == "prompt_rejected":       # +-inf is outside the input's range: refused up front
        assert abs(value) == float("inf") and "start_seconds" in err["exception_message"]
        return
    assert err["exception_type"].endswith("InputError") and err["node_type"] == "BroadcastLoadAudio"
    assert err["exception_message"].startswith(f"start_seconds: expected a finite number, got {value!r}")


def test_an_overlong_filename_prefix_is_refused_before_the_file_system(comfy, bases):
    """The issue's other example: a raw `OSError: [Errno 36] File name too long`."""
    info, prompts = bases
    node_id, base = _base_of(prompts, info, "BroadcastExportVideo")
    base[node_id]["inputs"]["filename_prefix"] = "broadcast/" + "n" * 300
    err = comfy.run_error(base)                 # Export Video checks its prefix at validation: refused up front
    assert err["exception_type"] in ("prompt_rejected", "InputError") or err["exception_type"].endswith("InputError")
    assert "filename_prefix: expected names of at most 200 bytes" in err["exception_message"]
    assert "File name too long" not in err["exception_message"]
