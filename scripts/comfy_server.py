"""Start, talk to and stop a real ComfyUI server, headless.

Used by the test suite (the `comfy` fixture), by `scripts/run_workflow.py` and by hand:

    $BA_PYTHON scripts/comfy_server.py --base-directory /tmp/comfy-base      # serves until Ctrl-C

`ComfyClient` talks to any running server over its HTTP API (queue a prompt, follow it through /history, read
/object_info, interrupt). `ComfyServer` is a client that also owns the server process: it starts ComfyUI's
`main.py --cpu` on 127.0.0.1 and a free port, with every mutable folder (input, output, temp, user, models, the
database) inside one base directory and this pack linked into `<base>/custom_nodes/broadcast_avatar`, waits until
`/system_stats` answers and stops only the process it started.

Only the standard library is used, so the module also runs under a plain Python.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
PACK_LINK_NAME = "broadcast_avatar"

# Environment for the server process: no downloads, no telemetry, and no __pycache__ written into the linked pack.
SERVER_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
}


class PromptFailed(AssertionError):
    """A prompt was rejected by the server or failed while executing. `payload` holds the server's details."""

    def __init__(self, message: str, payload: Optional[dict] = None):
        super().__init__(message)
        self.payload = payload or {}


class ServerError(RuntimeError):
    """The server could not be started, died, or answered something unusable."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def format_execution_error(payload: dict) -> str:
    """One readable paragraph from an execution_error / execution_interrupted / rejection payload."""
    if payload.get("interrupted"):
        return f"interrupted at node {payload.get('node_id')} ({payload.get('node_type')})"
    node = payload.get("node_id")
    head = f"node {node} ({payload.get('node_type')}): " if node is not None else ""
    message = str(payload.get("exception_message", "")).strip()
    kind = payload.get("exception_type", "error")
    return f"{head}{kind}: {message}"


def format_rejection(body: dict) -> str:
    """The server's 400 answer to POST /prompt, as lines naming each node and input at fault."""
    error = body.get("error", {})
    lines = [f"prompt rejected: {error.get('message', error)}" + (f" ({error['details']})" if error.get("details")
                                                                  else "")]
    for node_id, info in (body.get("node_errors") or {}).items():
        for err in info.get("errors", []):
            lines.append(f"  node {node_id} ({info.get('class_type')}): {err.get('message')}: {err.get('details')}")
    return "\n".join(lines)


class ComfyClient:
    """The HTTP API of one ComfyUI server."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        # A client_id is sent with every prompt: without one, a fully cached run's history has no outputs.
        self.client_id = uuid.uuid4().hex

    # -- plain HTTP -------------------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, timeout: float = 60) -> tuple[int, Any]:
        data = None
        headers = {}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def get(self, path: str, timeout: float = 60) -> Any:
        status, body = self.request("GET", path, timeout=timeout)
        if status != 200:
            raise ServerError(f"GET {path} answered {status}: {body}")
        return body

    def post(self, path: str, body: Any = None, timeout: float = 60) -> Any:
        status, answer = self.request("POST", path, body if body is not None else {}, timeout=timeout)
        if status != 200:
            raise ServerError(f"POST {path} answered {status}: {answer}")
        return answer

    def alive(self) -> bool:
        try:
            return self.request("GET", "/system_stats", timeout=2)[0] == 200
        except OSError:
            return False

    # -- the API the tests and the runner use -----------------------------------------------------------------
    def object_info(self) -> dict:
        return self.get("/object_info")

    def queue(self, prompt: dict, extra_data: Optional[dict] = None) -> str:
        """POST /prompt; returns the prompt id. A rejected prompt raises `PromptFailed` with the node errors."""
        body = {"prompt": prompt, "client_id": self.client_id}
        if extra_data:
            body["extra_data"] = extra_data
        status, answer = self.request("POST", "/prompt", body)
        if status != 200 or not isinstance(answer, dict) or "prompt_id" not in answer:
            answer = answer if isinstance(answer, dict) else {"error": {"message": str(answer)}}
            raise PromptFailed(format_rejection(answer), {
                "exception_type": "prompt_rejected", "exception_message": format_rejection(answer),
                "rejected": True, "node_errors": answer.get("node_errors", {}), "error": answer.get("error")})
        if answer.get("node_errors"):
            # ComfyUI queues the outputs that validated and skips the others; for a test or a script that is a
            # failure, not a partial success.
            self.cancel(answer["prompt_id"])
            answer.setdefault("error", {"message": "some outputs failed validation"})
            raise PromptFailed(format_rejection(answer), {
                "exception_type": "prompt_rejected", "exception_message": format_rejection(answer),
                "rejected": True, "node_errors": answer["node_errors"], "error": answer["error"]})
        return answer["prompt_id"]

    def history(self, prompt_id: str) -> Optional[dict]:
        entry = self.get(f"/history/{prompt_id}")
        return entry.get(prompt_id) if entry else None

    def wait(self, prompt_id: str, timeout: float = 300, on_poll=None) -> dict:
        """Poll /history until the prompt is finished (success or error); return its history entry.

        On timeout the prompt is removed from the queue (or interrupted if it runs) and `TimeoutError` is raised.
        """
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            entry = self.history(prompt_id)
            if entry is not None and (entry.get("status") or {}).get("status_str") in ("success", "error"):
                return entry
            if entry is not None and (entry.get("status") or {}).get("completed"):
                return entry
            self._check_alive()
            if on_poll is not None:
                on_poll()
            if time.monotonic() > deadline:
                self.cancel(prompt_id)
                raise TimeoutError(f"prompt {prompt_id} did not finish within {timeout:.0f} s (interrupted)")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def cancel(self, prompt_id: str) -> None:
        """Drop a prompt from the queue, or interrupt it if it is the one running."""
        try:
            self.request("POST", "/queue", {"delete": [prompt_id]})
            running = self.get("/queue").get("queue_running", [])
            if any(item[1] == prompt_id for item in running):
                self.interrupt()
        except (OSError, ServerError):
            pass

    def interrupt(self) -> None:
        self.post("/interrupt")

    def run(self, prompt: dict, timeout: float = 300) -> dict:
        """Queue, wait, and return the history entry; a failed prompt raises `PromptFailed` with its message."""
        return self.finish(self.queue(prompt), timeout)

    def finish(self, prompt_id: str, timeout: float = 300, on_poll=None) -> dict:
        """Wait for a queued prompt; return its history entry or raise `PromptFailed` with its error."""
        entry = self.wait(prompt_id, timeout, on_poll)
        failure = execution_failure(entry)
        if failure is not None:
            raise PromptFailed(self.failure_message(failure), failure)
        return entry

    def run_error(self, prompt: dict, timeout: float = 300) -> dict:
        """Queue a prompt that must fail; return the execution_error payload.

        A prompt rejected before running (validation, `validate_inputs`) gives a payload with
        ``exception_type == "prompt_rejected"``, the formatted message in ``exception_message`` and the server's
        ``node_errors``. An interrupted prompt gives its execution_interrupted payload with ``interrupted: True``.
        """
        try:
            prompt_id = self.queue(prompt)
        except PromptFailed as exc:
            return exc.payload
        entry = self.wait(prompt_id, timeout)
        failure = execution_failure(entry)
        assert failure is not None, f"the prompt was expected to fail but succeeded; outputs: {entry.get('outputs')}"
        return failure

    def failure_message(self, failure: dict) -> str:
        return format_execution_error(failure)

    def _check_alive(self) -> None:
        """Hook for `ComfyServer`: raise when the server process has died."""


def execution_failure(entry: dict) -> Optional[dict]:
    """The execution_error (or execution_interrupted) payload of a history entry, or None if it succeeded."""
    status = entry.get("status") or {}
    for kind, payload in status.get("messages", []):
        if kind == "execution_error":
            return dict(payload)
        if kind == "execution_interrupted":
            return dict(payload, interrupted=True, exception_type="interrupted",
                        exception_message="the prompt was interrupted")
    if status.get("status_str") == "error":
        return {"exception_type": "error", "exception_message": "the prompt failed (no error message in history)"}
    return None


class ComfyServer(ComfyClient):
    """A ComfyUI server process this object started, with all its folders under `base_dir`.

    Attributes: url, port, base_dir, input_dir, output_dir, temp_dir, user_dir, models_dir, log_path (Path).
    """

    def __init__(self, base_dir: os.PathLike | str, *, comfyui_path: Optional[os.PathLike | str] = None,
                 python: Optional[str] = None, models_dir: Optional[os.PathLike | str] = None,
                 pack_dir: os.PathLike | str = REPO_ROOT, port: Optional[int] = None,
                 extra_args: tuple = (), env: Optional[dict] = None):
        comfyui_path = comfyui_path or os.environ.get("COMFYUI_PATH")
        if not comfyui_path or not (Path(comfyui_path) / "main.py").is_file():
            raise ServerError(f"COMFYUI_PATH={comfyui_path!r} is not a ComfyUI checkout (no main.py); "
                              "source scripts/env.sh or point COMFYUI_PATH at your ComfyUI folder")
        self.comfyui_path = Path(comfyui_path).resolve()
        self.python = python or os.environ.get("BA_PYTHON") or sys.executable
        self.base_dir = Path(base_dir).resolve()
        self.input_dir = self.base_dir / "input"
        self.output_dir = self.base_dir / "output"
        self.temp_dir = self.base_dir / "temp"
        self.user_dir = self.base_dir / "user"
        self.models_dir = self.base_dir / "models"
        self._models_target = Path(models_dir).resolve() if models_dir else None
        self.pack_dir = Path(pack_dir).resolve()
        self.log_path = self.base_dir / "comfyui.log"
        self.port = port
        self.extra_args = tuple(extra_args)
        self.env = dict(env or {})
        self.proc: Optional[subprocess.Popen] = None
        super().__init__("http://127.0.0.1:0")

    # -- folders ----------------------------------------------------------------------------------------------
    def _prepare_dirs(self) -> None:
        for d in (self.input_dir, self.output_dir, self.temp_dir, self.user_dir, self.base_dir / "custom_nodes"):
            d.mkdir(parents=True, exist_ok=True)
        link = self.base_dir / "custom_nodes" / PACK_LINK_NAME
        if link.is_symlink() and link.resolve() != self.pack_dir:
            link.unlink()
        if not link.exists():
            link.symlink_to(self.pack_dir, target_is_directory=True)
        if self._models_target is not None and self._models_target != self.models_dir:
            self._models_target.mkdir(parents=True, exist_ok=True)
            if self.models_dir.is_symlink() and self.models_dir.resolve() != self._models_target:
                self.models_dir.unlink()
            if not self.models_dir.exists():
                self.models_dir.symlink_to(self._models_target, target_is_directory=True)
            elif not self.models_dir.is_symlink():
                raise ServerError(f"{self.models_dir} is a real folder; it cannot also point at {self._models_target}")
        else:
            self.models_dir.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        return [self.python, str(self.comfyui_path / "main.py"), "--cpu", "--listen", "127.0.0.1",
                "--port", str(self.port), "--base-directory", str(self.base_dir),
                # ComfyUI appends "temp" to --temp-directory, so the base folder makes <base>/temp.
                "--output-directory", str(self.output_dir), "--temp-directory", str(self.base_dir),
                "--input-directory", str(self.input_dir), "--user-directory", str(self.user_dir),
                "--database-url", f"sqlite:///{self.base_dir / 'comfyui.db'}", "--disable-auto-launch",
                *self.extra_args]

    # -- process ----------------------------------------------------------------------------------------------
    def start(self, timeout: float = 240) -> "ComfyServer":
        """Start the server and wait until it answers. Retries on another port if the chosen one was taken."""
        self._prepare_dirs()
        fixed_port = self.port is not None
        for attempt in range(3):
            if not fixed_port:
                self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            env = dict(os.environ, **SERVER_ENV, **self.env)
            log = open(self.log_path, "ab")
            log.write(f"\n=== {' '.join(self.command())}\n".encode())
            log.flush()
            # Its own session, so a Ctrl-C in the terminal reaches only us; we stop it ourselves.
            self.proc = subprocess.Popen(self.command(), cwd=str(self.comfyui_path), env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            log.close()
            try:
                self._wait_ready(timeout)
                return self
            except ServerError:
                exited = self.proc.poll() is not None
                self.stop()
                if exited and not fixed_port and "address already in use" in self.log_tail(3000).lower() \
                        and attempt < 2:
                    continue
                raise
        raise ServerError("could not start ComfyUI")  # pragma: no cover

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"ComfyUI exited with code {self.proc.returncode} while starting; log "
                                  f"{self.log_path}:\n{self.log_tail()}")
            if self.alive():
                return
            time.sleep(0.25)
        raise ServerError(f"ComfyUI did not answer /system_stats within {timeout:.0f} s; log {self.log_path}:\n"
                          f"{self.log_tail()}")

    def stop(self) -> None:
        """Stop the process this object started (by its PID only)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "ComfyServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerError(f"ComfyUI exited with code {self.proc.returncode}; log {self.log_path}:\n"
                              f"{self.log_tail()}")

    # -- the log ----------------------------------------------------------------------------------------------
    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, chars: int = 6000) -> str:
        return self.log_text()[-chars:]

    def import_failures(self) -> list[str]:
        """Log lines where ComfyUI reports a custom node (or core extra) that failed to import."""
        return [line for line in self.log_text().splitlines()
                if re.search(r"IMPORT FAILED|Cannot import .* module for custom nodes", line)]

    def failure_message(self, failure: dict) -> str:
        return format_execution_error(failure) + f"\n(server log: {self.log_path})"


def stop_on_signals() -> None:
    """Turn SIGTERM (and SIGINT, even where a background shell ignores it) into KeyboardInterrupt, so the
    `finally` that stops the server runs."""
    def _interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a headless ComfyUI with this pack until Ctrl-C.")
    parser.add_argument("--base-directory", required=True, help="folder for input/output/temp/user/models/database")
    parser.add_argument("--models-dir", help="use this models folder (linked as <base>/models)")
    parser.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--comfyui-path", help="ComfyUI checkout (default: $COMFYUI_PATH)")
    args = parser.parse_args(argv)
    server = ComfyServer(args.base_directory, comfyui_path=args.comfyui_path, models_dir=args.models_dir,
                         port=args.port)
    stop_on_signals()
    try:
        server.start()
        print(f"ComfyUI is serving at {server.url} (log: {server.log_path}); Ctrl-C stops it", flush=True)
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
        print(server.log_tail(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except ServerError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
