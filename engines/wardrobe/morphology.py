"""Mask morphology for both sides of the chain: the sampler's shield and the compositor's lean refine.

Cost does not grow with the radius:
- square dilation/erosion is separable, and along each axis counts the ones within r from a running sum (two
  subtractions per pixel and axis), so every pixel costs the same at r = 2 or 64;
- round ("tapered") growth uses a Euclidean distance transform (`scipy.ndimage.distance_transform_edt`, linear in
  the pixels), computed only inside the mask's bounding box plus the radius.

Frame edges never erode a mask (a garment cut by the frame continues outside it) and never feed a dilation.
All functions take ``[F, H, W]`` float masks, return new tensors, and work ``chunk`` frames at a time.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from ..common.progress import Progress, ensure
from .checks import chunks

CHUNK = 8  # frames per step: bounds the temporaries at 1080x1920 to a few hundred MB


# ---------------------------------------------------------------------------------------------------------------
# Square dilation / erosion by running counts (radius-independent cost)
#
# Flat grey dilation and erosion commute with thresholding: (max_filter(M) >= t) == max_filter(M >= t). So the
# shield's "dilate, shrink, then threshold" is computed exactly on the binary mask M >= t. A square is separable:
# dilating rows then columns by r gives the (2r+1)^2 square. Along each axis, "some 1 within r" (dilation) or "only
# 1s within r" (erosion) is a window count from a running sum: two subtractions per pixel, whatever the radius.

def _count(x: torch.Tensor, r: int, fill: int, dim: int) -> torch.Tensor:
    """Sliding count of ones over ``2r + 1`` samples along ``dim`` of a uint8 0/1 tensor (beyond the ends: ``fill``)."""
    k = 2 * r + 1
    dtype = torch.int16 if x.shape[dim] + k < 32767 else torch.int32
    pad = [0, 0] * (x.dim() - 1 - dim % x.dim()) + [r + 1, r]
    sums = F.pad(x, pad, value=fill).cumsum(dim, dtype=dtype)
    n = sums.shape[dim]
    return sums.narrow(dim, k, n - k) - sums.narrow(dim, 0, n - k)


def dilate_binary(binary: torch.Tensor, radius: int) -> torch.Tensor:
    """Square dilation of a bool mask ``[..., H, W]`` by ``radius`` pixels."""
    r = int(radius)
    if r <= 0:
        return binary.clone()
    rows = (_count(binary.to(torch.uint8), r, 0, -1) > 0).to(torch.uint8)
    return _count(rows, r, 0, -2) > 0


def erode_binary(binary: torch.Tensor, radius: int) -> torch.Tensor:
    """Square erosion of a bool mask; beyond the frame counts as mask, so frame edges do not erode."""
    r = int(radius)
    if r <= 0:
        return binary.clone()
    k = 2 * r + 1
    rows = (_count(binary.to(torch.uint8), r, 1, -1) == k).to(torch.uint8)
    return _count(rows, r, 1, -2) == k


def dilate_square_repeated(masks: torch.Tensor, radius: int) -> torch.Tensor:
    """The usual way: ``radius`` passes of a 3x3 max filter. Kept only as the benchmark's baseline and test oracle."""
    out = masks
    for _ in range(int(radius)):
        out = F.max_pool2d(out.unsqueeze(1), 3, stride=1, padding=1).squeeze(1)
    return out if int(radius) > 0 else masks.clone()


# ---------------------------------------------------------------------------------------------------------------
# Smoothing (feather)

def _box(x: torch.Tensor, r: int) -> torch.Tensor:
    """Box blur of ``[N, H, W]`` with half-width r, edges replicated."""
    if r <= 0:
        return x
    k = 2 * r + 1
    y = F.pad(x.unsqueeze(1), (r, r, r, r), mode="replicate")
    y = F.avg_pool2d(y, (1, k), stride=1)
    y = F.avg_pool2d(y, (k, 1), stride=1)
    return y.squeeze(1)


def smooth(masks: torch.Tensor, feather: float) -> torch.Tensor:
    """Tent-shaped blur reaching ``feather`` pixels (two box passes of half the width)."""
    r = int(round(float(feather) / 2.0))
    if r <= 0:
        return masks.clone()
    out = _box(_box(masks, r), r)
    # Averages of ones are not always exactly 1.0 in float32; snap so flat areas stay flat.
    out = torch.where(out > 1.0 - 1e-6, torch.ones_like(out), out)
    return torch.where(out < 1e-6, torch.zeros_like(out), out)


def feather_inward(masks: torch.Tensor, feather: float) -> torch.Tensor:
    """Soft edge that never leaves the mask: zero wherever the input is zero, ramps down inside the border."""
    if feather <= 0:
        return masks.clone()
    return masks * smooth(masks, feather)


def feather_outward(masks: torch.Tensor, feather: float) -> torch.Tensor:
    """Soft edge that never eats into the mask: every input value is kept, a ramp is added outside."""
    if feather <= 0:
        return masks.clone()
    return torch.maximum(masks, smooth(masks, feather))


# ---------------------------------------------------------------------------------------------------------------
# Round growth through the distance transform

def _bbox(binary: np.ndarray):
    rows = np.flatnonzero(binary.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(binary.any(axis=0))
    return rows[0], rows[-1] + 1, cols[0], cols[-1] + 1


def _grow_disk_frame(mask: np.ndarray, px: int) -> np.ndarray:
    """One frame ``[H, W]`` float: Euclidean growth (px > 0) or shrink (px < 0) of ``mask > 0.5``."""
    from scipy.ndimage import distance_transform_edt

    binary = mask > 0.5
    box = _bbox(binary)
    if box is None:
        return mask * 0.0 if px < 0 else mask.copy()
    h, w = binary.shape
    m = abs(px) + 1 if px > 0 else 1
    y0, y1, x0, x1 = max(0, box[0] - m), min(h, box[1] + m), max(0, box[2] - m), min(w, box[3] + m)
    region = binary[y0:y1, x0:x1]
    out = mask.copy()
    if px > 0:
        grown = distance_transform_edt(~region) <= px
        out[y0:y1, x0:x1] = np.maximum(out[y0:y1, x0:x1], grown.astype(mask.dtype))
    else:
        # Replicate-pad by one so the frame edge counts as mask, not as background: no erosion from the frame edge.
        padded = np.pad(region, 1, mode="edge")
        kept = distance_transform_edt(padded)[1:-1, 1:-1] > -px
        out[y0:y1, x0:x1] = out[y0:y1, x0:x1] * kept
    return out


def grow(masks: torch.Tensor, px: int, tapered: bool = True, progress: Optional[Progress] = None) -> torch.Tensor:
    """Grow (px > 0) or shrink (px < 0) masks.

    Both work on ``mask > 0.5``: growth sets the grown region to 1 (soft values elsewhere are kept); shrinking keeps
    the soft values inside the shrunk region and zeroes the rest.
    tapered=True: round corners (Euclidean disk); tapered=False: square corners (running counts).
    """
    progress = ensure(progress)
    px = int(px)
    if px == 0:
        return masks.clone()
    out = torch.empty_like(masks)
    for a, b in chunks(masks.shape[0], CHUNK):
        part = masks[a:b]
        if tapered:
            arr = part.detach().cpu().numpy()
            done = np.stack([_grow_disk_frame(f, px) for f in arr])
            out[a:b] = torch.from_numpy(done).to(out.device, out.dtype)
        else:
            binary = part > 0.5
            if px > 0:
                out[a:b] = torch.maximum(part, dilate_binary(binary, px).to(part.dtype))
            else:
                out[a:b] = part * erode_binary(binary, -px).to(part.dtype)
        progress.step(b - a)
    return out


def fill_holes(masks: torch.Tensor, progress: Optional[Progress] = None) -> torch.Tensor:
    """Fill enclosed background (holes) of ``mask > 0.5``; soft values elsewhere kept."""
    from scipy.ndimage import binary_fill_holes

    progress = ensure(progress)
    out = torch.empty_like(masks)
    for i in range(masks.shape[0]):
        f = masks[i].detach().cpu().numpy()
        filled = binary_fill_holes(f > 0.5).astype(f.dtype)
        out[i] = torch.from_numpy(np.maximum(f, filled)).to(out.device)
        progress.step()
    return out


# ---------------------------------------------------------------------------------------------------------------
# The two chains

def shield(masks: torch.Tensor, dilate: int = 8, shrink: int = 2, threshold: float = 0.45,
           progress: Optional[Progress] = None) -> torch.Tensor:
    """Sampler-side shield: ``(erode(dilate(M, r), s) >= t)`` as a 0/1 mask (the posts' r=8, s=2, t=0.45).

    It swallows strap remnants and closes gaps narrower than about ``2 * (r - s)`` pixels, which is why it must never
    reach a compositor: it also closes the gaps between fingers.
    """
    progress = ensure(progress)
    out = torch.empty_like(masks)
    for a, b in chunks(masks.shape[0], CHUNK):
        binary = masks[a:b] >= threshold  # thresholding commutes with flat grey morphology (see above)
        out[a:b] = erode_binary(dilate_binary(binary, dilate), shrink).to(out.dtype)
        progress.step(b - a)
    return out


def refine(masks: torch.Tensor, expand: int = 0, feather: float = 4.0, fill: bool = False, tapered: bool = True,
           progress: Optional[Progress] = None) -> torch.Tensor:
    """Compositor-side ("lean") refine: optional hole fill, signed expand, then an inward feather.

    With the defaults (expand 0, fill off) the negative space between fingers survives: a pixel that is 0 in the
    input is 0 in the output.
    """
    progress = ensure(progress)
    out = torch.zeros_like(masks)
    H, W = masks.shape[1:]
    # Work inside the chunk's mask box plus what the expand and the feather can reach: outside it the result is 0,
    # and the region's border is 0 too, so its replicate padding matches the full frame's.
    margin = max(int(expand), 0) + int(round(float(feather))) + 2
    for a, b in chunks(masks.shape[0], CHUNK):  # one output, no full-size intermediates
        part = masks[a:b]
        nz = part > 0
        rows = torch.nonzero(nz.any(dim=0).any(dim=1)).flatten()
        if rows.numel() == 0:
            progress.step(b - a)
            continue
        cols = torch.nonzero(nz.any(dim=0).any(dim=0)).flatten()
        y0, y1 = max(0, int(rows[0]) - margin), min(H, int(rows[-1]) + 1 + margin)
        x0, x1 = max(0, int(cols[0]) - margin), min(W, int(cols[-1]) + 1 + margin)
        region = part[:, y0:y1, x0:x1]
        if fill:
            region = fill_holes(region)
        if expand:
            region = grow(region, expand, tapered=tapered)
        out[a:b, y0:y1, x0:x1] = feather_inward(region, feather) if feather > 0 else region
        progress.step(b - a)
    return out


def combine(a: torch.Tensor, b: torch.Tensor, operation: str) -> torch.Tensor:
    """Pixelwise union / intersect / subtract (a - b, clamped) of two mask sequences of the same shape."""
    if operation == "union":
        return torch.maximum(a, b)
    if operation == "intersect":
        return torch.minimum(a, b)
    if operation == "subtract":
        return (a - b).clamp_(0.0, 1.0)
    raise ValueError(f"unknown mask operation {operation!r}")
