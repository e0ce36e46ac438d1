"""The HTTP API of a running ComfyUI: queue a prompt, follow it through /history, read /object_info, interrupt.

Used by the `comfy` test fixture (through `ComfyServer`, which also owns the process), by
`scripts/run_workflow.py --url` and by the batch runner, which also calls `watch()`: the client then follows its
websocket (scripts/comfyui/ws.py) and `wait` wakes the moment the server says a prompt ended, instead of at the next
/history poll. Only the standard library is used, but for the wake-up (websocket-client, where installed).
"""
from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Optional

# The pack's route answering "which models does this prompt lack" (nodes/model_check.py).
MISSING_MODELS_ROUTE = "/broadcast_avatar/missing_models"


class PromptFailed(AssertionError):
    """A prompt was rejected by the server or failed while executing. `payload` holds the server's details."""

    def __init__(self, message: str, payload: Optional[dict] = None):
        super().__init__(message)
        self.payload = payload or {}


class ServerError(RuntimeError):
    """The server could not be started, died, or answered something unusable."""


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
        self.watcher = None  # a PromptWatcher on this client's websocket, after watch()

    def watch(self) -> bool:
        """Follow this client's websocket from now on (reconnecting if it was); False if it cannot be reached.

        Call it before queueing: ComfyUI sends a prompt's end only to a connected client.
        """
        from scripts.comfyui.ws import PromptWatcher

        self.unwatch()
        try:
            self.watcher = PromptWatcher(self.url, self.client_id)
        except OSError:
            self.watcher = None
        return self.watcher is not None

    def watching(self) -> bool:
        return self.watcher is not None and self.watcher.connected

    def unwatch(self) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.close()

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
        except http.client.HTTPException as exc:
            # A connection cut mid-answer (IncompleteRead, a garbled status line) is a failed connection like a
            # reset one: callers handle both as OSError.
            raise ConnectionError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
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
    def missing_models(self, prompt: dict) -> Optional[dict]:
        """The pack's missing-model refusal for `prompt` ({"missing": [...], "text": ...}: the text a queued prompt
        would be refused with, every model with its download command); None when the server has no Broadcast
        Avatar pack (no such route)."""
        status, body = self.request("POST", MISSING_MODELS_ROUTE, {"prompt": prompt})
        return body if status == 200 and isinstance(body, dict) else None

    def object_info(self) -> dict:
        return self.get("/object_info")

    def queue(self, prompt: dict, extra_data: Optional[dict] = None, prompt_id: Optional[str] = None) -> str:
        """POST /prompt; returns the prompt id. A rejected prompt raises `PromptFailed` with the node errors.

        `prompt_id` chooses the id (ComfyUI accepts one but does not deduplicate it: never post the same id twice).
        """
        body = {"prompt": prompt, "client_id": self.client_id}
        if prompt_id is not None:
            body["prompt_id"] = prompt_id
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

        Between polls it sleeps, growing the delay from 50 ms to 0.5 s; a client that `watch()`es its websocket
        instead waits on it, woken the moment the prompt ends, and polls only every second or so meanwhile.
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
            watcher = self.watcher
            if watcher is not None and watcher.connected:
                watcher.wait_for(prompt_id, min(delay, max(deadline - time.monotonic(), 0)))
                delay = min(delay * 1.5, 1.0)
            else:
                time.sleep(delay)
                delay = min(delay * 1.5, 0.5)

    def cancel(self, prompt_id: str) -> None:
        """Drop a prompt from the queue, or interrupt it if it is the one running (best effort).

        The interrupt names the prompt (both supported cores honour `prompt_id` in POST /interrupt): a prompt that
        ended meanwhile leaves the next one running, where a bare interrupt would stop whichever runs then.
        """
        try:
            self.request("POST", "/queue", {"delete": [prompt_id]})
            self.request("POST", "/interrupt", {"prompt_id": prompt_id})
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
