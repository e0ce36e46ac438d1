"""Paste-back of generated mouths: the mouth-only mask, exact window resizes, and loop indexing.

Frames are ``[H, W, 3]``: uint8 on the render path (the byte path, engines/common/frames.py: only the pasted
window is float, and it is rounded back as the export rounds), or ComfyUI IMAGE float in 0..1; faces are
``[3, 256, 256]``; boxes are integer crop boxes ``(x1, y1, x2, y2)`` inside the frame.

Why a mouth-only mask: the avatar's face crop follows the head, but a patch generated for one frame is pasted onto
that same frame only if the frame index follows video time. Even then a full-crop blend repaints nose and jaw from
the generated face, which shows as a seam (or a second pair of nostrils when poses differ). The mask is an ellipse
around the mouth with a cosine feather, exactly zero above the nose base and below the chin, so everything outside
it stays the source frame bit for bit.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

import torch

from ..common import blend_modes
from ..common.frames import store_window, window_float
from ..common.loop_modes import loop_index

CROP = 256


@dataclass(frozen=True)
class MouthEllipse:
    """The mouth region in 256x256 crop pixels (MuseTalk's crop: lip seam near row 188, chin near row 230).

    ``feather`` is the fraction of the radius over which alpha falls from 1 to 0 (cosine); rows at or above
    ``cy - ry`` (the nose base) and at or below ``cy + ry`` (the chin) are always 0.
    """

    cx: float = 127.0
    cy: float = 196.0
    rx: float = 66.0
    ry: float = 38.0
    feather: float = 0.5

    @property
    def nose_row(self) -> int:
        return int(math.floor(self.cy - self.ry))

    @property
    def chin_row(self) -> int:
        return int(math.ceil(self.cy + self.ry))


def mouth_mask(ellipse: MouthEllipse = MouthEllipse(), size: int = CROP) -> torch.Tensor:
    """The feathered mouth alpha ``[size, size]`` float32 in 0..1 (1 in the core, 0 outside the ellipse)."""
    s = size / CROP
    y = torch.arange(size, dtype=torch.float64)[:, None] / s
    x = torch.arange(size, dtype=torch.float64)[None, :] / s
    r = torch.sqrt(((x - ellipse.cx) / ellipse.rx) ** 2 + ((y - ellipse.cy) / ellipse.ry) ** 2)
    feather = min(max(ellipse.feather, 1e-6), 1.0)
    core = 1.0 - feather
    t = ((r - core) / feather).clamp(0.0, 1.0)
    alpha = 0.5 * (1.0 + torch.cos(math.pi * t))
    alpha[r >= 1.0] = 0.0
    alpha[: int(math.floor(ellipse.nose_row * s)) + 1] = 0.0
    alpha[int(math.ceil(ellipse.chin_row * s)):] = 0.0
    return alpha.to(torch.float32)


def resize_matrix(src: int, dst: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """``[dst, src]`` weights of a triangle-filter resize (bilinear up, area-antialiased down), rows sum to 1.

    A resize is ``R_y @ img @ R_x.T``; taking rows of the matrices resizes only a window of the output, with the
    same values the full resize would give there.
    """
    return _MATRICES.get(int(src), int(dst)).to(device=device, dtype=dtype)


def _build_resize_matrix(src: int, dst: int) -> torch.Tensor:
    scale = src / dst
    support = max(scale, 1.0)
    centres = (torch.arange(dst, dtype=torch.float64) + 0.5) * scale - 0.5
    taps = torch.arange(src, dtype=torch.float64)
    w = (1.0 - (taps[None, :] - centres[:, None]).abs() / support).clamp_min(0.0)
    return (w / w.sum(dim=1, keepdim=True)).to(torch.float32)


# One matrix per (crop side, box side): ~60 KB at the tiny test sizes, ~0.5 MB for a 1080p face box (256 x ~500
# float32). A loop has few box sizes, but a server that keeps running sees every clip's; a count bound (the former
# lru_cache of 512) let that reach ~220 MB at full size, so the bound is in bytes.
RESIZE_CACHE_BYTES = 16 << 20


class ResizeMatrixCache:
    """Least-recently-used resize matrices (`_build_resize_matrix`), at most `max_bytes` of tensor data in all.

    A matrix larger than the whole cap is built and returned but not kept. Thread-safe (the pipelined lip-sync
    pastes from worker threads); an evicted matrix a caller still holds stays valid (it is only no longer cached).
    """

    def __init__(self, max_bytes: int = RESIZE_CACHE_BYTES):
        if int(max_bytes) < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.hits = self.misses = self.evictions = 0
        self._entries: "OrderedDict[tuple[int, int], torch.Tensor]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, src: int, dst: int) -> torch.Tensor:
        key = (int(src), int(dst))
        with self._lock:
            m = self._entries.get(key)
            if m is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return m
            self.misses += 1
        m = _build_resize_matrix(*key)
        with self._lock:
            if key in self._entries or m.nbytes > self.max_bytes:   # another thread built it, or it never fits
                return self._entries.get(key, m)
            self._entries[key] = m
            self.nbytes += m.nbytes
            while self.nbytes > self.max_bytes:
                _, old = self._entries.popitem(last=False)
                self.nbytes -= old.nbytes
                self.evictions += 1
        return m

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0


_MATRICES = ResizeMatrixCache()


def crop_resize(frame: torch.Tensor, box, size: int = CROP) -> torch.Tensor:
    """Crop ``[H, W, 3]`` to `box` and resize to ``[3, size, size]``."""
    x1, y1, x2, y2 = (int(v) for v in box)
    patch = frame[y1:y2, x1:x2].permute(2, 0, 1).to(torch.float32)
    ry = resize_matrix(y2 - y1, size, frame.device)
    rx = resize_matrix(x2 - x1, size, frame.device)
    return torch.matmul(torch.matmul(ry, patch), rx.T)


def _span(weights: torch.Tensor) -> tuple[int, int]:
    """First and one-past-last index where a 1-D tensor is non-zero (0, 0 if none)."""
    hits = torch.nonzero(weights > 0).flatten()
    return (int(hits[0]), int(hits[-1]) + 1) if hits.numel() else (0, 0)


@dataclass(frozen=True)
class _Plan:
    """Everything about pasting into a box of one size that does not depend on the frame or the face."""

    rows: tuple      # output window rows (a0, a1) inside the box
    cols: tuple      # output window cols (b0, b1)
    src_rows: tuple  # crop rows the window reads
    src_cols: tuple
    ry: torch.Tensor  # [a1-a0, src rows]
    rx: torch.Tensor  # [b1-b0, src cols]
    alpha: torch.Tensor  # [a1-a0, b1-b0]


class MouthPaster:
    """Pastes generated faces through one mouth mask; plans are cached per box size (a loop has few sizes).

    Only the window of the box that the mask reaches is resized and written, and only from the crop pixels that
    window reads; inside it, pixels whose resized alpha is exactly 0 keep their source value bit for bit
    (``bg + 0·(fg − bg)``). The result equals a full resize of face and mask to the box followed by a blend.
    """

    def __init__(self, mask: torch.Tensor, mode: str = "feather"):
        if mode not in blend_modes.MODES:
            raise ValueError(f"blend mode must be one of {blend_modes.MODES}, got {mode!r}")
        self.mode = mode  # feather, reinhard (Lab colour transfer first) or poisson (engines/common/blend_modes.py)
        self.mask = mask.detach().to("cpu", torch.float32)   # plans are built on the CPU, then moved to the frame
        mrows = self.mask.amax(dim=1)
        mcols = self.mask.amax(dim=0)
        self._support = (*_span(mrows), *_span(mcols))
        self._plans: dict = {}

    def plan(self, h: int, w: int, device) -> Optional[_Plan]:
        key = (h, w, str(device))
        if key not in self._plans:
            r0, r1, c0, c1 = self._support
            if r1 == r0 or h <= 0 or w <= 0:
                self._plans[key] = None
            else:
                ry = resize_matrix(self.mask.shape[0], h)
                rx = resize_matrix(self.mask.shape[1], w)
                a0, a1 = _span(ry[:, r0:r1].sum(dim=1))
                b0, b1 = _span(rx[:, c0:c1].sum(dim=1))
                s0, s1 = _span(ry[a0:a1].sum(dim=0))
                t0, t1 = _span(rx[b0:b1].sum(dim=0))
                ry, rx = ry[a0:a1, s0:s1], rx[b0:b1, t0:t1]
                alpha = ry @ self.mask[s0:s1, t0:t1] @ rx.T
                self._plans[key] = _Plan((a0, a1), (b0, b1), (s0, s1), (t0, t1), ry.to(device), rx.to(device),
                                         alpha.to(device))
        return self._plans[key]

    def read_window(self, sizes) -> tuple[int, int, int, int]:
        """Crop rows and columns ``(r0, r1, c0, c1)`` that pastes into boxes of these ``(h, w)`` sizes read (their
        union): a face's pixels outside it never reach a frame (the viseme cache keeps only this window)."""
        r0 = c0 = CROP
        r1 = c1 = 0
        for h, w in sizes:
            p = self.plan(int(h), int(w), "cpu")
            if p is not None:
                r0, r1 = min(r0, p.src_rows[0]), max(r1, p.src_rows[1])
                c0, c1 = min(c0, p.src_cols[0]), max(c1, p.src_cols[1])
        return (r0, r1, c0, c1) if r1 > r0 and c1 > c0 else (0, 0, 0, 0)

    def paste(self, frame: torch.Tensor, face: torch.Tensor, box, device=None, vae_range: bool = False) -> None:
        """Blend `face` ``[3, 256, 256]`` (0..1; with `vae_range`, straight from the VAE, -1..1, brought to 0..1 as
        ``x / 2 + 0.5`` clamped, on the window only) into `frame` ``[H, W, 3]`` (uint8 or float 0..1) in place at
        `box` ``(x1, y1, x2, y2)``.

        The window is computed on `device` (default: the face's, i.e. where the VAE decoded it): a frame elsewhere
        (the host) sends only its window there and gets the blended window back, as bytes for a uint8 frame.
        """
        x1, y1, x2, y2 = (int(v) for v in box)
        dev = face.device if device is None else torch.device(device)
        p = self.plan(y2 - y1, x2 - x1, dev)
        if p is None:
            return
        (a0, a1), (b0, b1), (s0, s1), (t0, t1) = p.rows, p.cols, p.src_rows, p.src_cols
        src = face[:, s0:s1, t0:t1].to(dev, torch.float32)
        src = (src / 2 + 0.5).clamp_(0, 1) if vae_range else src.clamp(0, 1)
        fg = torch.matmul(torch.matmul(p.ry, src), p.rx.T)                     # [3, hs, ws]
        region = frame[y1 + a0:y1 + a1, x1 + b0:x1 + b1]
        store_window(region, blend_modes.composite(fg, window_float(region, dev), p.alpha, self.mode))


def paste_face(frame: torch.Tensor, face: torch.Tensor, mask: torch.Tensor, box) -> None:
    """One-off paste (see `MouthPaster`, which caches the per-size plan for a whole clip)."""
    MouthPaster(mask).paste(frame, face, box)


def source_indices(n_frames: int, out_fps: float, loop_fps: float, loop_len: int, mode: str = "wrap",
                   start: int = 0) -> torch.Tensor:
    """Loop frame shown at each output frame, from video time: ``floor(t · loop_fps)`` walked through the loop by
    `mode` (`engines.common.loop_modes`: mirror, upstream's cycle, period ``2L``; ping-pong, period ``2L − 2``;
    wrap)."""
    k = torch.arange(start, start + n_frames, dtype=torch.float64)
    i = torch.floor(k / float(out_fps) * float(loop_fps) + 1e-9).to(torch.long)
    return loop_index(i, loop_len, mode)

