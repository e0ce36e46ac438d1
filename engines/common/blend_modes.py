"""Paste-back blends shared by the compositors: feathered alpha, Reinhard colour transfer in Lab, Poisson.

All three take a generated patch ``fg`` and the frame's own pixels ``bg`` (``[3, h, w]`` float in 0..1, same size)
and an alpha ``[h, w]`` in 0..1, and return the composited window. Pixels whose alpha is exactly 0 are returned as
``bg`` bit for bit in every mode, so body, hands and background outside the blend region never change.

- ``feather``: ``bg + alpha * (fg - bg)``.
- ``reinhard``: before the feathered blend, the patch's colours are moved to the frame's: in CIE Lab (D65, sRGB
  primaries), each channel of ``fg`` is shifted and scaled so that its mean and standard deviation over the blend
  region (alpha > 0, weighted by alpha) equal those of ``bg`` over the same pixels (Reinhard et al., 2001). A
  generated mouth whose skin is a shade off no longer shows as a patch.
- ``poisson``: ``cv2.seamlessClone`` (normal clone) of the patch into the frame over the region alpha > 0: the
  patch's gradients with the frame's values on the region border. The window is padded by reflection first, as
  seamlessClone needs the region clear of the image border; the result is quantised to 8 bits inside the region.

Compositors whose patch is larger than the region the colours should be matched on (Ditto's whole face, where only
the mouth is recoloured; a garment, matched on the context around it) use `transfer_colour` with their own weight
and statistics region, then blend as they always do.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

MODES = ("feather", "reinhard", "poisson")

_RGB_TO_XYZ = torch.tensor([[0.4124564, 0.3575761, 0.1804375],
                            [0.2126729, 0.7151522, 0.0721750],
                            [0.0193339, 0.1191920, 0.9503041]], dtype=torch.float64)
_XYZ_TO_RGB = torch.linalg.inv(_RGB_TO_XYZ)
_WHITE = torch.tensor([0.95047, 1.0, 1.08883], dtype=torch.float64)
_EPS, _KAPPA = 216 / 24389, 24389 / 27


def _mix(matrix: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``matrix`` (3, 3) applied to the channel axis of ``x`` (3, ...)."""
    return (matrix @ x.reshape(3, -1)).reshape(x.shape)


def rgb_to_lab(rgb: torch.Tensor) -> torch.Tensor:
    """``[3, ...]`` sRGB in 0..1 -> CIE Lab (L 0..100), float64."""
    c = rgb.to(torch.float64).clamp(0, 1)
    lin = torch.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = _mix(_RGB_TO_XYZ.to(c.device), lin) / _WHITE.to(c.device).view(3, *[1] * (c.dim() - 1))
    f = torch.where(xyz > _EPS, xyz.clamp(min=1e-12) ** (1 / 3), (_KAPPA * xyz + 16) / 116)
    return torch.stack([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def lab_to_rgb(lab: torch.Tensor) -> torch.Tensor:
    """Inverse of `rgb_to_lab` (clamped to 0..1)."""
    fy = (lab[0] + 16) / 116
    fx, fz = fy + lab[1] / 500, fy - lab[2] / 200
    f = torch.stack([fx, fy, fz])
    xyz = torch.where(f ** 3 > _EPS, f ** 3, (116 * f - 16) / _KAPPA)
    xyz = xyz * _WHITE.to(lab.device).view(3, *[1] * (lab.dim() - 1))
    lin = _mix(_XYZ_TO_RGB.to(lab.device), xyz).clamp(0, 1)
    return torch.where(lin <= 0.0031308, 12.92 * lin, 1.055 * lin.clamp(min=1e-12) ** (1 / 2.4) - 0.055).clamp(0, 1)


def lab_stats(rgb: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted Lab mean and standard deviation ``([3], [3])`` of ``[3, h, w]`` `rgb` over the pixels where
    `weight` ``[h, w]`` is above 0 (only those pixels are converted)."""
    sel = weight > 0
    w = weight[sel].to(torch.float64)
    lab = rgb_to_lab(rgb[:, sel])                                              # [3, K]
    mean = (lab * w).sum(dim=1) / w.sum()
    std = torch.sqrt(((lab - mean[:, None]) ** 2 * w).sum(dim=1) / w.sum()).clamp(min=1e-6)
    return mean, std


def reinhard_transfer(fg: torch.Tensor, bg: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """`fg` with its Lab mean and spread over the blend region matched to `bg`'s (see the module docstring).

    `alpha` weights the pixels the statistics are taken over; the transfer itself applies to every pixel of `fg`.
    """
    w = alpha.clamp(0, 1)
    if not bool((w > 0).any()):
        return fg
    (m_fg, s_fg), (m_bg, s_bg) = lab_stats(fg, w), lab_stats(bg, w)
    lab = rgb_to_lab(fg)
    scale, shift = (s_bg / s_fg).view(3, 1, 1), m_bg.view(3, 1, 1)
    return lab_to_rgb((lab - m_fg.view(3, 1, 1)) * scale + shift).to(fg.dtype)


def _bbox(mask: torch.Tensor) -> tuple[int, int, int, int]:
    rows = torch.nonzero(mask.any(dim=1)).flatten()
    cols = torch.nonzero(mask.any(dim=0)).flatten()
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def transfer_colour(fg: torch.Tensor, bg: torch.Tensor, weight: torch.Tensor,
                    stats: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`fg` with the Reinhard transfer mixed in by `weight` ``[h, w]`` in 0..1 (0: `fg` bit for bit).

    The Lab statistics are taken over `stats` (a weight map of the same size; default `weight`): Ditto recolours the
    mouth on the mouth's own statistics; the wardrobe recolours the garment on the statistics of the context around
    it. Only the box around weight > 0 is converted to Lab and back.
    """
    stats = weight if stats is None else stats
    if not bool((weight > 0).any()) or not bool((stats > 0).any()):
        return fg
    (m_fg, s_fg), (m_bg, s_bg) = lab_stats(fg, stats.clamp(0, 1)), lab_stats(bg, stats.clamp(0, 1))
    y0, y1, x0, x1 = _bbox(weight > 0)
    sub = fg[:, y0:y1, x0:x1]
    lab = rgb_to_lab(sub)
    moved = lab_to_rgb((lab - m_fg.view(3, 1, 1)) * (s_bg / s_fg).view(3, 1, 1) + m_bg.view(3, 1, 1)).to(fg.dtype)
    w = weight[y0:y1, x0:x1][None].to(fg.dtype)
    out = fg.clone()
    out[:, y0:y1, x0:x1] = torch.where(w > 0, sub + w * (moved - sub), sub)
    return out


def poisson_clone(fg: torch.Tensor, bg: torch.Tensor, alpha: torch.Tensor, pad: int = 8) -> torch.Tensor:
    """`cv2.seamlessClone` of `fg` into `bg` over alpha > 0 (see the module docstring); returns float in 0..1."""
    import cv2

    region = (alpha > 0).cpu().numpy()
    if not region.any():
        return bg
    to8 = lambda t: np.ascontiguousarray((t.detach().to("cpu", torch.float32).clamp(0, 1).permute(1, 2, 0).numpy()
                                          * 255.0 + 0.5).astype(np.uint8))
    src = cv2.copyMakeBorder(to8(fg), pad, pad, pad, pad, cv2.BORDER_REFLECT)
    dst = cv2.copyMakeBorder(to8(bg), pad, pad, pad, pad, cv2.BORDER_REFLECT)
    mask = cv2.copyMakeBorder(region.astype(np.uint8) * 255, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=0)
    ys, xs = np.nonzero(mask)
    center = (int((xs.min() + xs.max() + 1) // 2), int((ys.min() + ys.max() + 1) // 2))
    out = cv2.seamlessClone(src, dst, mask, center, cv2.NORMAL_CLONE)[pad:-pad, pad:-pad]
    return torch.from_numpy(out.astype(np.float32) / 255.0).permute(2, 0, 1).to(bg.device, bg.dtype)


def composite(fg: torch.Tensor, bg: torch.Tensor, alpha: torch.Tensor, mode: str = "feather") -> torch.Tensor:
    """The window `bg` with `fg` blended in by `mode`; alpha == 0 pixels are `bg` exactly."""
    if mode not in MODES:
        raise ValueError(f"blend mode must be one of {MODES}, got {mode!r}")
    a = alpha[None].to(bg.dtype)
    if mode == "reinhard":
        fg = reinhard_transfer(fg, bg, alpha)
    elif mode == "poisson":
        fg, a = poisson_clone(fg, bg, alpha), (alpha > 0)[None].to(bg.dtype)
    out = bg + a * (fg.to(bg.dtype) - bg)
    return torch.where(alpha[None] > 0, out, bg)
