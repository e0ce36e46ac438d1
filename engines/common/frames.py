"""Frame chunks -> one clip, or -> a stream handed on: the two ends of a renderer's generator (MuseTalk, Ditto).

Renderers yield chunks in order so a long clip can go straight to the writer; when the whole clip is wanted as an
IMAGE batch it is written into one preallocated tensor, never concatenated (which would hold it twice). A
`FrameStream` is the renderer not yet run: the node after it (Export Video) pulls the chunks while it encodes.

The byte path (renderer -> encoder): frames stay uint8 from the cached loop to the writer, which takes uint8 without a
copy. Only the window a renderer pastes into is float, for the blend: `window_float` reads a frame's window as
``[3, h, w]`` float 0-1 on the device that computes it (only the window's bytes cross), `store_window` writes the
blended window back rounded as the export rounds a float frame (``floor(x*255 + 0.5)``, clamped), so a frame holds
the bytes the export would have made of the float frame. `FrameRing` recycles the chunk buffers: a fresh 8-frame
1080x1920 chunk costs the kernel's page faults (measured here ~2.0 ms a frame against 0.5 ms for the copy into a
reused one). IMAGE outputs convert once, at the edge (`collect_frames`, `image_from_bytes`).
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, Optional

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
    """``[total, *frame_shape]`` filled from the chunks in order (on the CPU); raises if they do not add up.

    uint8 chunks collected as a float `dtype` become 0-1 (``x / 255``, as `ByteFrames` reads them): the IMAGE edge
    of a byte renderer, converted chunk by chunk into the one clip tensor."""
    out = torch.empty((int(total), *frame_shape), dtype=dtype)
    done = 0
    for chunk in chunks:
        k = int(chunk.shape[0])
        if done + k > total:
            raise RuntimeError(f"the renderer yielded more than the {total} frames it announced")
        part = out[done:done + k]
        part.copy_(chunk)
        if chunk.dtype == torch.uint8 and dtype.is_floating_point:
            part.div_(255.0)
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


def image_from_bytes(frames: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """uint8 frames -> a float32 0-1 IMAGE on the CPU (``x / 255``); float frames and None pass through."""
    if frames is None or frames.dtype != torch.uint8:
        return frames
    return frames.to("cpu", torch.float32).div_(255.0)


def to_bytes(values: torch.Tensor) -> torch.Tensor:
    """Float 0-1 -> uint8 the way the export rounds a float frame (engines/export/frames.HostRGB): ``x*255 + 0.5``
    in float32, clamped to 0..255, truncated; computed where `values` lives."""
    return values.to(torch.float32).mul(255.0).add_(0.5).clamp_(0.0, 255.0).to(torch.uint8)


def window_float(region: torch.Tensor, device=None) -> torch.Tensor:
    """A frame's window ``[h, w, 3]`` (uint8, or float 0-1) -> a new contiguous ``[3, h, w]`` float32 0-1 on `device`
    (default: the region's); for bytes only the window's bytes move. Planar like the patches blended into it, so
    the blend's element-wise steps run on contiguous memory (the transpose is paid once, here)."""
    device = region.device if device is None else torch.device(device)
    x = region.to(device).permute(2, 0, 1).to(torch.float32, memory_format=torch.contiguous_format, copy=True)
    return x.div_(255.0) if region.dtype == torch.uint8 else x


def store_window(region: torch.Tensor, values: torch.Tensor) -> None:
    """Write the blended window `values` ``[3, h, w]`` (float 0-1, any device) into `region` ``[h, w, 3]`` in place,
    rounded to bytes by `to_bytes` on `values`' device (so only bytes come back) when the frame is uint8."""
    region.copy_((to_bytes(values) if region.dtype == torch.uint8 else values).permute(1, 2, 0))


def frame_bytes(frames, index: int) -> torch.Tensor:
    """Loop frame `index` of `frames` as uint8 ``[H, W, 3]``: a view for `ByteFrames` or a uint8 tensor; a float IMAGE
    frame is rounded by `to_bytes` (the slow path: avatars keep their loop as bytes)."""
    data = frames.data if isinstance(frames, ByteFrames) else frames
    frame = data[index]
    return frame if frame.dtype == torch.uint8 else to_bytes(frame)


class FrameRing:
    """Reused uint8 chunk buffers for a renderer's output: `take(n, shape)` returns the next of `slots` buffers
    (made again only when a larger chunk is asked for), so a long clip allocates `slots` chunks in all.

    A chunk taken here is overwritten `slots` chunks later: its consumer must be done with it (or have copied it)
    by then. The pack's consumers are (the writer encodes a chunk before it asks for the next, `collect_frames` and
    `stream_video`'s last frame copy it); `slots` also covers the chunks a threaded stage holds ahead of its
    consumer (engines/accel/stages.threaded). Renderers use it only when the caller says so (`reuse_buffers`).
    """

    def __init__(self, slots: int, device=None):
        self.slots = max(1, int(slots))
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self._buffers: list = [None] * self.slots
        self._next = 0

    def take(self, n: int, frame_shape: tuple) -> torch.Tensor:
        i = self._next
        self._next = (i + 1) % self.slots
        buf = self._buffers[i]
        if buf is None or buf.shape[0] < n or tuple(buf.shape[1:]) != tuple(frame_shape):
            buf = torch.empty((max(int(n), 1), *frame_shape), dtype=torch.uint8, device=self.device)
            self._buffers[i] = buf
        return buf[:n]


def chunk_buffer(ring: Optional[FrameRing], n: int, frame_shape: tuple) -> torch.Tensor:
    """An output chunk ``[n, *frame_shape]`` uint8 on the CPU: from `ring` when the caller recycles buffers, else a
    new one."""
    return ring.take(n, frame_shape) if ring is not None else torch.empty((n, *frame_shape), dtype=torch.uint8)


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
