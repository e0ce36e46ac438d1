"""comfy-cli, the official headless client, against the test server and on the pack's metadata.

Every `workflows/api/*.api.json` (picked up automatically) is queued with
`comfy --json run --workflow <file> --host 127.0.0.1 --port <port> --wait --timeout 300` after the case's overrides,
and must exit 0 with `ok` and status `completed`. comfy-cli runs with its own HOME, outside any ComfyUI tree, with
telemetry and update checks off, so it neither prompts nor writes into the user's config.
`comfy node validate` checks pyproject.toml in a temporary copy (it leaves a .ruff_cache behind).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts.workflow.api import apply_overrides, load_workflow
from tests.workflow_cases import REPO_ROOT, api_workflows, case_for, registration_hint, stem_of, workflow_id

WORKFLOWS = api_workflows()
RUN_TIMEOUT = 300


def _comfy_cli() -> str:
    cli = os.environ.get("BA_COMFY") or shutil.which("comfy")
    if not cli or not os.path.exists(cli):
        pytest.skip("comfy-cli is not installed (scripts/env.sh installs it and exports BA_COMFY)")
    return cli


def _cli_env(home: Path) -> dict:
    env = dict(os.environ, HOME=str(home), DO_NOT_TRACK="1", COMFY_NO_UPDATE_CHECK="1",
               COMFY_CLI_NO_REMOTE_REFRESH="1", COMFY_NO_WATCH="1")
    for leak in ("VIRTUAL_ENV", "COMFY_LOCAL_URL", "CLAUDECODE", "AI_AGENT"):
        env.pop(leak, None)
    return env


def _envelope(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


@pytest.mark.parametrize("path", WORKFLOWS, ids=[workflow_id(p) for p in WORKFLOWS])
def test_comfy_run_queues_workflow(path, comfy, tmp_path):
    cli = _comfy_cli()
    case = case_for(stem_of(path))
    prompt, kind = load_workflow(path)
    assert kind == "api", f"{path.name} is named .api.json but is not an API-format prompt"
    info = comfy.object_info()
    missing = sorted({n["class_type"] for n in prompt.values()} - set(info))
    assert missing == sorted(case.expected_missing_on(info)), f"node types not on the server: {missing}"
    if missing or not case.runs_on_test_comfy:
        pytest.skip("needs what the test machine cannot have (see tests/workflow_cases.py); node types checked")

    prompt = apply_overrides(prompt, case.prepare(comfy), info)
    wf_file = tmp_path / path.name
    wf_file.write_text(json.dumps(prompt), encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    cmd = [cli, "--json", "run", "--workflow", str(wf_file), "--host", "127.0.0.1", "--port",
           str(comfy.port), "--wait", "--timeout", str(RUN_TIMEOUT)]
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=_cli_env(home), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT + 60)
    except subprocess.TimeoutExpired:
        comfy.interrupt()  # comfy-cli's timeout counts silence; the job would keep running
        raise
    envelope = _envelope(proc.stdout)
    error = envelope.get("error") or {}
    assert proc.returncode == 0 and envelope.get("ok"), (
        f"comfy run exited {proc.returncode}: {error.get('code')}: {error.get('message')}\n"
        f"hint: {error.get('hint')}\ndetails: {json.dumps(error.get('details'), indent=1)[:3000]}\n"
        f"stderr: {proc.stderr[-2000:]}{registration_hint(stem_of(path))}")
    assert envelope["data"]["status"] == "completed", envelope["data"]
    case.check(comfy, comfy.wait(envelope["data"]["prompt_id"], timeout=60))


def test_comfy_node_validate_accepts_pyproject(tmp_path):
    cli = _comfy_cli()
    work = tmp_path / "pack"
    work.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", work / "pyproject.toml")
    home = tmp_path / "home"
    home.mkdir()
    had_ruff_cache = (REPO_ROOT / ".ruff_cache").exists()
    proc = subprocess.run([cli, "--json", "node", "validate"], cwd=work, env=_cli_env(home), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"comfy node validate failed:\n{proc.stdout}\n{proc.stderr}"
    assert (REPO_ROOT / ".ruff_cache").exists() == had_ruff_cache, "a .ruff_cache appeared in the repository"
