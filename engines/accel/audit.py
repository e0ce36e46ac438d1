"""A device-placement audit: run an engine with its weights on another device and record every op that mixes devices.

On a GPU, an op whose tensors sit on two devices raises "Expected all tensors to be on the same device". On the CPU
that bug is invisible, and weights on the ``meta`` device do not expose it either: ``conv2d`` / ``linear`` with a CPU
input and meta weights quietly return a meta tensor. This dispatch mode sees every ATen op instead and records those
whose tensor arguments (0-d scalars aside, as ATen allows them) are on more than one device.

With weights on ``meta`` nothing has values, so data-dependent ops get placeholders and the run goes on: ``.item()``
returns 0, copying a meta tensor to the CPU returns zeros of its shape, and ``nonzero`` / boolean-mask indexing
select every element. Values after such a point are meaningless; the audit is about
placement only, and the engine's code path (what it moves where) is the one a GPU user runs.
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

aten = torch.ops.aten


class DeviceMixAudit(TorchDispatchMode):
    """Records ``"op: device, device"`` for each mixed-device op (`mixed`, a Counter)."""

    def __init__(self):
        super().__init__()
        self.mixed: Counter = Counter()
        self.placeholders: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        devices = {t.device for t in flat if isinstance(t, torch.Tensor) and t.dim() > 0}
        if len(devices) > 1 and func not in _MOVES:
            self.mixed[f"{func.overloadpacket.__name__}: {', '.join(sorted(str(d) for d in devices))}"] += 1
        try:
            return func(*args, **kwargs)
        except (NotImplementedError, RuntimeError) as exc:
            if len(devices) > 1:       # recorded above; carry on with every operand on meta (shapes only)
                meta_args, meta_kwargs = tree_map(_to_meta, (args, kwargs))
                return func(*meta_args, **meta_kwargs)
            out = self._placeholder(func, args, kwargs, exc)
            self.placeholders[func.overloadpacket.__name__] += 1
            return out

    @staticmethod
    def _placeholder(func, args, kwargs, exc):
        if func is aten._local_scalar_dense.default:              # .item() on meta
            return 0
        if func is aten.copy_.default and isinstance(args[1], torch.Tensor) and args[1].is_meta:
            return args[0]                                         # cpu_tensor.copy_(meta): keeps its values
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if src is not None and src.is_meta and func in _MOVES:   # meta -> cpu copy: zeros of its shape
            rest = list(args[1:]) + list(kwargs.values())
            device = next((a.device if isinstance(a, torch.Tensor) else torch.device(a) for a in rest
                           if isinstance(a, (torch.Tensor, torch.device))), torch.device("cpu"))
            dtype = next((a for a in rest if isinstance(a, torch.dtype)), src.dtype)
            return torch.zeros(src.shape, dtype=dtype, device=device)
        raise exc


def _to_meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) and x.dim() > 0 else x


# ops whose job is to move a tensor between devices: mixing is what they are for
# (in inference mode ``.to()`` arrives whole, as aten.to.*, instead of as _to_copy)
_MOVES = {aten._to_copy.default, aten.copy_.default, aten._copy_from.default, aten._copy_from_and_resize.default,
          aten.to.dtype_layout, aten.to.device, aten.to.dtype, aten.to.other}


@contextmanager
def audit_devices() -> Iterator[DeviceMixAudit]:
    from torch.fx.experimental import _config as fx_config

    mode = DeviceMixAudit()
    # nonzero / boolean-mask indexing on meta: pretend every element is selected (a placeholder of the right rank)
    saved = fx_config.meta_nonzero_assume_all_nonzero
    fx_config.meta_nonzero_assume_all_nonzero = True
    try:
        with mode:
            yield mode
    finally:
        fx_config.meta_nonzero_assume_all_nonzero = saved


def move_weights(module: torch.nn.Module, device: str = "meta") -> torch.nn.Module:
    """Parameters and buffers to `device` in place (meta: shapes kept, storage dropped)."""
    return module.to_empty(device=device) if device == "meta" else module.to(device)
