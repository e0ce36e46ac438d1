"""Export-friendly forms of ops that ONNX / TensorRT do not take as they are.

5-D ``grid_sample`` (Ditto's warp): legacy ONNX export refuses it below opset 20 and TensorRT's GridSample layer is
4-D only, so the exported graph uses trilinear sampling written as eight corner gathers. It is the same arithmetic as
``F.grid_sample(mode="bilinear", padding_mode="zeros", align_corners=False)`` on a volume: verified bit-identical
in fp32 and fp64 (tests/unit/test_accel_export.py), and it exports as GatherElements / Floor / Where only.
Eager runs keep ``F.grid_sample`` (one fused kernel); only a trace for export takes the gather path.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def grid_sample_3d(volume: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """``F.grid_sample(volume, grid, align_corners=False)`` for 5-D input; the gather form while exporting."""
    if torch.onnx.is_in_onnx_export():
        return grid_sample_3d_gather(volume, grid)
    return F.grid_sample(volume, grid, align_corners=False)


def grid_sample_3d_gather(volume: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Trilinear, zero padding, align_corners=False. volume (B, C, D, H, W), grid (B, d, h, w, 3) as (x, y, z)."""
    b, c, d_in, h_in, w_in = volume.shape
    _, d, h, w, _ = grid.shape
    # unnormalise exactly as ATen does for align_corners=False: ((g + 1) * size - 1) / 2
    x = ((grid[..., 0] + 1) * w_in - 1) / 2
    y = ((grid[..., 1] + 1) * h_in - 1) / 2
    z = ((grid[..., 2] + 1) * d_in - 1) / 2
    x0, y0, z0 = x.floor(), y.floor(), z.floor()
    # corner weights written as ATen writes them ((x0 + 1) - x, not 1 - (x - x0)): same rounding, same bits
    wxs, wys, wzs = ((x0 + 1) - x, x - x0), ((y0 + 1) - y, y - y0), ((z0 + 1) - z, z - z0)
    flat = volume.reshape(b, c, d_in * h_in * w_in)
    out = None
    for dz in (0, 1):
        zi = z0 + dz
        wz = wzs[dz]
        for dy in (0, 1):
            yi = y0 + dy
            wy = wys[dy]
            for dx in (0, 1):
                xi = x0 + dx
                wx = wxs[dx]
                inside = (xi >= 0) & (xi <= w_in - 1) & (yi >= 0) & (yi <= h_in - 1) & (zi >= 0) & (zi <= d_in - 1)
                idx = (zi.clamp(0, d_in - 1) * h_in + yi.clamp(0, h_in - 1)) * w_in + xi.clamp(0, w_in - 1)
                idx = idx.to(torch.int64).reshape(b, 1, d * h * w).expand(b, c, d * h * w)
                val = torch.gather(flat, 2, idx)
                weight = torch.where(inside, wx * wy * wz, torch.zeros_like(wx)).reshape(b, 1, d * h * w)
                term = val * weight
                out = term if out is None else out + term
    return out.reshape(b, c, d, h, w)
