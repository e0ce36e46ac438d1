"""Paste-back of generated mouths: the mouth-only mask, exact window resizes, and loop indexing.

Frames are ComfyUI IMAGE layout ``[H, W, 3]`` float in 0..1; faces are ``[3, 256, 256]``; boxes are integer crop
boxes ``(x1, y1, x2, y2)`` inside the frame.

Why a mouth-only mask: the avatar's face crop follows the head, but a patch generated for one frame is pasted onto
that same frame only if the frame index follows video time. Even then a full-crop blend repaints nose and jaw from
the generated face, which shows as a seam (or a second pair of nostrils when poses differ). The mask is an ellipse
around the mouth with a cosine feather, exactly zero above the nose base and below the chin, so everything outside
it stays the source frame bit for bit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import torch

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
    scale = src / dst
    support = max(scale, 1.0)
    centres = (torch.arange(dst, dtype=torch.float64) + 0.5) * scale - 0.5
    taps = torch.arange(src, dtype=torch.float64)
    w = (1.0 - (taps[None, :] - centres[:, None]).abs() / support).clamp_min(0.0)
    w = w / w.sum(dim=1, keepdim=True)
    return w.to(device=device, dtype=dtype)


def crop_resize(frame: torch.Tensor, box, size: int = CROP) -> torch.Tensor:
    """Crop ``[H, W, 3]`` to `box` and resize to ``[3, size, size]``."""
    x1, y1, x2, y2 = (int(v) for v in box)
    patch = frame[y1:y2, x1:x2].permute(2, 0, 1).to(torch.float32)
    ry = resize_matrix(y2 - y1, size, frame.device)
    rx = resize_matrix(x2 - x1, size, frame.device)
    return torch.matmul(torch.matmul(ry, patch), rx.T)


def _support(mask: torch.Tensor) -> tuple[int, int, int, int]:
    rows = torch.nonzero(mask.amax(dim=1) > 0).flatten()
    cols = torch.nonzero(mask.amax(dim=0) > 0).flatten()
    if rows.numel() == 0:
        return 0, 0, 0, 0
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def _touching(r: torch.Tensor, lo: int, hi: int) -> tuple[int, int]:
    """Output rows of resize matrix `r` that read any of the source rows ``lo:hi``."""
    hits = torch.nonzero(r[:, lo:hi].sum(dim=1) > 0).flatten()
    if hits.numel() == 0:
        return 0, 0
    return int(hits[0]), int(hits[-1]) + 1


def paste_face(frame: torch.Tensor, face: torch.Tensor, mask: torch.Tensor, box) -> None:
    """Blend `face` ``[3, 256, 256]`` into `frame` ``[H, W, 3]`` (in place) through `mask` ``[256, 256]`` at `box`.

    Only the window of the box that the mask reaches is resized and written; inside it, pixels whose resized alpha
    is exactly 0 keep their source value bit for bit (``bg + 0·(fg − bg)``).
    """
    x1, y1, x2, y2 = (int(v) for v in box)
    h, w = y2 - y1, x2 - x1
    r0, r1, c0, c1 = _support(mask)
    if r1 == r0 or h <= 0 or w <= 0:
        return
    dev = frame.device
    ry = resize_matrix(mask.shape[0], h, dev)
    rx = resize_matrix(mask.shape[1], w, dev)
    a0, a1 = _touching(ry, r0, r1)
    b0, b1 = _touching(rx, c0, c1)
    ry, rx = ry[a0:a1], rx[b0:b1]
    alpha = torch.matmul(torch.matmul(ry, mask.to(dev, torch.float32)), rx.T)            # [hs, ws]
    fg = torch.matmul(torch.matmul(ry, face.to(dev, torch.float32).clamp(0, 1)), rx.T)   # [3, hs, ws]
    region = frame[y1 + a0:y1 + a1, x1 + b0:x1 + b1]
    bg = region.to(torch.float32).permute(2, 0, 1)
    out = bg + alpha[None] * (fg - bg)
    region.copy_(out.permute(1, 2, 0).to(frame.dtype))


def source_indices(n_frames: int, out_fps: float, loop_fps: float, loop_len: int, mode: str = "loop",
                   start: int = 0) -> torch.Tensor:
    """Loop frame shown at each output frame, from video time: ``floor(t · loop_fps)`` wrapped into the loop.

    `mode` "loop" wraps modulo the loop length; "ping-pong" plays it forward then backward (period ``2L − 2``).
    """
    if mode not in ("loop", "ping-pong"):
        raise ValueError(f"unknown loop mode {mode!r}")
    k = torch.arange(start, start + n_frames, dtype=torch.float64)
    i = torch.floor(k / float(out_fps) * float(loop_fps) + 1e-9).to(torch.long)
    if mode == "ping-pong" and loop_len > 1:
        period = 2 * loop_len - 2
        j = torch.remainder(i, period)
        return torch.where(j < loop_len, j, period - j)
    return torch.remainder(i, loop_len)

