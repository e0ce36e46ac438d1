"""The one shape policy for fixed-shape backends (TensorRT profiles, CUDA graphs, compiled with static shapes).

Such a backend is built for a few batch sizes and must only ever be called with one of them: a TensorRT context
refuses a shape outside its profiles, a CUDA graph replays the shapes it captured, a static compile recompiles for
each new shape. Renderers end a clip with a short batch (13 frames through a batch-4 engine: 4, 4, 4, 1), so every
call of such a runner goes through `run_fixed`, which

- passes a batch that was built straight through;
- pads a shorter one to the smallest built batch that holds it, with copies of its last row (a real sample: no
  zeros that a normalisation layer would divide by), and crops every output back to the rows asked for;
- splits a longer one into chunks of the largest built batch (the last chunk padded as above).

Rows are independent in every network the pack accelerates (batch-first inputs and outputs, no batch statistics),
so the rows asked for come out as an exact-batch run would give them.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from .network import as_tuple


def pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """`x` with its last row repeated until it has `rows` rows."""
    m = x.shape[0]
    if m >= rows:
        return x
    return torch.cat([x, x[-1:].expand(rows - m, *x.shape[1:])], dim=0)


def target_batch(rows: int, built: Sequence[int]) -> int:
    """The built batch a call of `rows` rows runs at: the smallest that holds them, else the largest (split)."""
    fits = [b for b in built if b >= rows]
    return min(fits) if fits else max(built)


def run_fixed(fn: Callable, built: Sequence[int], inputs: Sequence[torch.Tensor]):
    """``fn(*inputs)`` computed only at batch sizes in `built` (module docstring); outputs as `fn` returns them."""
    rows = int(inputs[0].shape[0])
    if rows in built or not built:
        return fn(*inputs)
    if rows < 1:
        raise ValueError("a fixed-shape runner needs at least one row")
    step = target_batch(rows, built)
    parts, single = [], False
    for start in range(0, rows, step):
        chunk = [x[start:start + step] for x in inputs]
        n = int(chunk[0].shape[0])
        out = fn(*(pad_rows(x, step) for x in chunk))
        single = isinstance(out, torch.Tensor)
        parts.append(tuple(o[:n] for o in as_tuple(out)))
    if len(parts) == 1:
        res = parts[0]
    else:
        res = tuple(torch.cat(os, dim=0) for os in zip(*parts))
    return res[0] if single else res
