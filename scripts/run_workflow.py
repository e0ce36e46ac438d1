"""Run a workflow headlessly through a real ComfyUI and print where its outputs went.

    $BA_PYTHON scripts/run_workflow.py                          # the demo: sample clip -> workflows/demo_export
    $BA_PYTHON scripts/run_workflow.py workflows/api/X.api.json --set "Load Video.video=my.mp4" --set 7.fps=25
    $BA_PYTHON scripts/run_workflow.py workflows/X.json --url http://127.0.0.1:8188   # a ComfyUI already running

Without --url it starts its own ComfyUI (headless, CPU unless --gpu) in a base folder under the user's cache folder,
with the models folder taken from --models-dir (default: <cache>/models). Before anything is queued it reports
every model file or folder the workflow names that the server does not have (by name and folder). It follows the
prompt to the end, printing progress, prints the output files (for a video the .mp4 path, last) and exits non-zero
with the execution error on failure. Exit codes: 0 success, 1 the prompt failed, 2 bad workflow or arguments,
3 missing models or input files, 4 the server could not be reached or started.

Also importable: `run(workflow, overrides, client)` returns the history entry.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.comfyui.server import ComfyClient, ComfyServer, PromptFailed, ServerError, stop_on_signals  # noqa: E402
from scripts.workflow.api import (WorkflowError, apply_overrides, check_prompt, load_workflow,  # noqa: E402
                                  parse_set, ui_to_api, without_pack_models, workflow_kind)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_WORKFLOW = REPO_ROOT / "workflows" / "api" / "demo_export.api.json"
VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".webm")


def user_cache() -> Path:
    return Path(os.environ.get("BA_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "comfyui-broadcast-avatar")


def _say(msg: str) -> None:
    print(f"[run] {msg}", file=sys.stderr, flush=True)


def prepare_prompt(workflow: dict, overrides: dict, object_info: dict) -> dict:
    """API prompt from a workflow (either format) with overrides applied."""
    if workflow_kind(workflow) == "ui":
        workflow = ui_to_api(workflow, object_info)
    return apply_overrides(workflow, overrides, object_info)


class _Progress:
    """Prints the server's progress for one prompt, from its websocket (`scripts/comfyui/ws.connect`: none without
    websocket-client)."""

    def __init__(self, client: ComfyClient, titles: dict):
        self.client, self.titles = client, titles
        self.prompt_id: Optional[str] = None
        self._ws = None
        self._last = 0.0
        # Events can arrive before POST /prompt has returned the id: hold them until it is known.
        self._lock = threading.Lock()
        self._early: list = []
        try:
            from scripts.comfyui.ws import connect, ws_url

            self._ws = connect(ws_url(client.url, client.client_id), timeout=5)
            self._ws.settimeout(1)
            threading.Thread(target=self._read, daemon=True).start()
        except Exception:  # progress is a nicety: without it, the run still completes
            self._ws = None

    def _read(self) -> None:
        while self._ws is not None:
            try:
                raw = self._ws.recv()
            except Exception as exc:
                if type(exc).__name__ == "WebSocketTimeoutException":
                    continue
                return
            if not isinstance(raw, str):
                continue  # binary preview frames
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            with self._lock:
                if self.prompt_id is None:
                    self._early.append(msg)
                    continue
            self._show(msg)

    def started(self, prompt_id: str) -> None:
        with self._lock:
            self.prompt_id, early, self._early = prompt_id, self._early, []
        for msg in early:
            self._show(msg)

    def _show(self, msg: dict) -> None:
        data = msg.get("data") or {}
        if data.get("prompt_id") not in (None, self.prompt_id):
            return
        node = data.get("node")
        if msg.get("type") == "executing" and node is not None:
            _say(f"node {node} ({self.titles.get(str(node), '?')})")
        elif msg.get("type") == "progress" and (time.monotonic() - self._last > 1
                                                or data.get("value") == data.get("max")):
            self._last = time.monotonic()
            _say(f"node {node}: {data.get('value')}/{data.get('max')}")

    def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass


def run(workflow: dict, overrides: dict, client: ComfyClient, timeout: float = 3600) -> dict:
    """Convert, check, queue and follow one workflow; return its history entry.

    Raises `WorkflowError` (bad workflow/override), `MissingModels` (before queueing) or `PromptFailed`.
    """
    info = client.object_info()
    prompt = prepare_prompt(workflow, overrides, info)
    problems = check_prompt(prompt, info)
    pack = client.missing_models(prompt)      # None: the server has no Broadcast Avatar pack
    if pack is not None:
        problems = without_pack_models(problems, prompt)
    if problems or (pack and pack.get("text")):
        raise MissingModels(problems, (pack or {}).get("text", ""))
    titles = {nid: (n.get("_meta") or {}).get("title") or n["class_type"] for nid, n in prompt.items()}
    progress = _Progress(client, titles)
    try:
        prompt_id = client.queue(prompt)
        _say(f"queued prompt {prompt_id} ({len(prompt)} nodes) on {client.url}")
        progress.started(prompt_id)
        try:
            return client.finish(prompt_id, timeout)
        except KeyboardInterrupt:  # Ctrl-C here also stops the job on the server
            client.cancel(prompt_id)
            raise
    finally:
        progress.close()


class MissingModels(WorkflowError):
    def __init__(self, problems: list[str], models_text: str = ""):
        parts = [models_text] if models_text else []
        if problems:
            parts.append("the workflow names files this server does not have:\n  " + "\n  ".join(problems))
        super().__init__("\n\n".join(parts))
        self.problems = problems
        self.models_text = models_text


def output_files(entry: dict, dirs: Optional[dict], url: str) -> list[str]:
    """Every file in a history entry's outputs, as a path (own server) or a /view URL (remote server)."""
    found = []
    for node_out in (entry.get("outputs") or {}).values():
        for items in node_out.values():
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, dict) or "filename" not in item:
                    continue
                kind = item.get("type", "output")
                if dirs and kind in dirs:
                    found.append(str(Path(dirs[kind]) / item.get("subfolder", "") / item["filename"]))
                else:
                    from urllib.parse import urlencode

                    found.append(f"{url}/view?" + urlencode({"filename": item["filename"],
                                                             "subfolder": item.get("subfolder", ""), "type": kind}))
    # Videos last, so the final line of output is the clip.
    return sorted(dict.fromkeys(found), key=lambda p: p.split("?")[0].lower().endswith(VIDEO_SUFFIXES))


def _remote_dirs(client: ComfyClient) -> Optional[dict]:
    """The output/temp/input folders of a running server, from its command line (when it runs on this machine)."""
    try:
        argv = client.get("/system_stats")["system"]["argv"]
    except Exception:
        return None

    def arg(flag):
        return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None

    base = arg("--base-directory")
    if base is None:
        main_py = next((a for a in argv if a.endswith("main.py")), None)
        base = str(Path(main_py).parent) if main_py and Path(main_py).is_absolute() else None
    if base is None or not Path(base).is_dir():
        return None
    return {"output": arg("--output-directory") or str(Path(base) / "output"),
            "temp": str(Path(arg("--temp-directory") or base) / "temp"),  # ComfyUI appends "temp" to the flag
            "input": arg("--input-directory") or str(Path(base) / "input")}


def put_demo_clip(client: ComfyClient, input_dir: Optional[Path]) -> str:
    """Make the sample clip with scripts/sample_clip.py and place it in the server's input folder."""
    from scripts import sample_clip

    name = sample_clip.SAMPLE_NAME
    if input_dir is not None:
        target = Path(input_dir) / name
        if not target.exists():
            sample_clip.make_sample_clip(target)
        return name
    with tempfile.TemporaryDirectory() as tmp:  # a remote server: upload through its own endpoint
        path = Path(tmp) / name
        sample_clip.make_sample_clip(path)
        upload(client, path)
    return name


def upload(client: ComfyClient, path: Path) -> None:
    """POST a file to /upload/image (ComfyUI stores any file type there) into the input folder."""
    import urllib.request
    import uuid

    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"{path.name}\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + path.read_bytes() + \
        f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"overwrite\"\r\n\r\ntrue\r\n--{boundary}--\r\n" \
        .encode()
    req = urllib.request.Request(client.url + "/upload/image", data=body, method="POST",
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        if resp.status != 200:
            raise ServerError(f"uploading {path.name} failed: HTTP {resp.status}")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workflow", nargs="?", help="workflow file (API or UI format); none = --demo")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="NODE.INPUT=VALUE",
                   help="override an input; NODE is the node id or its title; VALUE is JSON or a plain string")
    p.add_argument("--demo", action="store_true", help="make the sample clip and run workflows/demo_export")
    p.add_argument("--url", help="use this running ComfyUI (with the pack installed) instead of starting one")
    p.add_argument("--base-directory", help="base folder of the ComfyUI this starts (default: <cache>/comfyui-base)")
    p.add_argument("--models-dir", help="models folder of the ComfyUI this starts (default: <cache>/models)")
    p.add_argument("--gpu", action="store_true", help="let the ComfyUI this starts use the GPU (default: --cpu)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the prompt (default 3600)")
    args = p.parse_args(argv)

    demo = args.demo or not args.workflow
    workflow_path = Path(args.workflow) if args.workflow else DEMO_WORKFLOW
    try:
        workflow, _ = load_workflow(workflow_path)
        overrides = dict(parse_set(s) for s in args.sets)
    except WorkflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    server = None
    try:
        if args.url:
            client = ComfyClient(args.url)
            if not client.alive():
                print(f"error: no ComfyUI answers at {args.url}", file=sys.stderr)
                return 4
            dirs = _remote_dirs(client)
        else:
            cache = user_cache()
            server = ComfyServer(args.base_directory or cache / "comfyui-base",
                                 models_dir=args.models_dir or cache / "models")
            stop_on_signals()
            if args.gpu:
                server.command = _without_cpu(server.command)
            _say(f"starting ComfyUI in {server.base_dir} (models: {args.models_dir or cache / 'models'})")
            server.start()
            client = server
            dirs = {"output": server.output_dir, "temp": server.temp_dir, "input": server.input_dir}
        if demo:
            name = put_demo_clip(client, Path(dirs["input"]) if dirs and not args.url else None)
            _say(f"sample clip {name} is in the input folder")
        entry = run(workflow, overrides, client, args.timeout)
    except WorkflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, MissingModels) else 2
    except PromptFailed as exc:
        print(f"error: the prompt failed: {exc}", file=sys.stderr)
        return 1
    except (ServerError, OSError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if server is not None:
            server.stop()
    files = output_files(entry, dirs, client.url)
    if not files:
        _say("the prompt finished with no output files")
    for f in files:
        print(f)
    return 0


def _without_cpu(command):
    def wrapped():
        return [a for a in command() if a != "--cpu"]
    return wrapped


if __name__ == "__main__":
    sys.exit(main())
