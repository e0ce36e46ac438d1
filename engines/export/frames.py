"""Frame conversion for the writer: whatever arrives -> what PyAV takes, in bounded pieces.

Frames arrive as `[N, H, W, C]` (C = 3, or 4 with the alpha dropped) uint8 or float tensors/arrays, on the CPU or a
GPU. Two routes, chosen per chunk:

- CPU frames become rgb24 (rgb48le at 10 bit) host arrays and PyAV's threaded swscale converts them to YUV. That is
  faster than converting in numpy (measured ~3.4 ms vs ~14 ms per 1080x1920 frame) and runs off the Python thread.
- GPU frames are converted to NV12 (yuv420p10le at 10 bit) on the GPU, so the host copy is 1.5 bytes per pixel
  instead of 12 for a float IMAGE, and the result is declared to PyAV as exactly that format (declaring NV12 as
  yuv420p scrambles chroma).

Float frames are scaled to integers with NaN mapped to 0 and everything clamped to the valid range, a few frames at
a time into reused scratch buffers, so the extra memory never depends on the clip's length. Odd sizes are padded to
even by repeating the last row/column (4:2:0 needs even sizes; repeating avoids a coloured seam).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import torch

from ..common.errors import InputError
from ..common.images import RGB_OR_RGBA, check_image_batch

# Float scratch per GPU conversion step (~3 frames of 1080x1920 float32): bounds memory, keeps torch calls large.
SCRATCH_BYTES = 64 * 1024 * 1024
# Rows converted at a time on the CPU route: small enough to stay in cache between the element-wise steps
# (measured on 1080-wide frames: 2.8 ms per frame at ~64 rows vs 3.5 ms at 16 rows and ~5 ms for whole frames).
BLOCK_BYTES = 768 * 1024

# BT.601 luma weights and the limited-range scales (8 bit; x4 at 10 bit).
KR, KG, KB = 0.299, 0.587, 0.114
Y_OFFSET, Y_RANGE, C_OFFSET, C_RANGE = 16.0, 219.0, 128.0, 224.0


def _nan_casts_to_zero() -> bool:
    """Whether numpy's float32 -> uint8/uint16 cast maps NaN to 0 here (x86 and ARM do; C leaves it undefined)."""
    probe = np.full((4, 4099), 0.5, np.float32)  # contiguous blocks of the sizes the converter casts, odd offsets
    probe[:, ::7] = np.nan
    with np.errstate(invalid="ignore"):
        return all(bool((probe.astype(dtype)[:, ::7] == 0).all()) for dtype in (np.uint8, np.uint16))


NAN_CASTS_TO_ZERO = _nan_casts_to_zero()


def check_chunk(frames: Any, input_name: str = "images") -> torch.Tensor | np.ndarray:
    """Validate one chunk and return it as `[N, H, W, 3]` (a view where possible, never a copy of the data)."""
    arr = frames.detach() if isinstance(frames, torch.Tensor) else frames
    if isinstance(arr, (torch.Tensor, np.ndarray)) and arr.ndim == 4 and arr.shape[0] == 0:
        return arr[..., :3]          # an empty chunk is allowed: the writer skips it
    arr = check_image_batch(arr, input_name, channels=RGB_OR_RGBA, single_frame=True, min_size=2)
    dtype_ok = (arr.dtype in (np.uint8, np.float16, np.float32, np.float64) if isinstance(arr, np.ndarray)
                else arr.dtype in (torch.uint8, torch.float16, torch.bfloat16, torch.float32, torch.float64))
    if not dtype_ok:
        raise InputError(input_name, "uint8 (0-255) or float (0-1) pixels", f"dtype {arr.dtype}")
    return arr[..., :3]


def is_float(arr) -> bool:
    return arr.dtype not in (np.uint8, torch.uint8)


def is_on_gpu(arr) -> bool:
    return isinstance(arr, torch.Tensor) and arr.device.type != "cpu"


def frames_per_step(height: int, width: int) -> int:
    return max(1, SCRATCH_BYTES // (height * width * 3 * 4))


class HostRGB:
    """CPU route: yields one `[H2, W2, 3]` rgb24 (uint8) or rgb48le (uint16) array per frame, padded to even.

    Float frames are converted by one helper thread, two frames ahead of the encoder, into a ring of three output
    buffers: numpy releases the GIL, so the conversion runs while x264 and swscale work on the previous frame instead
    of adding to the wall time. Each frame is converted in row blocks that fit the CPU cache (~768 KB), so the
    element-wise steps cost about one trip through memory. Memory is three frames plus one block, whatever the clip.
    """

    AHEAD = 2

    def __init__(self, bit_depth: int):
        self.bit_depth = bit_depth
        self.dtype = np.uint8 if bit_depth == 8 else np.uint16
        self.scale = 255.0 if bit_depth == 8 else 65535.0
        self._ring: list[np.ndarray] = []
        self._block: np.ndarray | None = None
        self._pool = None

    @property
    def format(self) -> str:
        return "rgb24" if self.bit_depth == 8 else "rgb48le"

    def close(self) -> None:
        """Stop the helper thread (after the frame it may be converting)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def frames(self, chunk) -> Iterator[np.ndarray]:
        n, h, w = (int(d) for d in chunk.shape[:3])
        h2, w2 = h + h % 2, w + w % 2
        if not is_float(chunk) and self.bit_depth == 8 and (h2, w2) == (h, w):
            for i in range(n):  # uint8 in, uint8 out, already even: hand the frames over as they are
                yield np.ascontiguousarray(_numpy(chunk[i]))
            return
        if len(self._ring) != self.AHEAD + 1 or self._ring[0].shape != (h2, w2, 3):
            self._ring = [np.empty((h2, w2, 3), self.dtype) for _ in range(self.AHEAD + 1)]
        if not is_float(chunk):  # uint8 that needs padding or widening: cheap, no thread
            for i in range(n):
                out = self._ring[i % len(self._ring)]
                np.multiply(_numpy(chunk[i]), 1 if self.bit_depth == 8 else 257, out=out[:h, :w], casting="unsafe")
                pad_even(out[None], h, w)
                yield out
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(1, thread_name_prefix="broadcast-export-convert")
        pending: list = []
        try:
            for i in range(min(self.AHEAD, n)):
                pending.append(self._pool.submit(self._convert_frame, chunk[i], self._ring[i % len(self._ring)], h, w))
            for i in range(n):
                out = pending.pop(0).result()
                if i + self.AHEAD < n:
                    j = i + self.AHEAD
                    pending.append(self._pool.submit(self._convert_frame, chunk[j], self._ring[j % len(self._ring)],
                                                     h, w))
                yield out
        finally:  # a stopped consumer (cancel, error) must not leave the helper writing into the ring
            for future in pending:
                future.cancel()
            for future in pending:
                if not future.cancelled():
                    future.exception()

    def _convert_frame(self, frame, out: np.ndarray, h: int, w: int) -> np.ndarray:
        src = _numpy(frame)
        rows = max(1, BLOCK_BYTES // (w * 3 * 4))
        if self._block is None or self._block.shape != (rows, w, 3):
            self._block = np.empty((rows, w, 3), np.float32)
        for r in range(0, h, rows):
            s = src[r:r + rows]
            b = self._block[:s.shape[0]]
            # x*scale + 0.5, clamped; the cast truncates, so this rounds to nearest. clip keeps NaN (numpy's NaN-safe
            # fmax/fmin are ~3x slower). Where the cast itself turns NaN into 0 (checked at import, see
            # NAN_CASTS_TO_ZERO) nothing more is needed; elsewhere a sum over the clamped block (NaN iff a NaN is
            # left, ~1 ms per frame) routes the rare block with NaN through nan_to_num.
            np.multiply(s, self.scale, out=b, dtype=np.float32, casting="unsafe")
            np.add(b, 0.5, out=b)
            np.clip(b, 0.0, self.scale, out=b)
            if not NAN_CASTS_TO_ZERO and np.isnan(np.add.reduce(b, axis=None)):
                np.nan_to_num(b, copy=False, nan=0.0)
            with np.errstate(invalid="ignore"):
                np.copyto(out[r:r + s.shape[0], :w], b, casting="unsafe")
        pad_even(out[None], h, w)
        return out


def _numpy(t) -> np.ndarray:
    if isinstance(t, np.ndarray):
        return t
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.cpu().numpy()  # no copy for CPU tensors; GPU frames forced onto the swscale route come over here


def pad_even(out, h: int, w: int) -> None:
    """Fill the padding row/column of an even-sized buffer with copies of the last real row/column."""
    if out.shape[1] > h:
        out[:, h:, :w] = out[:, h - 1:h, :w]
    if out.shape[2] > w:
        out[:, :, w:] = out[:, :, w - 1:w]


def rgb_to_yuv420(chunk: torch.Tensor, bit_depth: int = 8) -> torch.Tensor:
    """RGB frames -> BT.601 limited-range 4:2:0, computed where `chunk` lives (the GPU route).

    Returns `[N, H2*3/2, W2]`: NV12 (Y plane, then interleaved UV) as uint8 at 8 bit, or planar yuv420p10le
    (Y, U, V) as int16 holding 0-1023 at 10 bit (PyAV has no p010le import; the encoder's format is reached by one
    swscale repack). Chroma is the mean of each 2x2 block. Input uint8 (0-255) or float (0-1, NaN -> 0, clamped).
    """
    x = chunk.float()
    if not is_float(chunk):
        x = x / 255.0
    else:
        x = torch.nan_to_num(x, nan=0.0, posinf=1.0, neginf=0.0).clamp_(0.0, 1.0)
    n, h, w = x.shape[:3]
    if h % 2 or w % 2:
        x = torch.nn.functional.pad(x.permute(0, 3, 1, 2), (0, w % 2, 0, h % 2), mode="replicate").permute(0, 2, 3, 1)
        h, w = h + h % 2, w + w % 2
    r, g, b = x.unbind(-1)
    mul = 1.0 if bit_depth == 8 else 4.0
    luma = KR * r + KG * g + KB * b
    y = (Y_OFFSET + Y_RANGE * luma) * mul
    rgb2 = torch.nn.functional.avg_pool2d(x.permute(0, 3, 1, 2), 2)  # [N, 3, H/2, W/2]
    r2, g2, b2 = rgb2.unbind(1)
    luma2 = KR * r2 + KG * g2 + KB * b2
    u = (C_OFFSET + C_RANGE * (b2 - luma2) / (2 * (1 - KB))) * mul
    v = (C_OFFSET + C_RANGE * (r2 - luma2) / (2 * (1 - KR))) * mul
    top = 255.0 * mul if bit_depth == 8 else 1023.0
    if bit_depth == 8:
        uv = torch.stack((u, v), dim=-1).reshape(n, h // 2, w)  # interleaved U,V per pixel pair
        out = torch.cat((y, uv), dim=1)
        return out.add_(0.5).clamp_(0, top).to(torch.uint8)
    planes = torch.cat((y.reshape(n, -1), u.reshape(n, -1), v.reshape(n, -1)), dim=1)
    # int16 holds 0..1023 exactly; the host side reinterprets it as uint16 (torch's uint16 support is partial).
    return planes.add_(0.5).clamp_(0, top).to(torch.int16).reshape(n, h * 3 // 2, w)


def yuv_format(bit_depth: int) -> str:
    """The PyAV format name of `rgb_to_yuv420` output."""
    return "nv12" if bit_depth == 8 else "yuv420p10le"


class DeviceYUV:
    """GPU route: converts each chunk on its device, copies the 4:2:0 result to the host, yields per frame."""

    def __init__(self, bit_depth: int):
        self.bit_depth = bit_depth
        self.format = yuv_format(bit_depth)

    def close(self) -> None:
        pass

    def frames(self, chunk) -> Iterator[np.ndarray]:
        if isinstance(chunk, np.ndarray):
            chunk = torch.from_numpy(chunk)
        n, h, w = (int(d) for d in chunk.shape[:3])
        step = frames_per_step(h, w)
        for start in range(0, n, step):
            yuv = rgb_to_yuv420(chunk[start:start + step], self.bit_depth)
            host = yuv.cpu().numpy()
            if self.bit_depth == 10:
                host = host.view(np.uint16)
            for i in range(host.shape[0]):
                yield host[i]
