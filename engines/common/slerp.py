"""Spherical interpolation between two batches of tensors (MuseTalk's keyframe latents, Ditto's cadence crops).

The direction is interpolated on the sphere and the norm linearly, so a blend of two latents keeps the energy of
its endpoints instead of shrinking towards zero as a straight average does. Where the angle is too small for the
sine ratio to be stable the blend is linear (then renormalised). The two callers were tuned with different
arithmetic (MuseTalk: float64 and a test on the sine; Ditto upstream: float32 and a test on the cosine) and their
tests pin those results, so the precision, the linear-fallback rule and the epsilon are parameters.
"""
from __future__ import annotations

from typing import Optional

import torch


def slerp(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor | float, *, dtype: torch.dtype = torch.float64,
          linear_above_cos: float = 1.0, linear_below_sin: float = 1e-4, eps: float = 1e-12,
          out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Interpolate ``[B, ...]`` endpoints `a` (t = 0) and `b` (t = 1) at `t` (``[B]`` or a scalar).

    Args:
        dtype: the arithmetic precision.
        linear_above_cos: blend linearly where the cosine of the angle exceeds this (1.0: never by this rule).
        linear_below_sin: blend linearly where |sin(angle)| is below this (also catches the antipodal case; 0: never).
        eps: the smallest norm divided by.
        out_dtype: the result's dtype; None keeps `a`'s.
    Returns:
        ``[B, ...]`` with norm ``(1 − t)·‖a‖ + t·‖b‖``.
    """
    shape = a.shape
    va = a.reshape(shape[0], -1).to(dtype)
    vb = b.reshape(shape[0], -1).to(dtype)
    t = torch.as_tensor(t, dtype=dtype, device=va.device).reshape(-1, 1).expand(shape[0], 1)
    na = va.norm(dim=1, keepdim=True)
    nb = vb.norm(dim=1, keepdim=True)
    ua = va / na.clamp_min(eps)
    ub = vb / nb.clamp_min(eps)
    cos = (ua * ub).sum(dim=1, keepdim=True).clamp(-1.0, 1.0)
    theta = torch.acos(cos)
    sin = torch.sin(theta)
    linear = (cos > linear_above_cos) | (sin.abs() < linear_below_sin)
    safe_sin = torch.where(linear, torch.ones_like(sin), sin)
    wa = torch.where(linear, 1 - t, torch.sin((1 - t) * theta) / safe_sin)
    wb = torch.where(linear, t, torch.sin(t * theta) / safe_sin)
    direction = wa * ua + wb * ub
    direction = direction / direction.norm(dim=1, keepdim=True).clamp_min(eps)
    out = direction * ((1 - t) * na + t * nb)
    return out.reshape(shape).to(a.dtype if out_dtype is None else out_dtype)
