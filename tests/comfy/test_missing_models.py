"""A workflow queued without its models is refused once, before anything runs, naming every missing model with its
folder and download command: by the server (ComfyUI's own validation answer), by scripts/run_workflow.py and by
the batch runner, in the same words.

Oracle: ComfyUI's validation response (node_errors as the core builds them from the loaders' validate_inputs) and
the history (nothing ran); the commands themselves are checked against the `hf` CLI in
tests/unit/test_model_downloads.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from scripts import run_workflow
from scripts.workflow.api import apply_overrides, load_workflow
from tests.workflow_cases import REPO_ROOT, shipped_api_twin

LOADERS_WITH_MODELS = ("BroadcastOmniVoiceLoader", "BroadcastMuseTalkLoader", "BroadcastDittoLoader")
ABSENT = {"OmniVoice Loader.model_name": "absent-omnivoice", "Ditto Loader.model_name": "absent-ditto"}


def _ditto_without_models(comfy) -> dict:
    prompt, _ = load_workflow(shipped_api_twin("broadcast_ditto"))
    return apply_overrides(prompt, ABSENT, comfy.object_info())


def _refused(comfy, prompt) -> dict:
    status, body = comfy.request("POST", "/prompt", {"prompt": prompt})
    assert status == 400, body
    return body["node_errors"]


def _by_title(prompt, node_errors, title):
    [node_id] = [nid for nid, n in prompt.items() if n["_meta"]["title"] == title]
    return node_errors[node_id]["errors"]


def test_the_queue_is_refused_once_with_every_missing_model_and_its_command(comfy):
    prompt = _ditto_without_models(comfy)
    history = comfy.get("/history")
    node_errors = _refused(comfy, prompt)
    assert comfy.get("/history").keys() == history.keys(), "something ran"
    voice, ditto = (_by_title(prompt, node_errors, t) for t in ("OmniVoice Loader", "Ditto Loader"))
    # One error per loader, under the input that names the model (not repeated under precision or backend).
    assert [e["extra_info"]["input_name"] for e in voice + ditto] == ["model_name", "model_name"]
    every = "\n".join(e["details"] for errs in node_errors.values() for e in errs["errors"])
    # The list is shown once: each download command appears exactly once in the whole answer.
    assert every.count("hf download k2-fsa/OmniVoice ") == 1 and every.count("hf download digital-avatar/") == 1
    full, pointer = voice[0]["details"], ditto[0]["details"]
    assert "2 models are missing" in full and "OmniVoice Loader needs" in full and "Ditto Loader needs" in full
    assert str(comfy.models_dir / "ditto" / "absent-ditto") in full
    assert "hf download" not in pointer and "'OmniVoice Loader'" in pointer
    for text in (full, pointer):   # plain sentences: no exception types or module paths
        assert "Error" not in text and "engines." not in text and "Traceback" not in text


def test_each_loader_checks_its_files_when_queued(comfy):
    """MuseTalk, Ditto and OmniVoice loaders each refuse a folder that exists but lacks files, under model_name
    only. (SAM3's folder needs only to exist when queued: its masks may come from the Mask Sequence Cache.)"""
    cases = {"broadcast_musetalk": ("musetalk", "musetalkV15/unet"),
             "broadcast_ditto": ("ditto", "ditto_pytorch/models/decoder.pth"),
             "tts_master": ("omnivoice", "audio_tokenizer/model.safetensors")}
    for stem, (family, missing_file) in cases.items():
        prompt, _ = load_workflow(shipped_api_twin(stem))
        [(node_id, node)] = [(nid, n) for nid, n in prompt.items()
                             if n["class_type"].lower() == f"broadcast{family}loader"]
        folder = comfy.models_dir / family / "partial-copy"
        (folder / "config.json").parent.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text("{}")
        node["inputs"]["model_name"] = "partial-copy"
        # Every other loader points at an absent folder too: where an earlier test left a working tiny model of
        # theirs, an output that does not need this loader (Audio Master) would validate and ComfyUI would queue
        # the rest (200 with node_errors) instead of refusing the prompt.
        for other in prompt.values():
            if other is not node and other["class_type"] in LOADERS_WITH_MODELS:
                other["inputs"]["model_name"] = "absent-model"
        node_errors = _refused(comfy, prompt)
        errors = node_errors[node_id]["errors"]
        assert [e["extra_info"]["input_name"] for e in errors] == ["model_name"], errors
        assert str(folder) in errors[0]["details"], errors       # its own refusal, or the pointer naming its folder
        every = "\n".join(e["details"] for errs in node_errors.values() for e in errs["errors"])
        assert missing_file in every and f"--local-dir {folder}" in every, every


def test_a_missing_sam3_folder_is_refused_under_model_name_alone(comfy):
    prompt, _ = load_workflow(shipped_api_twin("wardrobe_vace"))
    [(node_id, node)] = [(nid, n) for nid, n in prompt.items() if n["class_type"] == "BroadcastSam3Loader"]
    node["inputs"]["model_name"] = "absent-sam3"
    errors = _refused(comfy, prompt)[node_id]["errors"]
    assert [e["extra_info"]["input_name"] for e in errors] == ["model_name"], errors   # not under dtype too
    assert "hf download facebook/sam3" in errors[0]["details"] and "gated" in errors[0]["details"]


def test_run_workflow_prints_the_same_refusal_before_queueing(comfy, capsys, tmp_path):
    prompt = _ditto_without_models(comfy)
    path = tmp_path / "ditto_no_models.api.json"
    path.write_text(json.dumps(prompt))
    server_text = _by_title(prompt, _refused(comfy, prompt), "OmniVoice Loader")[0]["details"]
    history = comfy.get("/history")
    code = run_workflow.main([str(path), "--url", comfy.url])
    err = capsys.readouterr().err
    assert code == 3 and comfy.get("/history").keys() == history.keys()
    assert server_text.split("model_name: ", 1)[1] in err
    assert "is not in models/" not in err          # no second, command-less list of the same models


def test_the_batch_runner_refuses_with_the_same_list(comfy, tmp_path):
    prompt = _ditto_without_models(comfy)
    server_text = _by_title(prompt, _refused(comfy, prompt), "OmniVoice Loader")[0]["details"]
    batch = tmp_path / "no_models.jsonl"
    batch.write_text("".join(json.dumps({"name": f"item-{i}", "workflow": str(shipped_api_twin("broadcast_ditto")),
                                         "set": {**ABSENT, "News Script.text": f"Story {i}."}}) + "\n"
                             for i in (1, 2)))
    proc = subprocess.run([os.environ.get("BA_PYTHON") or sys.executable, str(REPO_ROOT / "scripts" / "run_batch.py"),
                           str(batch), "--url", comfy.url, "--no-progress", "--out-dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert server_text.split("model_name: ", 1)[1] in proc.stderr
    assert proc.stderr.count("hf download k2-fsa/OmniVoice") == 1, proc.stderr   # two jobs, one list
