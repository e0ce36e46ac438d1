"""The batch runner's servers in Ray actors (optional: `pip install -r scripts/env/ray.txt`), one ComfyUI per actor.

Each actor hosts one `LaunchedServer` or `UrlServer` (scripts/batch/servers.py) and runs its operations; the driver
keeps its own dispatcher (scripts/run_batch.py), so a job whose actor or server dies is requeued to *another*
server by the driver (Ray's own task retries would go back to the same actor: `max_task_retries=0`). Ray restarts
a dead actor (`max_restarts`); the driver then restarts its ComfyUI and the server rejoins. An actor that Ray gave up
on is created again by the driver. `ActorUnavailableError` is not final: the actor is probed again every second.

Local mode (no `--ray-address`): a one-machine cluster pinned to 127.0.0.1 (`_node_ip_address`), no dashboard
(`include_dashboard=False`), usage stats off (`RAY_USAGE_STATS_ENABLED=0`), stopped at the end. Ray 2.60 still
starts its usage-stats dashboard module, which probes cloud metadata addresses once at start whatever the settings
(see docs/batch.md); so the Ray test is opt-in. With `--gpu` each launched actor asks for `num_gpus=1` and its
ComfyUI sees the GPU Ray gave it.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, RayTaskError

from scripts.batch.servers import LaunchedServer, ServerDown, Stopped, UrlServer

REPO_ROOT = Path(__file__).resolve().parents[2]
ACTOR_RESTARTS = 3


@ray.remote(num_cpus=0, max_concurrency=1)
class ComfyActor:
    """One ComfyUI server inside a Ray actor. A sync actor runs its calls one at a time on one long-lived thread,
    the thread that starts the ComfyUI child (its PR_SET_PDEATHSIG follows that thread)."""

    def __init__(self, kind: str, kwargs: dict):
        self.backend = LaunchedServer(**kwargs) if kind == "launched" else UrlServer(**kwargs)

    def start(self) -> dict:
        return dict(self.backend.start(), actor_pid=os.getpid())

    def heal(self) -> dict:
        if self.backend.client is None:  # a fresh actor (Ray restarted it): just start
            return self.start()
        return dict(self.backend.heal(), actor_pid=os.getpid())

    def call(self, method: str, *args):
        return getattr(self.backend, method)(*args)


class RayServer:
    """The driver's handle on one actor: the same operations as a local server, over Ray."""

    can_restart = True

    def __init__(self, server, gpu: bool = False, heal_timeout: float = 600):
        self.name = server.name
        self.kind, self.kwargs = server.spec()
        if gpu and self.kind == "launched":
            self.kwargs["gpu"] = "auto"  # Ray sets CUDA_VISIBLE_DEVICES for the actor's one GPU
        self.options = {"num_gpus": 1 if gpu and self.kind == "launched" else 0,
                        "max_restarts": ACTOR_RESTARTS, "max_task_retries": 0}
        self.heal_timeout = heal_timeout
        self.client = None
        self.actor = self._new_actor()

    def _new_actor(self):
        return ComfyActor.options(**self.options).remote(self.kind, self.kwargs)

    def _get(self, ref, should_stop=None):
        while True:
            ready, _ = ray.wait([ref], timeout=0.5)
            if ready:
                break
            if should_stop is not None and should_stop():
                raise Stopped(self.name)
        try:
            return ray.get(ref)
        except RayTaskError as exc:  # the actor's method raised: the original exception (ServerDown, PromptFailed...)
            raise exc.cause from None
        except (ActorUnavailableError, ActorDiedError, RayActorError) as exc:
            raise ServerDown(f"{self.name}: actor: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None

    def _call(self, method: str, *args, should_stop=None):
        return self._get(self.actor.call.remote(method, *args), should_stop)

    # -- the server operations ----------------------------------------------------------------------------------
    def start(self) -> dict:
        info = self._get(self.actor.start.remote())
        self.client = info["url"]
        return info

    def heal(self, should_stop=lambda: False) -> dict:
        deadline = time.monotonic() + self.heal_timeout
        while not should_stop() and time.monotonic() < deadline:
            try:
                return self._get(self.actor.heal.remote(), should_stop)
            except ServerDown as exc:
                if "ActorDiedError" in str(exc):  # Ray will not restart it again: a new actor takes its place
                    self.actor = self._new_actor()
                else:
                    time.sleep(1)  # unavailable (restarting): probe again
        raise ServerDown(f"{self.name}: the actor did not come back within {self.heal_timeout:.0f} s")

    def object_info(self) -> dict:
        return self._call("object_info")

    def missing_models(self, prompt: dict):
        return self._call("missing_models", prompt)

    def upload(self, name: str, data: bytes) -> None:
        self._call("upload", name, data)

    def submit(self, prompt: dict, prompt_id: str) -> None:
        self._call("submit", prompt, prompt_id)

    def wait(self, prompt_id: str, timeout: float, should_stop=None) -> dict:
        return self._call("wait", prompt_id, timeout, should_stop=should_stop)

    def lookup(self, prompt_id: str) -> str:
        return self._call("lookup", prompt_id)

    def locate(self, prompt_id: str, should_stop=None) -> str:
        return self._call("locate", prompt_id, should_stop=should_stop)

    def withdraw(self, prompt_id: str) -> str:
        return self._call("withdraw", prompt_id)

    def stop(self) -> bool:
        """The actor's server stopped (a launched one), or the actor gone for good (its ComfyUI died with it)."""
        try:
            return self._call("stop")
        except ServerDown as exc:
            return "ActorDiedError" in str(exc) and self.kind == "launched"

    def read(self, item: dict, offset: int, size: int = 4 << 20) -> bytes:
        return self._call("read", item, offset, size)

    def close(self) -> None:
        """Stop the server gracefully if the actor is free within 20 s, then end the actor (its ComfyUI child dies
        with it through PR_SET_PDEATHSIG if it was still running)."""
        ref = self.actor.call.remote("close")
        ray.wait([ref], timeout=20)
        ray.kill(self.actor, no_restart=True)


def init(address: Optional[str] = None, temp_dir: Optional[str] = None) -> None:
    """Join a cluster, or start a local one that talks over 127.0.0.1 only."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)}}
    if address:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
        return
    ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=os.cpu_count() or 1,
             runtime_env=runtime_env, log_to_driver=False, _temp_dir=temp_dir)


def ray_servers(servers: list, address: Optional[str] = None, gpu: bool = False,
                temp_dir: Optional[str] = None) -> list:
    if not ray.is_initialized():
        init(address, temp_dir)
    return [RayServer(s, gpu=gpu) for s in servers]


def shutdown() -> None:
    if ray.is_initialized():
        ray.shutdown()
