"""The loader nodes' `backend` input and the one place runners are built for a loaded model (engines/accel).

A loader takes `backend` (auto and each backend); the model handle builds the runners when the model is first used
on its compute device at a batch size (TensorRT profiles and CUDA graphs are per batch), reuses them afterwards, and
says what runs, once, in the log and in the using node's summary text.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from comfy_api.latest import io

from ..engines.accel import BACKENDS, BuildOptions

__all__ = ["BACKENDS", "Accelerated", "backend_input", "build_options", "engine_root"]
from . import comfy_bridge

BACKEND_TOOLTIP = ("auto: the fastest that works here, per network (TensorRT, then CUDA graphs, then eager on a GPU; "
                   "on the CPU eager PyTorch, which measured fastest there: docs/accel.md). A "
                   "backend that cannot run falls back to eager PyTorch and the summary says why. TensorRT engines "
                   "are built on first use into models/broadcast_tensorrt (minutes).")


def backend_input() -> io.Combo.Input:
    # optional: workflows saved before the input existed run as before (auto)
    return io.Combo.Input("backend", options=list(BACKENDS), default="auto", tooltip=BACKEND_TOOLTIP, optional=True)


def engine_root() -> Path:
    import folder_paths

    return Path(folder_paths.get_folder_paths(comfy_bridge.TRT_FOLDER)[0])


def build_options(batch: int) -> BuildOptions:
    bar = comfy_bridge.progress(1)

    def report(done: int, total: int) -> None:          # TensorRT build phases -> the node's progress bar
        if total:
            bar.reset(total)
        elif done:
            bar.step()
    return BuildOptions(batches=(int(batch),), cache=comfy_bridge.cache(), engine_root=engine_root(), progress=report)


class Accelerated:
    """Mixed into a model handle: the runners of one group of networks (a renderer's, Ditto Motion's) built for the
    key of the run at hand (device, batch or guidance: what the runners are fixed to), summaries kept. A run with
    another key builds again and the group's old runners are dropped (a CUDA graph's pool goes with its runner), so
    a handle never holds runners for keys no longer in use, nor answers "ready" with runners built for another."""

    backend = "eager"

    def runners_for(self, key: tuple, batch: int, build: Callable[[BuildOptions], list],
                    group: str = "render") -> list[str]:
        built = self.__dict__.setdefault("_accel_built", {})
        if group not in built or built[group][0] != key:
            # engines/accel logs each network's choice once (with its reason); the node's summary repeats it
            built[group] = (key, build(build_options(batch)))
        return built[group][1]
