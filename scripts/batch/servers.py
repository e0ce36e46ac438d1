"""The servers a batch runs on: one ComfyUI each, started by the runner or reached by URL, locally or in a Ray actor.

Every kind offers the same operations to the runner's dispatcher (one thread per server):
`start()` (make it answer; returns ``{"url", "pid"}``), `object_info()`, `upload(name, data)`,
`submit(prompt, prompt_id)`, `wait(prompt_id, timeout)`, `lookup(prompt_id)`, `read(item, offset, size)`,
`locate(prompt_id)` (`lookup`, asked again until the server answers), `withdraw(prompt_id)` (make sure a prompt
will not run, or run on, there), `stop()` (end a server this runner owns; False for one it does not),
`heal()` (restart a server this runner owns, or wait for one reached by URL to answer again) and `close()`.
A failed connection or a server that stops answering raises `ServerDown`. Before the dispatcher requeues a job
elsewhere it asks the server where the job's prompt stands (`locate`) and goes on there if the prompt is queued,
running or finished; only a prompt the server does not have, or one withdrawn or killed with its server, is run
again elsewhere (docs/batch.md, "Exactly once").
Each server's client follows its websocket (connected before every POST /prompt if it dropped), so `wait` returns
the moment the server says the prompt ended rather than at the next /history poll (scripts/comfyui/ws.py).

- `LaunchedServer`: a `ComfyServer` (scripts/comfyui/server.py) in its own base folder, sharing one models folder,
  with ``PR_SET_PDEATHSIG`` so the ComfyUI process dies with its owner even if the owner is SIGKILLed;
  with `gpu` set it runs without `--cpu` and sees only its own device (``CUDA_VISIBLE_DEVICES``; in a Ray actor
  with ``num_gpus=1`` Ray sets that variable itself).
- `UrlServer`: an existing ComfyUI; never started or stopped by the runner.
- `RayServer` (scripts/batch/ray_actors.py): either of the above inside a Ray actor, one server per actor.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

from scripts.comfyui.client import ComfyClient, PromptFailed, ServerError
from scripts.comfyui.server import ComfyServer

READ_CHUNK = 4 << 20
WATCH_RETRY = 60.0  # seconds before trying a server's websocket again after it could not be reached
CONFIRM_TIMEOUT = 30.0  # seconds a started server may take to answer where a prompt stands before it is stopped
ASK_EVERY = 1.0  # seconds between two questions to a server that did not answer


class ServerDown(RuntimeError):
    """The server stopped answering or its process died (the job it ran is requeued elsewhere)."""


class Stopped(Exception):
    """The runner is stopping; the prompt it was waiting for is left as it is."""


class OutputMissing(RuntimeError):
    """A finished prompt's output file cannot be read from its server (the attempt does not count as done)."""


class _Backend:
    """What every server kind shares once it has a `ComfyClient`."""

    name = "server"
    can_restart = False
    confirm_timeout = CONFIRM_TIMEOUT  # how long `locate` keeps asking a server that does not answer

    def __init__(self) -> None:
        self.client: Optional[ComfyClient] = None
        self._watch_failed = float("-inf")

    def _need(self) -> ComfyClient:
        if self.client is None:
            raise ServerDown(f"{self.name} is not started")
        return self.client

    def object_info(self) -> dict:
        try:
            return self._need().object_info()
        except (OSError, ServerError) as exc:
            raise ServerDown(f"{self.name}: {exc}") from None

    def missing_models(self, prompt: dict) -> Optional[dict]:
        """The pack's missing-model list for `prompt` on this server (`ComfyClient.missing_models`)."""
        try:
            return self._need().missing_models(prompt)
        except (OSError, ServerError) as exc:
            raise ServerDown(f"{self.name}: {exc}") from None

    def upload(self, name: str, data: bytes) -> None:
        from scripts.run_workflow import upload

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_bytes(data)
            try:
                upload(self._need(), path)
            except (OSError, ServerError) as exc:
                raise ServerDown(f"{self.name}: uploading {name} failed: {exc}") from None

    def submit(self, prompt: dict, prompt_id: str) -> None:
        """POST /prompt with our id; a rejection raises `PromptFailed` (the job is invalid as written)."""
        client = self._need()
        # ComfyUI tells only a connected client that its prompt ended; without it, wait polls. A server whose
        # websocket cannot be reached (a proxy that does not pass it) is not asked again before every job.
        if not client.watching() and time.monotonic() - self._watch_failed > WATCH_RETRY:
            if not client.watch():
                self._watch_failed = time.monotonic()
        try:
            client.queue(prompt, prompt_id=prompt_id)
        except PromptFailed:
            raise
        except (OSError, ServerError) as exc:
            raise ServerDown(f"{self.name}: {exc}") from None

    def wait(self, prompt_id: str, timeout: float, should_stop=None) -> dict:
        """The history entry once the prompt finished; `PromptFailed` on an execution error.

        `should_stop()` is asked at every poll; when it says yes, `Stopped` is raised and the prompt keeps running on
        the server (the next run adopts it).
        """
        def on_poll():
            if should_stop is not None and should_stop():
                raise Stopped(prompt_id)
        try:
            return self._need().finish(prompt_id, timeout, on_poll)
        except (PromptFailed, TimeoutError, Stopped):
            raise
        except (OSError, ServerError) as exc:
            raise ServerDown(f"{self.name}: {exc}") from None

    def lookup(self, prompt_id: str) -> str:
        """Where a prompt stands on this server: "finished", "queued" (pending or running) or "unknown".

        /queue is read before /history: ComfyUI moves a prompt from running to history in one step (under its
        queue's lock), so a prompt not in the queue at the first read is either in the history at the second or was
        never queued. The other order could miss a prompt that ended between the two reads.
        """
        client = self._need()
        try:
            queue = client.get("/queue")
            for item in queue.get("queue_running", []) + queue.get("queue_pending", []):
                if len(item) > 1 and item[1] == prompt_id:
                    return "queued"
            entry = client.history(prompt_id)
        except (OSError, ServerError, AttributeError) as exc:  # AttributeError: a body that is not the JSON asked for
            raise ServerDown(f"{self.name}: {exc}") from None
        if entry is not None and ((entry.get("status") or {}).get("completed")
                                  or (entry.get("status") or {}).get("status_str") in ("success", "error")):
            return "finished"
        return "unknown"

    def may_answer(self) -> bool:
        """False once the server certainly cannot answer any more (a started server whose process ended)."""
        return True

    def locate(self, prompt_id: str, should_stop=lambda: False) -> str:
        """`lookup`, asked again (every `ASK_EVERY` seconds) until the server answers, for up to `confirm_timeout`
        seconds; `ServerDown` if it never does. What the dispatcher asks after a connection failed mid-attempt."""
        deadline = time.monotonic() + self.confirm_timeout
        while True:
            try:
                return self.lookup(prompt_id)
            except ServerDown:
                if should_stop():
                    raise Stopped(prompt_id) from None  # left as it is, for the next run to adopt
                if not self.may_answer() or time.monotonic() > deadline:
                    raise
            time.sleep(ASK_EVERY)

    def withdraw(self, prompt_id: str, timeout: float = CONFIRM_TIMEOUT) -> str:
        """Make sure a prompt will not run, or run on, here: delete it from the queue, interrupt it if it is the one
        running (the interrupt names it, so the next prompt is never hit), until the server lists it neither as
        pending nor as running. Returns "finished" (it ended, interrupted or not) or "unknown" (it never ran here).
        `ServerDown` when the server cannot be asked or the prompt still runs after `timeout` seconds."""
        client = self._need()
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.post("/queue", {"delete": [prompt_id]})
                where = self.lookup(prompt_id)
                if where != "queued":
                    return where
                client.post("/interrupt", {"prompt_id": prompt_id})
            except (OSError, ServerError) as exc:
                raise ServerDown(f"{self.name}: withdrawing prompt {prompt_id}: {exc}") from None
            if time.monotonic() > deadline:
                raise ServerDown(f"{self.name}: prompt {prompt_id} still runs {timeout:.0f} s after it was interrupted")
            watcher = client.watcher  # woken the moment the interrupted prompt ends, else a short pause
            if watcher is not None and watcher.connected:
                watcher.wait_for(prompt_id, 0.5)
            else:
                time.sleep(0.2)

    def stop(self) -> bool:
        """Stop the server if this runner owns it (every prompt on it dies with it): True then; False otherwise."""
        return False

    def read(self, item: dict, offset: int, size: int = READ_CHUNK) -> bytes:
        """`size` bytes of an output file from `offset` over GET /view (works for a server on another machine)."""
        query = urllib.parse.urlencode({"filename": item["filename"], "subfolder": item.get("subfolder", ""),
                                        "type": item.get("type", "output")})
        req = urllib.request.Request(f"{self._need().url}/view?{query}",
                                     headers={"Range": f"bytes={offset}-{offset + size - 1}"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                data = resp.read()
                if resp.status == 200 and offset:  # no range support: the whole file came back
                    data = data[offset:offset + size]
                return data[:size]
        except urllib.error.HTTPError as exc:
            if exc.code == 416:  # past the end
                return b""
            raise OutputMissing(f"{self.name}: GET /view {item['filename']} answered {exc.code}") from None
        except (OSError, http.client.HTTPException) as exc:  # HTTPException: a body cut short (IncompleteRead)
            raise ServerDown(f"{self.name}: GET /view {item['filename']}: {type(exc).__name__}: {exc}") from None

    def alive(self) -> bool:
        return self.client is not None and self.client.alive()


class UrlServer(_Backend):
    """A ComfyUI the runner does not own: it is never started or stopped, only waited for when it goes away."""

    def __init__(self, url: str, rejoin_timeout: float = 600):
        super().__init__()
        self.url = url.rstrip("/")
        self.name = self.url
        self.rejoin_timeout = rejoin_timeout
        # A server reached by URL cannot be stopped to end a prompt: where a prompt stands is asked as long as the
        # runner would wait for the server to come back.
        self.confirm_timeout = rejoin_timeout
        self.client = ComfyClient(self.url)

    def spec(self) -> tuple[str, dict]:
        """How to build this server again elsewhere (in a Ray actor)."""
        return "url", {"url": self.url, "rejoin_timeout": self.rejoin_timeout}

    def start(self, timeout: float = 15) -> dict:
        """At the start of a batch a server that does not answer within `timeout` is an error (exit 4)."""
        deadline = time.monotonic() + timeout
        while not self.client.alive():
            if time.monotonic() > deadline:
                raise ServerDown(f"no ComfyUI answers at {self.url}")
            time.sleep(1)
        return {"url": self.url, "pid": self._pid()}

    def _pid(self) -> Optional[int]:
        # ComfyUI does not report its PID; the tests know it from the process they started.
        return None

    def heal(self, should_stop=lambda: False) -> dict:
        deadline = time.monotonic() + self.rejoin_timeout
        while not self.client.alive():
            if should_stop() or time.monotonic() > deadline:
                raise ServerDown(f"{self.url} did not come back within {self.rejoin_timeout:.0f} s")
            time.sleep(1)
        return {"url": self.url, "pid": None}

    def close(self) -> None:
        """Not ours: it keeps running (a prompt still queued there is adopted by the next run)."""
        self.client.unwatch()


class LaunchedServer(_Backend):
    """A ComfyUI this runner starts, in `base_dir`, sharing `models_dir`; restarted when it dies."""

    can_restart = True

    def __init__(self, name: str, base_dir: os.PathLike | str, models_dir: Optional[os.PathLike | str] = None,
                 gpu: Optional[str] = None, start_timeout: float = 300, comfyui_path: Optional[str] = None,
                 python: Optional[str] = None):
        super().__init__()
        self.name = name
        self.base_dir = Path(base_dir)
        self.models_dir = models_dir
        self.gpu = gpu
        self.start_timeout = start_timeout
        self.comfyui_path, self.python = comfyui_path, python
        self.server: Optional[ComfyServer] = None

    def spec(self) -> tuple[str, dict]:
        """How to build this server again elsewhere (in a Ray actor)."""
        return "launched", {"name": self.name, "base_dir": str(self.base_dir), "gpu": self.gpu,
                            "models_dir": str(self.models_dir) if self.models_dir else None,
                            "start_timeout": self.start_timeout, "comfyui_path": self.comfyui_path,
                            "python": self.python}

    def _make(self) -> ComfyServer:
        # gpu: None = CPU (--cpu); "auto" = the devices this process may see (a Ray actor's own GPU);
        # anything else pins that device.
        env = {"CUDA_VISIBLE_DEVICES": self.gpu} if self.gpu not in (None, "auto") else {}
        server = ComfyServer(self.base_dir, models_dir=self.models_dir, env=env, comfyui_path=self.comfyui_path,
                             python=self.python)
        if self.gpu is not None:
            cpu_command = server.command
            server.command = lambda: [a for a in cpu_command() if a != "--cpu"]
        return server

    def start(self) -> dict:
        if self.server is None:
            self.server = self._make()
        if self.server.proc is None or self.server.proc.poll() is not None:
            try:
                self.server.start(self.start_timeout)
            except ServerError as exc:
                raise ServerDown(f"{self.name} did not start: {exc}") from None
        self.client = self.server
        return {"url": self.server.url, "pid": self.server.proc.pid, "log": str(self.server.log_path)}

    def heal(self, should_stop=lambda: False) -> dict:
        if self.server is not None:
            self.server.stop()  # a hung server is stopped before its replacement starts
        return self.start()

    def alive(self) -> bool:
        return self.server is not None and self.server.proc is not None and self.server.proc.poll() is None \
            and self.server.alive()

    def may_answer(self) -> bool:
        return self.server is not None and self.server.proc is not None and self.server.proc.poll() is None

    def stop(self) -> bool:
        if self.server is not None:
            self.server.stop()
        return True

    def read(self, item: dict, offset: int, size: int = READ_CHUNK) -> bytes:
        """Straight from this server's output folder (it is on this machine); never outside that folder."""
        root = self._need().output_dir.resolve()
        path = (root / item.get("subfolder", "") / item["filename"]).resolve()
        if root not in path.parents or not path.is_file():
            raise OutputMissing(f"{self.name}: output {item['filename']} is not in {root}")
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(size)

    def pid(self) -> Optional[int]:
        return self.server.proc.pid if self.server is not None and self.server.proc is not None else None

    def close(self) -> None:
        if self.server is not None:
            self.server.unwatch()
            self.server.stop()


def fetch(server, item: dict, dest: Path) -> tuple[str, int]:
    """Copy one output file to `dest` chunk by chunk (through `server.read`); returns (sha256, bytes).

    Written to `<dest>.part` and renamed, so an interrupted copy never leaves a file that looks finished; the
    file and then its folder are fsync'ed, so once the `done` record (written after this) is on disk, so is the
    file under its name. A read shorter than asked for is the end of the file (no extra request to find it).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    digest, size = hashlib.sha256(), 0
    try:
        with open(part, "wb") as f:
            while True:
                chunk = server.read(item, size, READ_CHUNK)
                f.write(chunk)
                digest.update(chunk)
                size += len(chunk)
                if len(chunk) < READ_CHUNK:
                    break
            f.flush()
            os.fsync(f.fileno())
        if size == 0:
            raise OutputMissing(f"{getattr(server, 'name', 'server')}: output {item['filename']} is empty or missing")
        os.replace(part, dest)
        folder = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    finally:
        if part.exists():
            part.unlink()
    return digest.hexdigest(), size
