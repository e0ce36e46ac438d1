"""Subject crop and uncrop: the inpainter sees only the garment's box; the compositor puts it back pixel-exactly.

The crop box has one size for the whole clip (a video model samples one tensor), big enough for the garment's
largest box plus padding and rounded up to a multiple of the token block. Its position is either fixed (the union
box: the camera does not move, the best choice for a presenter loop) or tracked (box centres smoothed over a window
of frames, then nudged so each frame's own garment box stays inside). A box larger than the frame, or one pushed
past a frame edge, is filled by repeating the edge pixels; those pixels are never written back.

The `CropRecord` keeps the geometry and the pixel-accurate blend mask (inside each frame's box, at source
resolution), plus the feather of the box border. `uncrop` blends with that mask only: where it is 0, the output
is the source, bit for bit.

`uncrop`'s `blend` (engines/common/blend_modes.py): ``feather`` (the alpha blend above, the default); ``reinhard``
(the inpainted crop's colours corrected before the blend: the Lab mean and spread of the crop over a ring of context
around the garment, where the inpainting should have reproduced the source, are matched to the source's over the
same ring, and that transform is applied to the garment: a sampler's or VAE's colour cast is removed while the new
garment keeps its own colours; matched on the garment itself, the transfer would paint the old garment's colours
back); ``poisson`` (``cv2.seamlessClone`` of the crop into the frame over the blend region: no edge where the
lighting differs). In every mode a pixel whose blend alpha is 0 (outside the mask, the hands cut out of it) is the
source bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from ..common import blend_modes
from ..common.cache import content_hash
from ..common.errors import InputError
from ..common.progress import Progress, ensure
from .checks import chunks, match_frames

CHUNK = 8
BLEND_MODES = blend_modes.MODES
CONTEXT_RING = 16      # px of context around the blend region whose colours fit the reinhard transfer


@dataclass(frozen=True)
class CropRecord:
    """Everything the uncrop needs, nothing else (the source frames are passed to the uncrop again, not stored).

    Fields are named by coordinate frame:
        frame_size: (height, width) of the source frames.
        frame_count: number of source frames.
        box_size: (height, width) of the crop box in source pixels (the same for every frame).
        box_origins: per frame (y0, x0) of the box's top-left corner in source pixels; may be negative or reach past
            the frame when the box is larger than the frame or sits at an edge.
        crop_size: (height, width) of the cropped frames handed to the inpainter (box_size, or upscaled).
        blend_masks: ``[frame_count, box_h, box_w]`` float, the pixel-accurate compositor mask inside each box.
        feather: pixels of linear ramp along box sides that lie inside the frame.
        source_fingerprint: a hash of a sparse sample of the source frames, to refuse the wrong source at uncrop.
    """

    frame_size: tuple
    frame_count: int
    box_size: tuple
    box_origins: tuple
    crop_size: tuple
    blend_masks: torch.Tensor
    feather: int
    source_fingerprint: str


def fingerprint(images: torch.Tensor) -> str:
    """A cheap identity check of a clip: every 8th frame on a 16-pixel lattice, plus the shape."""
    step = max(1, images.shape[0] // 8)
    return content_hash(tuple(images.shape), images[::step, ::16, ::16, :3].float().cpu())


def _boxes(masks: torch.Tensor, threshold: float):
    """Per-frame tight boxes (y0, y1, x0, x1) of ``masks > threshold``, None for empty frames (chunk by chunk)."""
    out = []
    for a, b in chunks(masks.shape[0], 16):
        binary = masks[a:b] > threshold
        for r, c in zip(binary.any(dim=2).cpu(), binary.any(dim=1).cpu()):
            ry, cx = torch.nonzero(r).flatten(), torch.nonzero(c).flatten()
            out.append(None if ry.numel() == 0 else (int(ry[0]), int(ry[-1]) + 1, int(cx[0]), int(cx[-1]) + 1))
    return out


def _round_up(v: int, m: int) -> int:
    return -(-int(v) // int(m)) * int(m)


def _place(lo: int, hi: int, size: int, limit: int, centre: float) -> int:
    """Origin of a box of ``size`` that contains [lo, hi), close to ``centre``, inside [0, limit) when it fits."""
    origin = int(round(centre - size / 2.0))
    origin = min(max(origin, hi - size), lo)  # keep this frame's garment inside the box
    if size <= limit:
        origin = min(max(origin, 0), limit - size)
        origin = min(max(origin, hi - size), lo)  # containment wins over the frame (cannot conflict when it fits)
    else:
        origin = min(max(origin, limit - size), 0)  # larger than the frame: cover it all, spill evenly if possible
    return origin


def plan_crop(masks: torch.Tensor, padding: int = 32, multiple: int = 32, mode: str = "fixed",
              smooth_frames: int = 9, threshold: float = 0.0):
    """Box size ``(h, w)`` and per-frame origins for masks ``[F, H, W]``. Raises on an all-empty sequence."""
    Fn, H, W = masks.shape
    boxes = _boxes(masks, threshold)
    present = [b for b in boxes if b is not None]
    if not present:
        raise InputError("mask", "a garment mask with at least one pixel in at least one frame",
                         f"{Fn} empty mask frames", "Check the segmenter prompt, or the mask cache entry.")
    # Empty frames borrow the previous non-empty frame's box (leading ones the next): the garment is hidden, not gone.
    filled, last = [], None
    for b in boxes:
        last = b if b is not None else last
        filled.append(last)
    nxt = None
    for i in range(Fn - 1, -1, -1):
        nxt = boxes[i] if boxes[i] is not None else nxt
        if filled[i] is None:
            filled[i] = nxt
    if mode == "fixed":
        union = (min(b[0] for b in present), max(b[1] for b in present),
                 min(b[2] for b in present), max(b[3] for b in present))
        filled = [union] * Fn
    elif mode != "tracked":
        raise InputError("mode", "'fixed' or 'tracked'", repr(mode))
    bh = _round_up(max(b[1] - b[0] for b in filled) + 2 * padding, multiple)
    bw = _round_up(max(b[3] - b[2] for b in filled) + 2 * padding, multiple)
    cy = torch.tensor([(b[0] + b[1]) / 2.0 for b in filled], dtype=torch.float64)
    cx = torch.tensor([(b[2] + b[3]) / 2.0 for b in filled], dtype=torch.float64)
    if mode == "tracked" and smooth_frames > 1:
        k = int(smooth_frames) | 1
        kernel = torch.ones(1, 1, k, dtype=torch.float64) / k
        cy = F.conv1d(F.pad(cy[None, None], (k // 2, k // 2), mode="replicate"), kernel)[0, 0]
        cx = F.conv1d(F.pad(cx[None, None], (k // 2, k // 2), mode="replicate"), kernel)[0, 0]
    origins = tuple((_place(b[0], b[1], bh, H, float(y)), _place(b[2], b[3], bw, W, float(x)))
                    for b, y, x in zip(filled, cy, cx))
    return (bh, bw), origins


def _cut(frame: torch.Tensor, y0: int, x0: int, h: int, w: int) -> torch.Tensor:
    """``frame[y0:y0+h, x0:x0+w]`` of ``[H, W, ...]`` with out-of-frame pixels repeated from the nearest edge."""
    H, W = frame.shape[:2]
    ys = torch.arange(y0, y0 + h).clamp_(0, H - 1)
    xs = torch.arange(x0, x0 + w).clamp_(0, W - 1)
    if 0 <= y0 and y0 + h <= H and 0 <= x0 and x0 + w <= W:
        return frame[y0:y0 + h, x0:x0 + w]
    return frame.index_select(0, ys.to(frame.device)).index_select(1, xs.to(frame.device))


def _resize_images(x: torch.Tensor, size: tuple) -> torch.Tensor:
    if tuple(x.shape[1:3]) == tuple(size):
        return x
    y = F.interpolate(x.movedim(-1, 1), size=size, mode="bicubic", align_corners=False, antialias=True)
    return y.movedim(1, -1).clamp_(0.0, 1.0)


def _resize_masks(x: torch.Tensor, size: tuple) -> torch.Tensor:
    if tuple(x.shape[1:3]) == tuple(size):
        return x
    return F.interpolate(x[:, None], size=size, mode="bilinear", align_corners=False, antialias=True)[:, 0].clamp_(0, 1)


def crop(images: torch.Tensor, masks: torch.Tensor, padding: int = 32, multiple: int = 32, mode: str = "fixed",
         smooth_frames: int = 9, upscale_to: int = 0, feather: int = 16,
         progress: Optional[Progress] = None):
    """Crop frames ``[F, H, W, C]`` to the garment box of masks ``[F, H, W]``.

    Args:
        upscale_to: 0 keeps source pixels; otherwise the box's longer side is resized up to this many pixels
            (rounded to ``multiple``; never down: a box already larger stays at source size).
        feather: ramp width in pixels along box sides inside the frame, stored in the record for the uncrop.

    Returns:
        ``(cropped_images [F, h, w, C], cropped_masks [F, h, w], record)``.
    """
    progress = ensure(progress)
    Fn, H, W = images.shape[:3]
    masks = match_frames(masks, Fn, H, W, "mask")
    if multiple < 1 or padding < 0 or feather < 0:
        raise InputError("multiple", "multiple >= 1, padding >= 0, feather >= 0", f"{multiple}, {padding}, {feather}")
    (bh, bw), origins = plan_crop(masks, padding, multiple, mode, smooth_frames)
    ch, cw = bh, bw
    if upscale_to and max(bh, bw) < upscale_to:
        scale = upscale_to / max(bh, bw)
        ch, cw = _round_up(round(bh * scale), multiple), _round_up(round(bw * scale), multiple)
    out_images = torch.empty(Fn, ch, cw, images.shape[3], dtype=images.dtype, device=images.device)
    out_masks = torch.empty(Fn, ch, cw, dtype=torch.float32, device=masks.device)
    blend = torch.empty(Fn, bh, bw, dtype=torch.float32)
    progress.reset(Fn)
    for a, b in chunks(Fn, CHUNK):
        imgs = torch.stack([_cut(images[i], *origins[i], bh, bw) for i in range(a, b)])
        msk = torch.stack([_cut(masks[i], *origins[i], bh, bw) for i in range(a, b)]).float()
        # Pixels outside the frame are repeats, not garment: they never enter the blend mask.
        for j, i in enumerate(range(a, b)):
            y0, x0 = origins[i]
            inside = torch.zeros(bh, bw, dtype=torch.bool, device=msk.device)
            inside[max(0, -y0):min(bh, H - y0), max(0, -x0):min(bw, W - x0)] = True
            msk[j] = msk[j] * inside
        blend[a:b] = msk.cpu()
        out_images[a:b] = _resize_images(imgs, (ch, cw))
        out_masks[a:b] = _resize_masks(msk, (ch, cw))
        progress.step(b - a)
    record = CropRecord(frame_size=(H, W), frame_count=Fn, box_size=(bh, bw), box_origins=origins,
                        crop_size=(ch, cw), blend_masks=blend, feather=int(feather),
                        source_fingerprint=fingerprint(images))
    return out_images, out_masks, record


def border_ramp(record: CropRecord, index: int) -> torch.Tensor:
    """``[box_h, box_w]`` linear ramp (0..1] along the box sides that lie inside the frame, 1 elsewhere."""
    bh, bw = record.box_size
    H, W = record.frame_size
    y0, x0 = record.box_origins[index]
    f = int(record.feather)
    ramp = torch.ones(bh, bw)
    if f <= 0:
        return ramp

    def side(n):  # distance-from-side ramp: 1/(f+1), 2/(f+1), ... capped at 1
        return ((torch.arange(n, dtype=torch.float32) + 1) / (f + 1)).clamp_(max=1.0)

    if y0 > 0:
        ramp = torch.minimum(ramp, side(bh)[:, None])
    if y0 + bh < H:
        ramp = torch.minimum(ramp, side(bh).flip(0)[:, None])
    if x0 > 0:
        ramp = torch.minimum(ramp, side(bw)[None, :])
    if x0 + bw < W:
        ramp = torch.minimum(ramp, side(bw).flip(0)[None, :])
    return ramp


def blend_alpha(record: CropRecord, index: int) -> torch.Tensor:
    """The uncrop's alpha for one frame inside its box: the record's pixel mask times the border ramp."""
    return record.blend_masks[index] * border_ramp(record, index)


def _context_ring(alpha: torch.Tensor, width: int = CONTEXT_RING) -> torch.Tensor:
    """``[h, w]`` float 0/1: pixels within `width` of the blend region (alpha > 0) but outside it."""
    inside = (alpha > 0).float()[None, None]
    k = 2 * width + 1       # a square neighbourhood, as two 1-D passes (a k x k pool costs k times more)
    grown = F.max_pool2d(F.max_pool2d(inside, (1, k), stride=1, padding=(0, width)), (k, 1), stride=1,
                         padding=(width, 0))[0, 0]
    return grown * (1 - inside[0, 0])


def blend_window(src: torch.Tensor, gen: torch.Tensor, alpha: torch.Tensor, blend: str = "feather") -> torch.Tensor:
    """One frame's box window ``[h, w, C]``: `gen` blended into `src` by `alpha` ``[h, w]`` in `blend` mode (see the
    module docstring); where alpha is 0 the result is `src` bit for bit."""
    a = alpha[..., None]
    if blend == "feather":
        mixed = src + (gen - src) * a
        return torch.where(a > 0, mixed, src)
    fg, bg = gen[..., :3].permute(2, 0, 1), src[..., :3].permute(2, 0, 1)
    if blend == "reinhard":
        fg = blend_modes.transfer_colour(fg, bg, (alpha > 0).to(fg.dtype), stats=_context_ring(alpha))
        rgb = blend_modes.composite(fg, bg, alpha.to(fg.dtype), "feather")
    else:
        rgb = blend_modes.composite(fg, bg, alpha.to(fg.dtype), "poisson")
    out = src.clone()
    out[..., :3] = rgb.permute(1, 2, 0)
    if src.shape[-1] > 3:                          # other channels (alpha): the feather blend
        out[..., 3:] = torch.where(a > 0, src[..., 3:] + (gen[..., 3:] - src[..., 3:]) * a, src[..., 3:])
    return out


def uncrop(source: torch.Tensor, crops: torch.Tensor, record: CropRecord,
           progress: Optional[Progress] = None, blend: str = "feather") -> torch.Tensor:
    """Put inpainted crops back into the source frames using the record's pixel mask and feather only.

    Every pixel where the record's mask is 0 (and every pixel outside the box) equals the source bit for bit.
    `blend`: feather, reinhard or poisson (see the module docstring).
    """
    progress = ensure(progress)
    if blend not in BLEND_MODES:
        raise InputError("blend", f"one of {', '.join(BLEND_MODES)}", repr(blend))
    if not isinstance(record, CropRecord):
        raise InputError("crop_record", "a crop record from Broadcast Subject Crop", type(record).__name__)
    Fn, H, W = source.shape[:3]
    if (H, W) != tuple(record.frame_size) or Fn != record.frame_count:
        raise InputError("source_images", f"the {record.frame_count} source frames of {record.frame_size[1]}x"
                         f"{record.frame_size[0]} the crop was made from", f"{Fn} frames of {W}x{H}")
    if fingerprint(source) != record.source_fingerprint:
        raise InputError("source_images", "the same source frames the crop was made from", "different frames",
                         "Connect the clip that fed Broadcast Subject Crop.")
    ch, cw = record.crop_size
    if crops.shape[0] != Fn or tuple(crops.shape[1:3]) != (ch, cw):
        raise InputError("cropped_images", f"{Fn} inpainted crops of {cw}x{ch}",
                         f"{crops.shape[0]} of {crops.shape[2]}x{crops.shape[1]}",
                         "Decode the sampler's latent for every frame; do not resize or trim the crops.")
    bh, bw = record.box_size
    C = source.shape[3]
    out = torch.empty_like(source)
    progress.reset(Fn)
    for a, b in chunks(Fn, CHUNK):
        out[a:b] = source[a:b]
        gen = _resize_images(crops[a:b].to(source.device, source.dtype), (bh, bw))
        for j, i in enumerate(range(a, b)):
            y0, x0 = record.box_origins[i]
            sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + bh), max(0, x0), min(W, x0 + bw)
            alpha = blend_alpha(record, i)[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0].to(source.device)
            src = source[i, sy0:sy1, sx0:sx1]
            g = gen[j, sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0, :C]
            out[i, sy0:sy1, sx0:sx1] = blend_window(src, g, alpha, blend)
        progress.step(b - a)
    return out


def full_frame_mask(record: CropRecord, index: int, alpha: bool = False) -> torch.Tensor:
    """The record's pixel mask (or blend alpha) of one frame placed in a full ``[H, W]`` frame (for previews)."""
    H, W = record.frame_size
    bh, bw = record.box_size
    y0, x0 = record.box_origins[index]
    m = blend_alpha(record, index) if alpha else record.blend_masks[index]
    out = torch.zeros(H, W)
    sy0, sy1, sx0, sx1 = max(0, y0), min(H, y0 + bh), max(0, x0), min(W, x0 + bw)
    out[sy0:sy1, sx0:sx1] = m[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0]
    return out
