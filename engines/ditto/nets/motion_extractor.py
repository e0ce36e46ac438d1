"""M, the motion extractor: a ConvNeXt-V2 backbone predicting canonical keypoints, pose bins, translation,
expression offsets and scale from a 256x256 RGB crop.

Outputs (B = batch): pitch, yaw, roll (B, 66) bin logits; t (B, 3); exp (B, 63); scale (B, 1); kp (B, 63).
Keys live under ``detector.``: ``downsample_layers.i``, ``stages.i.j`` (dwconv, norm, pwconv1, grn, pwconv2),
``norm``, ``fc_kp``, ``fc_scale``, ``fc_pitch``, ``fc_yaw``, ``fc_roll``, ``fc_t``, ``fc_exp``.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import ChannelsFirstLayerNorm


class GlobalResponseNorm(nn.Module):
    """ConvNeXt-V2's GRN on NHWC tensors: scale each channel by its spatial L2 norm over the channel mean."""

    def __init__(self, dim: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, 1, dim))

    def forward(self, x):
        g = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        n = g / (g.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * n) + self.beta + x


class _LastDimLayerNorm(nn.Module):
    """LayerNorm on NHWC with the checkpoint's ``weight``/``bias`` names and eps 1e-6."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        # the normalised size from the weight (a constant), not from x.shape: a traced size is not constant in ONNX
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-6)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = _LastDimLayerNorm(dim)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.grn = GlobalResponseNorm(4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(self.grn(F.gelu(self.pwconv1(self.norm(y)))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXtV2Heads(nn.Module):
    def __init__(self, depths: Sequence[int], dims: Sequence[int], num_kp: int, num_bins: int, in_chans: int = 3):
        super().__init__()
        self.downsample_layers = nn.ModuleList()
        self.downsample_layers.append(nn.Sequential(nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4),
                                                    ChannelsFirstLayerNorm(dims[0])))
        for i in range(len(dims) - 1):
            self.downsample_layers.append(nn.Sequential(ChannelsFirstLayerNorm(dims[i]),
                                                        nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2)))
        self.stages = nn.ModuleList(nn.Sequential(*[ConvNeXtBlock(d) for _ in range(n)])
                                    for d, n in zip(dims, depths))
        c = dims[-1]
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.fc_kp = nn.Linear(c, 3 * num_kp)
        self.fc_scale = nn.Linear(c, 1)
        self.fc_pitch = nn.Linear(c, num_bins)
        self.fc_yaw = nn.Linear(c, num_bins)
        self.fc_roll = nn.Linear(c, num_bins)
        self.fc_t = nn.Linear(c, 3)
        self.fc_exp = nn.Linear(c, 3 * num_kp)

    def forward(self, x):
        for down, stage in zip(self.downsample_layers, self.stages):
            x = stage(down(x))
        x = self.norm(x.mean(dim=(-2, -1)))
        return (self.fc_pitch(x), self.fc_yaw(x), self.fc_roll(x), self.fc_t(x), self.fc_exp(x),
                self.fc_scale(x), self.fc_kp(x))


class MotionExtractor(nn.Module):
    """Returns the tuple ``(pitch, yaw, roll, t, exp, scale, kp)`` like upstream."""

    def __init__(self, num_kp: int = 21, num_bins: int = 66, depths: Sequence[int] = (3, 3, 9, 3),
                 dims: Sequence[int] = (96, 192, 384, 768)):
        super().__init__()
        self.detector = ConvNeXtV2Heads(depths, dims, num_kp, num_bins)

    def forward(self, x):
        return self.detector(x)
