"""Putback: the rendered 512 crop blended back into the frame through its crop affine, window only.

Upstream warps a feathered mask and the crop into the frame with two ``cv2.warpAffine`` calls (bilinear, zero
border) and blends ``m * render + (1 - m) * frame``. Here the same bilinear sampling is a ``grid_sample`` (crop and
mask as four channels; over the batch in `putback`, one frame at a time in the render's `paste_crops`), restricted
to the box each crop covers in its frame, so the work scales with the face, not with the frame. The grid is built
from the stored frame->crop affine (no grids are stored): for an output pixel p, the crop pixel is M_o2c @ p,
normalised for ``align_corners=False`` as (2x + 1) / 512 - 1.

The render's byte path (`paste_crops`): the frames are uint8 copies of the loop frames on the host; each one's
window (the box its crop covers) is sent to the crops' device as bytes, blended there in float and sent back as
bytes, rounded as the export rounds a float frame; nothing else of the frame is touched or converted. For feather
(the shipped blend) that is one fused pass per window (`_paste_feather_bytes`) whose temporaries live in a
`PasteWork` the render keeps for the whole clip. `putback` is the same blend into float copies of whole frames.

`blend` (engines/common/blend_modes.py): ``feather`` is upstream's blend above. ``reinhard`` first moves the rendered
mouth's colours to the frame's (CIE Lab mean and spread matched over the mouth region, the posts' X 181-331, Y
280-410 of the 512 crop with a 31x31 Gaussian feather, warped with the crop), then blends as feather: the rest of
the face is the feather result bit for bit. ``poisson`` clones the rendered face into the frame with
``cv2.seamlessClone`` over the feathered mask's support (the frame's own values on its border). In every mode a frame
pixel the mask does not reach is the frame, bit for bit.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from ..common import blend_modes
from ..common.frames import store_window, window_float

CROP = 512
BLEND_MODES = blend_modes.MODES
MOUTH_BOX = (181, 280, 331, 410)    # x0, y0, x1, y1 in the 512 crop: the posts' colour-transfer region
MOUTH_FEATHER = 31                  # Gaussian kernel (px at 512) that softens its edge


@lru_cache(maxsize=4)
def feather_mask(size: int = CROP, ratio: float = 0.9) -> np.ndarray:
    """Upstream's mask: 1 inside the central `ratio` square, linear ramps to 0 over the border, rounded corners."""
    inner = int(size * ratio)
    a = (size - inner) // 2
    b = a + inner
    mask = np.ones((size, size), np.float32)
    up = np.linspace(0, 1, a, dtype=np.float64)
    down = np.linspace(1, 0, size - b, dtype=np.float64)
    mask[:a, a:b] = up[:, None]
    mask[b:, a:b] = down[:, None]
    mask[a:b, :a] = up[None, :]
    mask[a:b, b:] = down[None, :]

    def corner(rows, cols):
        return (1 - np.clip(np.sqrt(rows[:, None] ** 2 + cols[None, :] ** 2), 0, 1)).astype(np.float32)

    mask[:a, :a] = corner(up[::-1], up[::-1])
    mask[:a, b:] = corner(up[::-1], down[::-1])
    mask[b:, :a] = corner(down[::-1], up[::-1])
    mask[b:, b:] = corner(down[::-1], down[::-1])
    return mask


@lru_cache(maxsize=4)
def mouth_weight(size: int = CROP) -> np.ndarray:
    """``[size, size]`` float32: 1 inside `MOUTH_BOX`, a 31x31 Gaussian (OpenCV's sigma for that size, 5 px) over
    its edge, exactly 0 beyond the kernel's reach; scaled with `size`."""
    import cv2

    s = size / CROP
    box = np.zeros((size, size), np.float32)
    x0, y0, x1, y1 = (int(round(v * s)) for v in MOUTH_BOX)
    box[y0:y1, x0:x1] = 1.0
    k = max(1, int(round(MOUTH_FEATHER * s)) | 1)
    w = cv2.GaussianBlur(box, (k, k), 0, borderType=cv2.BORDER_CONSTANT)
    w = np.clip(w, 0.0, 1.0)
    w[w < 1e-6] = 0.0
    return w


def footprint(m_c2o: np.ndarray, width: int, height: int) -> tuple[int, int, int, int]:
    """Integer box (x0, y0, x1, y1) of frame pixels the crop can touch (one pixel of margin), clipped."""
    corners = np.array([[0, 0, 1], [CROP, 0, 1], [0, CROP, 1], [CROP, CROP, 1]], np.float64) - [0.5, 0.5, 0]
    pts = corners @ m_c2o[:2].T
    x0, y0 = np.floor(pts.min(0)).astype(int) - 1
    x1, y1 = np.ceil(pts.max(0)).astype(int) + 2
    return max(0, x0), max(0, y0), min(width, x1), min(height, y1)


def footprints(m_c2o: np.ndarray, width: int, height: int) -> list:
    """`footprint` of each crop of a batch: the windows the putback warps and blends, in frame pixels."""
    return [footprint(m_c2o[i], width, height) for i in range(len(m_c2o))]


def _window_affines(m_o2c: np.ndarray, boxes: list) -> np.ndarray:
    """``(B, 2, 3)`` float64: per frame, the affine from window pixel (j, i) straight to grid_sample's normalised crop
    coordinates (the window origin and the ``(2x + 1) / S - 1`` normalisation folded in, in float64)."""
    norm = np.array([[2.0 / CROP, 0, 1.0 / CROP - 1], [0, 2.0 / CROP, 1.0 / CROP - 1], [0, 0, 1]])
    return np.stack([(norm @ m_o2c[i] @ np.array([[1.0, 0, x0], [0, 1, y0], [0, 0, 1]]))[:2]
                     for i, (x0, y0, _, _) in enumerate(boxes)])


def _fill_grid(grid: torch.Tensor, affine: torch.Tensor, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """grid[b, i, j] = A_b @ (j, i, 1) into `grid` ``(B, bh, bw, 2)``, one pass: row 0 (x and y interleaved) plus
    i times the per-row step, over each row of ``2 * bw`` floats (a sum broadcast over a last axis of 2 runs
    torch's scalar loop, ~3x slower; a (bh*bw, 3) x (3, 2) product per frame is a GEMM of the worst shape).
    `affine` ``(B, 2, 3)``, `xs` ``(bw,)``, `ys` ``(bh,)`` float32 on the grid's device."""
    b, bh, bw = grid.shape[:3]
    first = (xs.view(1, -1, 1) * affine[:, None, :, 0] + affine[:, None, :, 2]).view(b, 1, 2 * bw)   # row 0
    step = affine[:, None, :, 1].expand(b, bw, 2).reshape(b, 1, 2 * bw)                              # per row
    torch.addcmul(first, ys.view(1, -1, 1), step, out=grid.view(b, bh, 2 * bw))
    return grid


def warp_windows(crops, m_o2c: np.ndarray, boxes: list, blend: str = "feather") -> torch.Tensor:
    """The crops (``(B, 3, S, S)`` or B tensors ``(3, S, S)``; with the feather mask, and for reinhard the mouth
    weight) sampled at each frame window's pixels: ``(B, 4 or 5, bh, bw)`` float32 in 0..1 on the crops' device,
    bh x bw the largest window (each frame uses the top left of its own)."""
    b = len(crops)
    dev = crops[0].device
    bw = max(1, max(x1 - x0 for x0, _, x1, _ in boxes))
    bh = max(1, max(y1 - y0 for _, y0, _, y1 in boxes))
    a = torch.from_numpy(_window_affines(m_o2c, boxes)).to(dev, torch.float32)
    grid = _fill_grid(torch.empty((b, bh, bw, 2), dtype=torch.float32, device=dev), a,
                      torch.arange(bw, device=dev, dtype=torch.float32),
                      torch.arange(bh, device=dev, dtype=torch.float32))
    side = crops[0].shape[-1]   # 512 at full size; the grid is in normalised units, so smaller test crops work too
    # crops, mask (and the mouth's transfer weight for reinhard, warped the same way) as the channels of one input,
    # each crop copied once, straight from the renderer's list
    src = torch.empty((b, 5 if blend == "reinhard" else 4, side, side), dtype=torch.float32, device=dev)
    for i, crop in enumerate(crops):
        src[i, :3].copy_(crop)
    src[:, 3].copy_(torch.from_numpy(feather_mask(side)).to(dev))
    if blend == "reinhard":
        src[:, 4].copy_(torch.from_numpy(mouth_weight(side)).to(dev))
    return F.grid_sample(src, grid, mode="bilinear", padding_mode="zeros", align_corners=False).clamp_(0, 1)


def blend_window(bg: torch.Tensor, piece: torch.Tensor, blend: str = "feather") -> torch.Tensor:
    """One frame's window ``[3, h, w]`` (float 0..1, on the piece's device) with its warped crop `piece`
    ``[4 or 5, h, w]`` blended in by `blend`: frame + m * (render - frame) for feather (stays in 0..1)."""
    fg = piece[:3]
    if blend == "poisson":
        return blend_modes.composite(fg, bg, piece[3], "poisson")
    if blend == "reinhard":
        fg = blend_modes.transfer_colour(fg, bg, piece[4])
    return torch.lerp(bg, fg, piece[3][None].expand(3, -1, -1))


def _check_blend(blend: str) -> None:
    if blend not in BLEND_MODES:
        raise ValueError(f"blend must be one of {BLEND_MODES}, got {blend!r}")


def putback(frames: torch.Tensor, crops: torch.Tensor, m_o2c: np.ndarray, m_c2o: np.ndarray,
            out: torch.Tensor | None = None, blend: str = "feather") -> torch.Tensor:
    """Blend crops into float copies of the frames (the IMAGE form; the render uses `paste_crops`, in place in bytes).

    Args:
        frames: (B, H, W, 3) float in [0, 1] or uint8, on the device to work on.
        crops: (B, 3, S, S) float in [0, 1] (same device); S = 512 at full size.
        m_o2c, m_c2o: (B, 3, 3) affines (numpy float64).
        out: optional (B, H, W, 3) float32 destination.
        blend: feather, reinhard (mouth colour transfer first) or poisson (see the module docstring).
    Returns (B, H, W, 3) float32 in [0, 1].
    """
    _check_blend(blend)
    b, h, w = frames.shape[:3]
    if out is None:
        out = torch.empty((b, h, w, 3), dtype=torch.float32, device=frames.device)
    out.copy_(frames)
    if frames.dtype == torch.uint8:
        out.mul_(1.0 / 255.0)        # copy then scale: much faster than a mixed-dtype mul into `out`
    boxes = footprints(m_c2o, w, h)
    warped = warp_windows(crops, m_o2c, boxes, blend)
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        if x1 > x0 and y1 > y0:
            region = out[i, y0:y1, x0:x1]
            region.copy_(blend_window(region.permute(2, 0, 1), warped[i, :, : y1 - y0, : x1 - x0], blend)
                         .permute(1, 2, 0))
    return out


class PasteWork:
    """Buffers `paste_crops` reuses from frame to frame (and, held by the render, from chunk to chunk): on the CPU a
    fresh multi-MB temporary costs its page faults on every frame, more than the arithmetic done in it. One per
    render (or per call), used from one thread. Each buffer is a flat tensor on its device, grown when a larger
    window is asked for; a window's tensors are views of it."""

    def __init__(self):
        self._flat: dict = {}
        self._crop_side = None    # the side whose feather mask sits in the warp input's 4th channel

    def take(self, name: str, shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        n = math.prod(shape)
        key = (name, dtype, device)
        flat = self._flat.get(key)
        if flat is None or flat.numel() < n:
            flat = self._flat[key] = torch.empty(n, dtype=dtype, device=device)
        return flat[:n].view(shape)

    def warp_input(self, crop: torch.Tensor) -> torch.Tensor:
        """``(1, 4, S, S)`` float32 on the crop's device: the crop scaled to 0..255 and the feather mask (written
        once, when the buffer is made or the side changes)."""
        dev, side = crop.device, int(crop.shape[-1])
        src = self.take("src", (1, 4, side, side), torch.float32, dev)
        if self._crop_side != (side, dev):
            src[0, 3].copy_(torch.from_numpy(feather_mask(side)))
            self._crop_side = (side, dev)
        torch.mul(crop.to(torch.float32), 255.0, out=src[0, :3])     # bf16 crops widen first, then scale in fp32
        return src

    def axis(self, name: str, n: int, device: torch.device) -> torch.Tensor:
        """0, 1, ..., n-1 as float32 on `device` (a view of a cached, grown ramp)."""
        key = ("axis", name, device)
        ramp = self._flat.get(key)
        if ramp is None or ramp.numel() < n:
            ramp = self._flat[key] = torch.arange(max(n, 1), dtype=torch.float32, device=device)
        return ramp[:n]


def _paste_feather_bytes(region: torch.Tensor, crop: torch.Tensor, affine: np.ndarray, weight: float,
                         work: PasteWork) -> None:
    """Feather-blend one crop into a uint8 window ``[h, w, 3]`` in place, computed on the crop's device in float32.

    The fused form of warp_windows + blend_window + store_window for the shipped blend: the crop is warped in
    0..255 units with the mask as a 4th channel (one bilinear sampling, made interleaved once), and the blend runs
    in the frame's own interleaved layout: ``bg + m * w * (fg - bg) + 0.5`` truncated to bytes, the export's
    rounding of the float frame, with no transpose of the frame's window either way."""
    dev = crop.device
    h, w = int(region.shape[0]), int(region.shape[1])
    src = work.warp_input(crop)
    grid = _fill_grid(work.take("grid", (1, h, w, 2), torch.float32, dev),
                      torch.from_numpy(affine[None]).to(dev, torch.float32),
                      work.axis("x", w, dev), work.axis("y", h, dev))
    # a new output: grid_sampler_2d's out= form is a wrapper that copies a fresh result into `out` (slower, measured)
    warped = F.grid_sample(src, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    warped[0, :3].clamp_(0.0, 255.0)                                # slerped crops can overshoot 0..1
    warped[0, 3].clamp_(0.0, 1.0)
    # the blend's operands made interleaved and contiguous like the frame (plain copies; clamped above, where the
    # data is contiguous): a weight broadcast along the innermost axis, or a strided operand, drops torch's
    # element-wise kernels to a scalar loop several times slower than these two copies
    fg = work.take("fg", (h, w, 3), torch.float32, dev).copy_(warped[0, :3].permute(1, 2, 0))
    m = work.take("m", (h, w, 3), torch.float32, dev).copy_(warped[0, 3, :, :, None].expand(h, w, 3))
    if weight < 1.0:
        m.mul_(weight)                                              # silence easing: frame + w * (composite - frame)
    bg = work.take("bg", (h, w, 3), torch.float32, dev)
    if region.device == dev:
        bg.copy_(region)
    else:                                                           # only the window's bytes cross to the device
        bg.copy_(work.take("up", (h, w, 3), torch.uint8, dev).copy_(region))
    torch.lerp(bg, fg, m, out=bg).add_(0.5)                         # in 0..255.5: truncation is the export's rounding
    if region.device == dev:
        region.copy_(bg)
    else:                                                           # bytes made on the device, only they come back
        region.copy_(work.take("down", (h, w, 3), torch.uint8, dev).copy_(bg))


def paste_crops(frames, crops: torch.Tensor, m_o2c: np.ndarray, m_c2o: np.ndarray, blend: str = "feather",
                weights=None, work: PasteWork | None = None) -> None:
    """Blend crops into `frames` in place, window only: the byte path of the render.

    Args:
        frames: B frames ``[H, W, 3]`` (a tensor ``(B, H, W, 3)`` or a sequence of views), uint8 (or float 0..1),
            anywhere (the host): only each crop's window is read, sent to the crops' device, blended there as float
            and written back (as bytes, rounded as the export rounds: engines/common/frames.store_window).
        crops: (B, 3, S, S) float in [0, 1] (or B tensors (3, S, S)) on the device that computes the windows.
        m_o2c, m_c2o: (B, 3, 3) affines (numpy float64).
        blend: feather, reinhard or poisson.
        weights: optional (B,) floats in 0..1 easing each composite in from the frame (silence): frame + w *
            (composite - frame); None or 1 is the composite.
        work: the buffers to reuse (`PasteWork`); the render passes one for the whole clip. Feather into uint8
            frames (the shipped path) uses them; the other modes and float frames take the general path.
    """
    _check_blend(blend)
    h, w = (int(d) for d in frames[0].shape[:2])
    boxes = footprints(m_c2o, w, h)
    fused = blend == "feather" and frames[0].dtype == torch.uint8
    if fused:
        work = PasteWork() if work is None else work
        affines = _window_affines(m_o2c, boxes)
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        if x1 <= x0 or y1 <= y0:
            continue
        region = frames[i][y0:y1, x0:x1]
        wt = 1.0 if weights is None else float(weights[i])
        if fused:
            _paste_feather_bytes(region, crops[i], affines[i], wt, work)
            continue
        # one frame at a time: each samples only its own window, and the temporaries (a few MB) are reused by the
        # allocator instead of a batch's (tens of MB, fresh pages every call on the CPU)
        warped = warp_windows(crops[i:i + 1], m_o2c[i:i + 1], [(x0, y0, x1, y1)], blend)[0]
        bg = window_float(region, warped.device)
        mixed = blend_window(bg, warped, blend)
        if wt < 1.0:
            mixed = bg + wt * (mixed - bg)
        store_window(region, mixed)
