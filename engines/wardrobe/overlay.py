"""The mask-check preview: what the sampler will regenerate next to what the compositor will paste.

Per source frame: the token-grid mask (from the LATENT, mapped back through the crop) tinted blue with its block
outline, the compositor's pixel mask (from the crop record) tinted green with its outline, protected pixels (hands)
tinted red. Run it before spending GPU time: blue blocks over the hands are expected (the sampler may hallucinate
there); green over red is a wiring error (the compositor would paste over the hands).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ..common.errors import InputError
from ..common.progress import Progress, ensure
from .checks import match_frames
from .crop import CropRecord, full_frame_mask
from .tokengrid import TokenGrid, grid_to_pixels

BLUE = torch.tensor([0.2, 0.45, 1.0])
GREEN = torch.tensor([0.1, 0.95, 0.3])
RED = torch.tensor([1.0, 0.15, 0.1])


def _outline(m: torch.Tensor) -> torch.Tensor:
    """Pixels of ``m > 0.5`` that touch a pixel outside it (4-neighbourhood)."""
    b = (m > 0.5).float()[None, None]
    eroded = -F.max_pool2d(-b, 3, stride=1, padding=1)
    return (b - eroded)[0, 0] > 0


def _placed_grid(grid_mask, grid: TokenGrid, record: CropRecord, index: int) -> torch.Tensor:
    """The sampler's token-grid mask of one source frame, in full-frame source pixels."""
    H, W = record.frame_size
    bh, bw = record.box_size
    y0, x0 = record.box_origins[index]
    crop_px = grid_to_pixels(grid_mask, grid, record.frame_count, frames=[index])[0]
    if tuple(crop_px.shape) != tuple(record.crop_size):
        raise InputError("latent", f"a latent made from the {record.crop_size[1]}x{record.crop_size[0]} crops of "
                         "this record", f"a token grid of {crop_px.shape[1]}x{crop_px.shape[0]} px")
    box = F.interpolate(crop_px[None, None], size=(bh, bw), mode="nearest")[0, 0]
    out = torch.zeros(H, W)
    sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + bh), max(0, x0), min(W, x0 + bw)
    out[sy0:sy1, sx0:sx1] = box[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0]
    return out


def mask_check(images: torch.Tensor, record: CropRecord, grid_mask: torch.Tensor, grid: TokenGrid,
               protected: Optional[torch.Tensor] = None, scale: float = 0.5,
               progress: Optional[Progress] = None):
    """Overlay frames ``[F, H*scale, W*scale, 3]`` and a dict of counts (see module docstring)."""
    progress = ensure(progress)
    Fn, H, W = images.shape[:3]
    if (H, W) != tuple(record.frame_size) or Fn != record.frame_count:
        raise InputError("images", f"the {record.frame_count} source frames of {record.frame_size[1]}x"
                         f"{record.frame_size[0]} the crop was made from", f"{Fn} frames of {W}x{H}")
    if protected is not None:
        protected = match_frames(protected, Fn, H, W, "protected_mask")
    oh, ow = max(1, int(round(H * scale))), max(1, int(round(W * scale)))
    out = torch.empty(Fn, oh, ow, 3)
    stats = {"frames": Fn, "compositor_px": 0, "sampler_px": 0, "compositor_outside_sampler_px": 0,
             "compositor_over_protected_px": 0, "sampler_over_protected_px": 0}
    progress.reset(Fn)
    for i in range(Fn):
        grid_px = _placed_grid(grid_mask, grid, record, i)
        pix = full_frame_mask(record, i)
        frame = images[i, :, :, :3].float().cpu() * 0.7
        g = grid_px[..., None]
        frame = frame * (1 - 0.35 * g) + BLUE * 0.35 * g
        p = pix[..., None]
        frame = frame * (1 - 0.45 * p) + GREEN * 0.45 * p
        frame[_outline(grid_px)] = BLUE
        frame[_outline(pix)] = GREEN
        stats["compositor_px"] += int((pix > 0).sum())
        stats["sampler_px"] += int((grid_px > 0).sum())
        stats["compositor_outside_sampler_px"] += int(((pix > 0) & (grid_px == 0)).sum())
        if protected is not None:
            prot = protected[i].float().cpu()
            r = prot[..., None]
            frame = frame * (1 - 0.5 * r) + RED * 0.5 * r
            stats["compositor_over_protected_px"] += int(((pix > 0) & (prot > 0.5)).sum())
            stats["sampler_over_protected_px"] += int(((grid_px > 0) & (prot > 0.5)).sum())
        frame = frame.clamp_(0, 1)
        if (oh, ow) != (H, W):
            frame = F.interpolate(frame.movedim(-1, 0)[None], size=(oh, ow), mode="area")[0].movedim(0, -1)
        out[i] = frame
        progress.step()
    return out, stats


def describe(stats: dict) -> str:
    """One readable paragraph for the node's text preview."""
    lines = [f"{stats['frames']} frames checked.",
             f"Sampler (token grid, blue): {stats['sampler_px']} px; compositor (pixel mask, green): "
             f"{stats['compositor_px']} px."]
    if stats["compositor_outside_sampler_px"]:
        lines.append(f"WARNING: {stats['compositor_outside_sampler_px']} compositor px lie outside the sampler's "
                     "mask: those pixels would be pasted without being regenerated (check the shield and the grid).")
    if stats["compositor_over_protected_px"]:
        lines.append(f"ERROR: {stats['compositor_over_protected_px']} compositor px cover protected (red) pixels: "
                     "subtract the grown hands mask from the garment mask before the crop.")
    else:
        lines.append("No compositor pixel covers a protected pixel.")
    if stats["sampler_over_protected_px"]:
        lines.append(f"{stats['sampler_over_protected_px']} sampler px cover protected pixels (expected: the "
                     "re-paste layer restores them).")
    return "\n".join(lines)
