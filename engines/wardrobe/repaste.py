"""Re-paste layer: the source's protected pixels (hands, a microphone, a logo) back over the composited result.

The alpha keeps every pixel of the protected mask at 1 (so those pixels equal the source exactly) and adds a soft
ramp outside it, so the edge blends instead of cutting. Everything else is the result unchanged.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..common.errors import InputError
from ..common.progress import Progress, ensure
from .checks import chunks, match_frames
from .morphology import feather_outward, grow

CHUNK = 8


def repaste(result: torch.Tensor, source: torch.Tensor, protected: torch.Tensor, feather: float = 4.0,
            expand: int = 0, progress: Optional[Progress] = None) -> torch.Tensor:
    """``result`` with ``source`` pasted where ``protected`` (grown by ``expand``, feathered outward) is set."""
    progress = ensure(progress)
    if tuple(result.shape) != tuple(source.shape):
        raise InputError("source_images", f"frames of the same shape as 'images' {tuple(result.shape)}",
                         f"{tuple(source.shape)}", "Connect the original clip the result was made from.")
    Fn, H, W = result.shape[:3]
    protected = match_frames(protected, Fn, H, W, "protected_mask")
    out = torch.empty_like(result)
    margin = int(expand) + int(round(float(feather))) + 2  # the ramp ends inside this margin, so edges read zeros
    progress.reset(Fn)
    for a, b in chunks(Fn, CHUNK):
        out[a:b] = result[a:b]
        m = protected[a:b].float()
        rows = torch.nonzero((m > 0).any(dim=0).any(dim=1)).flatten()
        if rows.numel() == 0:
            progress.step(b - a)
            continue
        cols = torch.nonzero((m > 0).any(dim=0).any(dim=0)).flatten()
        # Work only on the protected pixels' box plus the ramp: hands cover a small part of a 1080x1920 frame.
        y0, y1 = max(0, int(rows[0]) - margin), min(H, int(rows[-1]) + 1 + margin)
        x0, x1 = max(0, int(cols[0]) - margin), min(W, int(cols[-1]) + 1 + margin)
        m = m[:, y0:y1, x0:x1]
        if expand:
            m = grow(m, expand, tapered=True)
        alpha = feather_outward(m, feather).to(result.device, result.dtype)[..., None]
        res = result[a:b, y0:y1, x0:x1]
        src = source[a:b, y0:y1, x0:x1].to(result.device, result.dtype)
        # res + (src - res) * alpha: where result and source already agree, the sum is exact (no rounding drift).
        mixed = res + (src - res) * alpha
        out[a:b, y0:y1, x0:x1] = torch.where(alpha >= 1.0, src, torch.where(alpha > 0, mixed, res))
        progress.step(b - a)
    return out
