"""What the accelerated layer runs: a network with positional tensor inputs (batch first) and example inputs.

A family describes each of its networks once as a `Network` (see ``engines/musetalk/accel.py``,
``engines/ditto/accel.py``); every backend builds from that description, so eager, compiled, graph-captured,
ONNX Runtime and TensorRT runs take the same inputs and return the same outputs.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import torch
from torch import nn

from ..common.cache import content_hash


@dataclass(frozen=True)
class Preference:
    """What `auto` tries for one network on one device type, fastest first, and the measurement behind it.

    `order` ends with eager whether it says so or not (the fallback of every choice); `why` is shown with the
    choice in the log and the node's summary, so it should name what was measured (docs/accel.md).
    """

    order: tuple
    why: str


@dataclass
class Network:
    """name: file-safe id (``musetalk_unet``), part of every cache key and engine file name.
    module: ``forward(*inputs)`` -> a tensor or a tuple of tensors; every input and output has the batch first.
    example: ``example(batch)`` -> CPU inputs at that batch size (floating inputs in fp32; the runner casts them).
    input_names / output_names: the ONNX / TensorRT tensor names.
    weights_id: a fingerprint of the weights (e.g. of the model files); None = hashed from the state dict once.
    convolutional: 4-D activations, so channels-last memory helps on a GPU.
    prefer: device type -> `Preference`: a measured order for `auto` on that device where this network's fastest
    backend differs from the device's default order (``backends.AUTO_ORDER``).
    """

    name: str
    module: nn.Module
    example: Callable[[int], tuple]
    input_names: Sequence[str]
    output_names: Sequence[str]
    weights_id: Optional[str] = None
    convolutional: bool = False
    prefer: Mapping[str, Preference] = field(default_factory=dict)

    def tensors(self):
        return itertools.chain(self.module.parameters(), self.module.buffers())

    def parameter(self) -> torch.Tensor:
        return next(self.tensors())

    @property
    def device(self) -> torch.device:
        """Where the weights are now (ComfyUI may move them between calls): inputs follow the weights."""
        return self.parameter().device

    @property
    def dtype(self) -> torch.dtype:
        return next(p.dtype for p in self.tensors() if p.is_floating_point())

    def fingerprint(self) -> str:
        if self.weights_id is None:
            cached = getattr(self.module, "_accel_weights_id", None)
            if cached is None:
                cached = content_hash({k: v for k, v in self.module.state_dict().items()})
                self.module._accel_weights_id = cached
            return cached
        return self.weights_id


def is_gpu(device) -> bool:
    """The one test of "this runs on a CUDA GPU" for the GPU-only backends (CUDA graphs, TensorRT). The tests'
    contract fakes of those APIs (tests/fakes) stand the CPU in for the GPU by replacing this, and only this."""
    return torch.device(device).type == "cuda"


def place(inputs: Sequence, device: torch.device, dtype: torch.dtype, channels_last: bool = False) -> tuple:
    """Floating inputs to (device, dtype), integer ones to device only; 4-D ones channels-last when asked."""
    out = []
    for x in inputs:
        if x.is_floating_point():
            x = x.to(device=device, dtype=dtype)
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
        else:
            x = x.to(device)
        out.append(x)
    return tuple(out)


def as_tuple(out) -> tuple:
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out)
