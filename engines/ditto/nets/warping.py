"""W, the warping network: moves the appearance volume f_s from source keypoints x_s to driven keypoints x_d.

Shapes at upstream size: f_s (B, 32, 16, 64, 64), x_s and x_d (B, 21, 3) -> warped feature (B, 256, 64, 64).
Keys: ``dense_motion_network.{hourglass,mask,compress,norm,occlusion}``, ``third``, ``fourth``.
The dense-motion sizes (32, 1024, 5 blocks, depth 16, compress 4) are hard-coded upstream; here they are
parameters with those defaults. Upstream's argument order ``forward(f_s, x_s, x_d)`` is kept.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...accel.ops import grid_sample_3d
from .blocks import ConvNormAct2d, Hourglass3d


def coordinate_grid(d: int, h: int, w: int, like: torch.Tensor) -> torch.Tensor:
    """(d, h, w, 3) grid of (x, y, z) in [-1, 1] with align_corners=True spacing, as upstream builds it."""
    def axis(n):
        return torch.arange(n, dtype=like.dtype, device=like.device) * (2.0 / max(n - 1, 1)) - 1.0
    z, y, x = torch.meshgrid(axis(d), axis(h), axis(w), indexing="ij")
    return torch.stack([x, y, z], dim=-1)


class DenseMotionNetwork(nn.Module):
    def __init__(self, num_kp: int = 21, feature_channel: int = 32, block_expansion: int = 32,
                 max_features: int = 1024, num_blocks: int = 5, reshape_depth: int = 16, compress: int = 4,
                 kp_variance: float = 0.01):
        super().__init__()
        self.num_kp = num_kp
        self.kp_variance = kp_variance
        self.hourglass = Hourglass3d(block_expansion, (num_kp + 1) * (compress + 1), num_blocks, max_features)
        self.mask = nn.Conv3d(self.hourglass.out_filters, num_kp + 1, kernel_size=7, padding=3)
        self.compress = nn.Conv3d(feature_channel, compress, kernel_size=1)
        self.norm = nn.BatchNorm3d(compress)
        self.occlusion = nn.Conv2d(self.hourglass.out_filters * reshape_depth, 1, kernel_size=7, padding=3)

    def forward(self, feature, kp_source, kp_driving):
        """Returns (deformation (B, d, h, w, 3), occlusion (B, 1, h, w))."""
        b, _, d, h, w = feature.shape
        k = self.num_kp
        feat = F.relu(self.norm(self.compress(feature)))
        c = feat.shape[1]
        grid = coordinate_grid(d, h, w, kp_source)                                  # (d, h, w, 3)
        # channel 0 keeps the identity (background); channel k follows keypoint k from driven to source
        to_source = grid[None, None] - kp_driving.view(b, k, 1, 1, 1, 3) + kp_source.view(b, k, 1, 1, 1, 3)
        motions = torch.cat([grid[None, None].expand(b, 1, d, h, w, 3), to_source], dim=1)  # (b, k+1, d, h, w, 3)
        feats = feat[:, None].expand(b, k + 1, c, d, h, w).reshape(b * (k + 1), c, d, h, w)
        deformed = grid_sample_3d(feats, motions.reshape(b * (k + 1), d, h, w, 3))
        deformed = deformed.view(b, k + 1, c, d, h, w)
        heat = self._gaussian(kp_driving, grid) - self._gaussian(kp_source, grid)   # (b, k, d, h, w)
        heat = torch.cat([heat.new_zeros(b, 1, d, h, w), heat], dim=1)[:, :, None]
        x = torch.cat([heat, deformed], dim=2).view(b, -1, d, h, w)
        pred = self.hourglass(x)
        mask = torch.softmax(self.mask(pred), dim=1)                                  # (b, k+1, d, h, w)
        deformation = torch.einsum("bkdhw,bkdhwc->bdhwc", mask, motions)
        occlusion = torch.sigmoid(self.occlusion(pred.reshape(b, -1, h, w)))
        return deformation, occlusion

    def _gaussian(self, kp, grid):
        diff = grid[None, None] - kp[:, :, None, None, None, :]
        return torch.exp(-0.5 * diff.pow(2).sum(-1) / self.kp_variance)


class WarpingNetwork(nn.Module):
    def __init__(self, num_kp: int = 21, block_expansion: int = 64, max_features: int = 512,
                 num_down_blocks: int = 2, reshape_channel: int = 32, dense_block_expansion: int = 32,
                 dense_max_features: int = 1024, dense_num_blocks: int = 5, dense_reshape_depth: int = 16,
                 dense_compress: int = 4):
        super().__init__()
        self.dense_motion_network = DenseMotionNetwork(
            num_kp=num_kp, feature_channel=reshape_channel, block_expansion=dense_block_expansion,
            max_features=dense_max_features, num_blocks=dense_num_blocks, reshape_depth=dense_reshape_depth,
            compress=dense_compress)
        out = block_expansion * 2 ** num_down_blocks
        self.third = ConvNormAct2d(max_features, out, leaky=True)
        self.fourth = nn.Conv2d(out, out, kernel_size=1)

    def forward(self, feature_3d, kp_source, kp_driving):
        deformation, occlusion = self.dense_motion_network(feature_3d, kp_source, kp_driving)
        warped = grid_sample_3d(feature_3d, deformation)   # gather form when exported (ONNX/TensorRT)
        b, c, d, h, w = warped.shape
        out = self.fourth(self.third(warped.view(b, c * d, h, w)))
        return out * occlusion
