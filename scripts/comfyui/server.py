"""Start, talk to and stop a real ComfyUI server, headless.

Used by the test suite (the `comfy` fixture), by `scripts/run_workflow.py` and by hand:

    $BA_PYTHON scripts/comfyui/server.py --base-directory <folder>      # serves until Ctrl-C

`ComfyServer` is a `ComfyClient` (scripts/comfyui/client.py: the HTTP API) that also owns the server process: it
starts ComfyUI's `main.py --cpu` on 127.0.0.1 and a free port, with every mutable folder (input, output, temp, user,
models, the database) inside one base directory and this pack linked into `<base>/custom_nodes/broadcast_avatar`,
waits until `/system_stats` answers and stops only the process it started.

Only the standard library is used, so the module also runs under a plain Python.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # also when run as a script
    sys.path.insert(0, str(REPO_ROOT))

from scripts.comfyui.client import (ComfyClient, PromptFailed, ServerError, execution_failure,  # noqa: E402,F401
                                  format_execution_error, format_rejection)

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


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the thread that started it exits (Linux only; else a no-op)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        # Run in the child before exec: by default PR_SET_PDEATHSIG, so no server outlives the test run, benchmark or
        # batch runner that started it, even one killed with no chance to clean up.
        self.preexec_fn = die_with_parent
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
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                         preexec_fn=self.preexec_fn)
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
