"""Shared test set-up: the repo root on sys.path, offline model hubs, and the session `comfy` server.

`comfy` is a real ComfyUI (the core scripts/env.sh built for BA_CORE: 0.3.75 or 0.33.0; `--cpu`, 127.0.0.1, a free port) with this pack linked into custom_nodes and every
folder isolated under a temporary base directory. Attributes: url, base_dir, input_dir, output_dir, temp_dir,
models_dir (pathlib.Path). Methods: object_info(), run(prompt, timeout=300) -> history entry (AssertionError with the
execution error), run_error(prompt) -> execution_error payload, queue(prompt) -> prompt_id,
wait(prompt_id, timeout) -> history entry, finish(prompt_id, timeout) -> history entry or AssertionError,
interrupt(). When a test that uses it fails, the tail of the server's log is added to the report.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# No model hub is ever contacted by the tests (nor by the server they start, which inherits these).
for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ[_name] = _value

_servers = []


def pytest_report_header(config):
    """Which ComfyUI core this run tests (scripts/test.sh runs the suite on both supported cores)."""
    return f"ComfyUI core: {os.environ.get('BA_CORE', '?')} at {os.environ.get('COMFYUI_PATH', '(COMFYUI_PATH unset)')}"


@pytest.fixture(scope="session")
def comfy(tmp_path_factory):
    """The session's ComfyUI server (started on first use, stopped at the end of the session)."""
    from scripts.comfyui.server import ComfyServer, ServerError

    if not os.environ.get("COMFYUI_PATH"):
        pytest.fail("COMFYUI_PATH is not set: run the suite with `bash scripts/test.sh` (it sources scripts/env.sh)")
    server = ComfyServer(tmp_path_factory.mktemp("comfy"), python=os.environ.get("BA_PYTHON") or sys.executable)
    _servers.append(server)
    try:
        server.start()
    except ServerError as exc:
        pytest.fail(f"ComfyUI did not start: {exc}")
    yield server
    server.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and "comfy" in getattr(item, "fixturenames", ()) and _servers:
        server = _servers[-1]
        report.sections.append((f"ComfyUI server log (tail of {server.log_path})", server.log_tail(8000)))


def pytest_terminal_summary(terminalreporter):
    """The figures a passing test prints for the record (lines starting "[memory]": the memory gate's per-family
    slopes and bounds) shown at the end of the run, so CI's log carries them without `pytest -s`."""
    lines = [line for report in terminalreporter.stats.get("passed", ()) if report.when == "call"
             for line in report.capstdout.splitlines() if line.startswith("[memory]")]
    if lines:
        terminalreporter.section("figures printed by passing tests")
        for line in lines:
            terminalreporter.write_line(line)
