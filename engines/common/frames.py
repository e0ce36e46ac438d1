"""Frame chunks -> one clip, or -> a stream handed on: the two ends of a renderer's generator (MuseTalk, Ditto).

Renderers yield chunks in order so a long clip can go straight to the writer; when the whole clip is wanted as an
IMAGE batch it is written into one preallocated tensor, never concatenated (which would hold it twice). A
`FrameStream` is the renderer not yet run: the node after it (Export Video) pulls the chunks while it encodes.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

import torch


class FrameStream:
    """A renderer's frames, not rendered yet: iterating it yields the chunks ``[b, H, W, 3]`` of ``make()`` (the
    renderer's generator) in order, so only a few chunks exist at a time.

    ``make()`` is called once here, so whatever the renderer checks before its first frame is refused in the node
    that made the stream; each further iteration calls it again and renders anew (a cached stream handed to a
    second export renders again rather than replaying frames nobody kept). `frames` is the count it yields, `fps`
    its rate, `source` the renderer's name (for messages)."""

    def __init__(self, make: Callable[[], Iterator[torch.Tensor]], frames: int, fps: float, source: str = "renderer"):
        self._make = make
        self._first = [make()]
        self.frames = int(frames)
        self.fps = float(fps)
        self.source = source

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter(self._first.pop() if self._first else self._make())

    def __len__(self) -> int:
        return self.frames

    def __repr__(self) -> str:
        return f"FrameStream({self.source}, {self.frames} frames at {self.fps:g} fps)"


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


def frames_to_uint8(images: torch.Tensor) -> torch.Tensor:
    """ComfyUI IMAGE (N, H, W, C) float in [0, 1] -> (N, H, W, 3) uint8, frame by frame (no float copy). Lossless
    for frames decoded from a file (Load Video's are k/255)."""
    out = torch.empty(tuple(images.shape[:3]) + (3,), dtype=torch.uint8)
    for i in range(images.shape[0]):
        out[i] = (images[i, :, :, :3].clamp(0, 1) * 255).round().to(torch.uint8)
    return out


class ByteFrames:
    """uint8 frames ``[N, H, W, 3]`` (usually memory-mapped from the cache) that read as a float32 0-1 IMAGE batch:
    indexing converts only the frames asked for, so a cached 1080p loop is never converted (4 bytes a sample) whole.

    Offers what a renderer uses of a frame batch: ``shape``, ``dtype`` (float32), ``device``, ``len()``, indexing
    (an int, a slice or an index tensor -> a float tensor) and ``float()`` (the whole batch, converted).
    """

    dtype = torch.float32

    def __init__(self, data: torch.Tensor):
        if data.dtype != torch.uint8 or data.dim() != 4:
            raise ValueError(f"ByteFrames: expected uint8 [N, H, W, C], got {data.dtype} {tuple(data.shape)}")
        self.data = data

    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    @property
    def device(self) -> torch.device:
        return self.data.device

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __getitem__(self, index) -> torch.Tensor:
        return self.data[index].to(torch.float32).div_(255.0)

    def float(self) -> torch.Tensor:
        return self[:]
