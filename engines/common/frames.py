"""Frame chunks -> one clip: the non-streaming end of a renderer's generator (MuseTalk, Ditto).

Renderers yield chunks in order so a long clip can go straight to the writer; when the whole clip is wanted as an
IMAGE batch it is written into one preallocated tensor, never concatenated (which would hold it twice).
"""
from __future__ import annotations

from typing import Iterable

import torch


def collect_frames(chunks: Iterable[torch.Tensor], total: int, frame_shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """``[total, *frame_shape]`` filled from the chunks in order (on the CPU); raises if they do not add up."""
    out = torch.empty((int(total), *frame_shape), dtype=dtype)
    done = 0
    for chunk in chunks:
        k = int(chunk.shape[0])
        if done + k > total:
            raise RuntimeError(f"the renderer yielded more than the {total} frames it announced")
        out[done:done + k] = chunk
        done += k
    if done != total:
        raise RuntimeError(f"the renderer yielded {done} of the {total} frames it announced")
    return out
