"""Building blocks shared by the renderer networks (LivePortrait architecture, as Ditto ships it).

Attribute names are the checkpoint's key names (``conv``, ``norm``, ``norm1``...); do not rename them.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ConvNormAct2d(nn.Module):
    """3x3 conv -> BatchNorm2d -> ReLU (or LeakyReLU 0.01). Keys: ``conv``, ``norm``."""

    def __init__(self, cin: int, cout: int, leaky: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm2d(cout)
        self.leaky = leaky

    def forward(self, x):
        x = self.norm(self.conv(x))
        return F.leaky_relu(x, 0.01) if self.leaky else F.relu(x)


class Down2d(nn.Module):
    """3x3 conv -> BatchNorm2d -> ReLU -> 2x2 average pool. Keys: ``conv``, ``norm``."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.avg_pool2d(F.relu(self.norm(self.conv(x))), 2)


class PreActResidual3d(nn.Module):
    """BN -> ReLU -> conv -> BN -> ReLU -> conv, plus the input. Keys: ``conv1``, ``conv2``, ``norm1``, ``norm2``."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv3d(channels, channels, kernel_size=3, padding=1)
        self.conv2 = nn.Conv3d(channels, channels, kernel_size=3, padding=1)
        self.norm1 = nn.BatchNorm3d(channels)
        self.norm2 = nn.BatchNorm3d(channels)

    def forward(self, x):
        y = self.conv1(F.relu(self.norm1(x)))
        return x + self.conv2(F.relu(self.norm2(y)))


class Down3d(nn.Module):
    """3x3x3 conv -> BN -> ReLU -> pool (1, 2, 2): depth is kept, height and width halve."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm3d(cout)

    def forward(self, x):
        y = F.relu(self.norm(self.conv(x)))
        # pool (1, 2, 2) as a 2-D pool over (B, C*D, H, W): the same averages, and unlike avg_pool3d it has a
        # bf16 kernel on the CPU (found by the bf16 run of tests/unit/test_accel_gpu_path.py)
        b, c, d, h, w = y.shape
        return F.avg_pool2d(y.reshape(b, c * d, h, w), 2).reshape(b, c, d, h // 2, w // 2)


class Up3d(nn.Module):
    """Nearest upsample (1, 2, 2) -> 3x3x3 conv -> BN -> ReLU."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm3d(cout)

    def forward(self, x):
        x = F.interpolate(x, scale_factor=(1, 2, 2))
        return F.relu(self.norm(self.conv(x)))


class _Encoder(nn.Module):
    def __init__(self, base: int, cin: int, num_blocks: int, max_features: int):
        super().__init__()
        width = [cin] + [min(max_features, base * 2 ** (i + 1)) for i in range(num_blocks)]
        self.down_blocks = nn.ModuleList(Down3d(width[i], width[i + 1]) for i in range(num_blocks))


class _Decoder(nn.Module):
    def __init__(self, base: int, cin: int, num_blocks: int, max_features: int):
        super().__init__()
        blocks = []
        for i in reversed(range(num_blocks)):
            # every block but the deepest also receives the skip connection concatenated to its input
            fin = (1 if i == num_blocks - 1 else 2) * min(max_features, base * 2 ** (i + 1))
            blocks.append(Up3d(fin, min(max_features, base * 2 ** i)))
        self.up_blocks = nn.ModuleList(blocks)
        self.out_filters = base + cin
        self.conv = nn.Conv3d(self.out_filters, self.out_filters, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm3d(self.out_filters)


class Hourglass3d(nn.Module):
    """U-Net over (depth, height, width) volumes; output has ``base + in_channels`` channels.

    Keys: ``encoder.down_blocks.i``, ``decoder.up_blocks.i``, ``decoder.conv``, ``decoder.norm``.
    """

    def __init__(self, base: int, cin: int, num_blocks: int, max_features: int):
        super().__init__()
        self.encoder = _Encoder(base, cin, num_blocks, max_features)
        self.decoder = _Decoder(base, cin, num_blocks, max_features)
        self.out_filters = self.decoder.out_filters

    def forward(self, x):
        skips = [x]
        for block in self.encoder.down_blocks:
            skips.append(block(skips[-1]))
        out = skips.pop()
        for block in self.decoder.up_blocks:
            out = torch.cat([block(out), skips.pop()], dim=1)
        return F.relu(self.decoder.norm(self.decoder.conv(out)))


class ChannelsFirstLayerNorm(nn.Module):
    """LayerNorm over the channel axis of an NCHW tensor (ConvNeXt's stem/downsample norm). Keys: weight, bias."""

    def __init__(self, channels: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(1, keepdim=True)
        var = (x - mean).pow(2).mean(1, keepdim=True)
        x = (x - mean) * torch.rsqrt(var + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]
