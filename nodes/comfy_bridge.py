"""The node layer's link to ComfyUI: progress bars, interrupts, registered folders, devices.

Engines never import ComfyUI; nodes use these helpers to hand them plain objects (`Progress`, `Path`,
`ContentCache`, `torch.device`).
"""
from __future__ import annotations

import os
import weakref
from pathlib import Path

import folder_paths

from ..engines.common.cache import ContentCache, max_bytes_or_default
from ..engines.common.errors import InputError, ModelFilesMissing
from ..engines.common.progress import Progress

# The pack's one category root: every node's category is `category(<family>)`, "Broadcast/<family>".
CATEGORY_ROOT = "Broadcast"

# Model families and their folders under ComfyUI's models directory (registered at load time in __init__.py).
MODEL_FOLDERS = ("omnivoice", "musetalk", "ditto", "sam3")
WHISPER_FOLDER = "whisper"                # Hugging Face Whisper folders (reference transcription for the TTS nodes)
VOICES_FOLDER = "omnivoice_voices"        # voice prompts saved by Broadcast Voice Prompt
CACHE_FOLDER = "broadcast_cache"          # content-hash cache: mask sequences, prompts, avatars, packets
TRT_FOLDER = "broadcast_tensorrt"         # built TensorRT engines (keyed by GPU, versions and shapes)


def with_audio_player(shown, audio, node_cls) -> dict:
    """The node's UI output `shown` (a core ui object, a dict or None) plus a player of `audio` (ComfyUI's AUDIO;
    None adds nothing): every AUDIO a pack node outputs can be heard in its node (web/js/broadcast_media.js draws
    the player from the "audio" entry, as the editor does for core's Preview Audio)."""
    from comfy_api.latest import ui

    out = dict(shown.as_dict() if hasattr(shown, "as_dict") else (shown or {}))
    if audio is not None:
        out.update(ui.PreviewAudio(audio, cls=node_cls).as_dict())
    return out


def category(family: str) -> str:
    """The node-library category of a family's nodes (each nodes module keeps it as CATEGORY)."""
    return f"{CATEGORY_ROOT}/{family}"


def register_folders() -> None:
    """Register every folder of the pack with ComfyUI (idempotent): the one place folders are registered."""
    for name in MODEL_FOLDERS + (WHISPER_FOLDER, VOICES_FOLDER, CACHE_FOLDER, TRT_FOLDER):
        if name not in folder_paths.folder_names_and_paths:
            folder_paths.add_model_folder_path(name, os.path.join(folder_paths.models_dir, name), is_default=True)


def progress(total: int) -> Progress:
    """A `Progress` that drives ComfyUI's progress bar and raises on the user's cancel."""
    import comfy.model_management
    import comfy.utils

    bar = comfy.utils.ProgressBar(max(int(total), 1))
    text = _progress_text()

    def on_update(done: int, total_: int) -> None:
        bar.update_absolute(done, max(total_, 1))
        if text is not None:
            text(done, total_)

    return Progress(total, on_update=on_update,
                    check_cancel=comfy.model_management.throw_exception_if_processing_interrupted)


def _progress_text():
    """Live "done / total, rate, ETA" text in the running node, where the core can show text in a node (see
    core_features); None elsewhere. At most two updates a second, plus the last."""
    import time

    from . import core_features

    if not core_features.has_progress_text():
        return None
    from comfy_execution.utils import get_executing_context
    from server import PromptServer

    context = get_executing_context()
    if context is None:
        return None
    node_id, start, last = context.node_id, time.monotonic(), [0.0]

    def send(done: int, total: int) -> None:
        now = time.monotonic()
        if done and done < total and now - last[0] < 0.5:
            return
        last[0] = now
        rate = done / max(now - start, 1e-6)
        eta = (total - done) / rate if rate > 0 and total > done else 0.0
        line = f"{done}/{total} done, {rate:.1f}/s" + (f", about {eta:.0f} s left" if total > done else "")
        PromptServer.instance.send_progress_text(line, node_id)

    return send


def model_names(family: str) -> list[str]:
    """Model folders (one level deep) under every registered path of `family`, for a combo widget."""
    names = set()
    for base in folder_paths.get_folder_paths(family):
        if os.path.isdir(base):
            names.update(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)) and not d.startswith("."))
    return sorted(names)


def model_dir(family: str, name: str, input_name: str = "model_name") -> Path:
    """Resolve a model folder by its name inside `models/<family>`; a missing one names every place looked at."""
    if not name or os.path.isabs(name) or ".." in Path(name).parts:
        raise InputError(input_name, f"the name of a folder inside models/{family}", repr(name),
                         "Workflows refer to models by name, never by path.")
    bases = folder_paths.get_folder_paths(family)
    for base in bases:
        candidate = Path(base) / name
        if candidate.is_dir():
            return candidate
    raise ModelFilesMissing(input_name, os.path.join(bases[0] if bases else f"models/{family}", name), [name],
                            hint=f"Put the '{name}' folder inside models/{family} (see the README).")


_CAP_PROBLEMS_LOGGED: set = set()


def cache() -> ContentCache:
    """The pack's content-hash cache, inside ComfyUI's models folder (capped: BROADCAST_CACHE_MAX_GB; a malformed
    value is logged once and the default cap used)."""
    import logging

    max_bytes, problem = max_bytes_or_default()
    if problem and problem not in _CAP_PROBLEMS_LOGGED:
        _CAP_PROBLEMS_LOGGED.add(problem)
        logging.getLogger("broadcast_avatar").warning("Broadcast Avatar: cache: %s", problem)
    return ContentCache(folder_paths.get_folder_paths(CACHE_FOLDER)[0], max_bytes=max_bytes)


def report_cache() -> None:
    """At start: bring the cache under its cap (the cap may have been lowered) and log its size, entries and cap."""
    import logging

    log = logging.getLogger("broadcast_avatar")
    try:
        store = cache()
        store.enforce_cap()
        log.info("Broadcast Avatar: cache %s", store.describe())
    except OSError as exc:  # an unreadable folder: say so, load anyway
        log.warning("Broadcast Avatar: cache: %s", exc)


MEMORY_ROUTE = "/broadcast_avatar/memory"


def memory_report(trim: bool = False) -> dict:
    """What this server holds: host RSS of the process, the models in ComfyUI's model management (loaded on a
    device) and the pack's model handles still alive (loader outputs ComfyUI keeps in its cache).

    `trim`: first collect garbage and hand free heap pages back to the OS (glibc's malloc_trim, where there is
    one), so RSS counts what is alive rather than what the allocator kept for later."""
    import comfy.model_management as mm
    import psutil

    if trim:
        import ctypes
        import ctypes.util
        import gc

        gc.collect()
        try:
            ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (macOS, Windows, musl): RSS as it is
            pass

    loaded = []
    for lm in list(mm.current_loaded_models):
        model = getattr(lm, "model", None)
        inner = getattr(model, "model", None)
        loaded.append(type(inner if inner is not None else model).__name__)
    live = [m.name for m in list(_LIVE_MODELS)]
    return {"rss_bytes": int(psutil.Process().memory_info().rss), **_rss_parts(), "loaded_models": len(loaded),
            "loaded_model_types": sorted(loaded), "pack_models": len(live), "pack_model_names": sorted(live)}


def _rss_parts() -> dict:
    """RSS split as Linux counts it (/proc/self/status): anonymous pages (the heap, tensors: what a leak grows),
    file pages (mapped libraries, weights and memory-mapped cache entries: the kernel drops and re-reads those at
    will) and shared memory; {} where there is no /proc."""
    fields = {"RssAnon": "rss_anon_bytes", "RssFile": "rss_file_bytes", "RssShmem": "rss_shmem_bytes"}
    out = {}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in fields:
                    out[fields[name]] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return {}
    return out


def register_routes() -> None:
    """GET /broadcast_avatar/memory[?trim=1]: `memory_report()` as JSON (the memory test and anyone watching a server
    use it; POST /free {"unload_models": true} is core's way to unload)."""
    import logging

    try:
        from aiohttp import web
        from server import PromptServer

        routes = PromptServer.instance.routes
    except Exception as exc:  # not inside a running ComfyUI server
        logging.getLogger("broadcast_avatar").debug("Broadcast Avatar: no routes registered (%s)", exc)
        return

    @routes.get(MEMORY_ROUTE)
    async def _memory(request):
        return web.json_response(memory_report(trim=request.query.get("trim") in ("1", "true")))


def output_dir() -> Path:
    return Path(folder_paths.get_output_directory())


def temp_dir() -> Path:
    return Path(folder_paths.get_temp_directory())


def torch_device():
    import comfy.model_management

    return comfy.model_management.get_torch_device()


def offload_device():
    import comfy.model_management

    return comfy.model_management.unet_offload_device()


def _holder_class():
    import torch

    class Holder(torch.nn.Module):
        """Gives ModelPatcher a plain module to move: it sets `.device` on its model, which transformers models refuse."""

        def __init__(self, module):
            super().__init__()
            self.inner = module

    return Holder


_LIVE_MODELS = weakref.WeakSet()   # every ManagedModel still referenced (a loader's output in ComfyUI's cache)


class ManagedModel:
    """A loaded model behind a ComfyUI ModelPatcher, so core's model management places, offloads and unloads it.

    Every family's loader output wraps one of these: `ready()` before a run (others are offloaded if room is needed),
    `release()` after it where the family frees memory eagerly.

    Args:
        module: the networks, one `torch.nn.Module` (a container of several is fine).
        name: the model folder's name, for messages.
        wrap: put the module inside a plain holder first (transformers models refuse ModelPatcher's `.device`).
        engine: what `ready()` hands back (default: the module itself).
        full_load: `ready()` loads the whole module, never half-offloaded (see `load`).
    """

    def __init__(self, module, name: str, wrap: bool = False, engine=None, full_load: bool = True):
        import comfy.model_management as mm
        import comfy.model_patcher

        _LIVE_MODELS.add(self)
        self.module = module
        self.engine = module if engine is None else engine
        self.full_load = full_load
        self.name = name
        target = _holder_class()(module) if wrap else module
        self.patcher = comfy.model_patcher.ModelPatcher(target, load_device=mm.get_torch_device(),
                                                        offload_device=mm.unet_offload_device())

    def load(self, full: bool = True):
        """Load onto ComfyUI's compute device and return it. `full`: whole, never half-offloaded (diffusers and
        transformers modules have no cast hooks for a partial low-VRAM load)."""
        import comfy.model_management as mm
        import torch

        if full:
            mm.load_models_gpu([self.patcher], force_full_load=True)
        else:
            mm.load_models_gpu([self.patcher])
        return torch.device(self.patcher.load_device)

    def ready(self):
        """Load onto ComfyUI's compute device and return ``(engine object, device)``: the one shape every family's
        handle returns (the engine object is what its engine functions take: networks, a pipeline, a bundle)."""
        return self.engine, self.load(full=self.full_load)

    def release(self) -> None:
        """Offload this model (only this one) and return the freed memory to the driver."""
        import comfy.model_management as mm

        for i in reversed(range(len(mm.current_loaded_models))):
            loaded = mm.current_loaded_models[i]
            if loaded.model is self.patcher:
                loaded.model_unload()
                mm.current_loaded_models.pop(i)
        self.module.to(mm.unet_offload_device())
        mm.soft_empty_cache()


def refuse_non_finite(node_cls) -> None:
    """Make every Float input of `node_cls` refuse NaN and +-inf with an `InputError` naming it, before `execute`.

    ComfyUI's range check lets NaN through (every comparison with NaN is false), and infinity wherever an input has
    no maximum; both then surface deep inside as raw errors ("cannot convert float NaN to integer"). One check here,
    applied to every pack node when its family loads, covers nodes added later too.
    """
    import functools
    import inspect
    import math

    from comfy_api.latest import io

    schema = node_cls.define_schema()
    names = [i.id for i in schema.inputs if isinstance(i, io.Float.Input)]
    if not names or getattr(node_cls, "_finite_floats", None) == names:
        return
    func = inspect.getattr_static(node_cls, "execute").__func__

    def check(kwargs) -> None:
        for name in names:
            value = kwargs.get(name)
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(name, "a finite number", repr(value))

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def execute(cls, *args, **kwargs):
            check(kwargs)
            return await func(cls, *args, **kwargs)
    else:
        @functools.wraps(func)
        def execute(cls, *args, **kwargs):
            check(kwargs)
            return func(cls, *args, **kwargs)
    node_cls.execute = classmethod(execute)
    node_cls._finite_floats = names
