"""G, the SPADE decoder: warped feature (B, 256, 64, 64) -> RGB crop (B, 3, 512, 512) in [0, 1].

Upstream wraps every conv of the residual blocks in the old ``torch.nn.utils.spectral_norm``, so its checkpoint
stores ``weight_orig``, ``weight_u`` and ``weight_v`` instead of ``weight``. This module keeps those three names as
buffers (so the checkpoint loads strictly) and `fold_spectral_norm` turns them into the plain weight once, after
loading: eval-time spectral norm is a constant division, there is no reason to redo it every frame.
Keys: ``fc``, ``G_middle_{0..5}``, ``up_0``, ``up_1``, ``conv_img.0``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SpectralConv2d(nn.Module):
    """A conv whose weight is ``weight_orig / sigma`` with sigma = u . (W v), computed once by `fold`."""

    def __init__(self, cin: int, cout: int, kernel_size: int, bias: bool = True):
        super().__init__()
        self.padding = kernel_size // 2
        self.weight_orig = nn.Parameter(torch.empty(cout, cin, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(cout)) if bias else None
        self.register_buffer("weight_u", torch.randn(cout))
        self.register_buffer("weight_v", torch.randn(cin * kernel_size * kernel_size))
        self.register_buffer("weight", torch.empty(0), persistent=False)
        nn.init.kaiming_uniform_(self.weight_orig, a=5 ** 0.5)

    @torch.no_grad()
    def fold(self) -> None:
        w = self.weight_orig
        sigma = torch.dot(self.weight_u, w.reshape(w.shape[0], -1) @ self.weight_v)
        self.weight = (w / sigma).detach().clone()

    def forward(self, x):
        if self.weight.numel() == 0:
            self.fold()
        return F.conv2d(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype),
                        padding=self.padding)


class SPADE(nn.Module):
    """Instance norm modulated by the segmentation-like feature map. Keys: mlp_shared.0, mlp_gamma, mlp_beta."""

    def __init__(self, channels: int, label_channels: int, hidden: int = 128):
        super().__init__()
        self.mlp_shared = nn.Sequential(nn.Conv2d(label_channels, hidden, 3, padding=1), nn.ReLU())
        self.mlp_gamma = nn.Conv2d(hidden, channels, 3, padding=1)
        self.mlp_beta = nn.Conv2d(hidden, channels, 3, padding=1)

    def forward(self, x, seg):
        normed = F.instance_norm(x)
        act = self.mlp_shared(F.interpolate(seg, size=x.shape[2:], mode="nearest"))
        return normed * (1 + self.mlp_gamma(act)) + self.mlp_beta(act)


class SPADEResBlock(nn.Module):
    def __init__(self, fin: int, fout: int, label_channels: int, hidden: int = 128):
        super().__init__()
        mid = min(fin, fout)
        self.learned_shortcut = fin != fout
        self.conv_0 = SpectralConv2d(fin, mid, 3)
        self.conv_1 = SpectralConv2d(mid, fout, 3)
        self.norm_0 = SPADE(fin, label_channels, hidden)
        self.norm_1 = SPADE(mid, label_channels, hidden)
        if self.learned_shortcut:
            self.conv_s = SpectralConv2d(fin, fout, 1, bias=False)
            self.norm_s = SPADE(fin, label_channels, hidden)

    def forward(self, x, seg):
        skip = self.conv_s(self.norm_s(x, seg)) if self.learned_shortcut else x
        dx = self.conv_0(F.leaky_relu(self.norm_0(x, seg), 0.2))
        dx = self.conv_1(F.leaky_relu(self.norm_1(dx, seg), 0.2))
        return skip + dx


class SPADEDecoder(nn.Module):
    def __init__(self, upscale: int = 2, max_features: int = 512, block_expansion: int = 64, out_channels: int = 64,
                 num_down_blocks: int = 2, spade_hidden: int = 128):
        super().__init__()
        cin = min(max_features, block_expansion * 2 ** num_down_blocks)
        self.fc = nn.Conv2d(cin, 2 * cin, 3, padding=1)
        for i in range(6):
            setattr(self, f"G_middle_{i}", SPADEResBlock(2 * cin, 2 * cin, cin, spade_hidden))
        self.up_0 = SPADEResBlock(2 * cin, cin, cin, spade_hidden)
        self.up_1 = SPADEResBlock(cin, out_channels, cin, spade_hidden)
        if upscale is None or upscale <= 1:
            self.conv_img = nn.Conv2d(out_channels, 3, 3, padding=1)
        else:
            self.conv_img = nn.Sequential(nn.Conv2d(out_channels, 3 * 4, 3, padding=1), nn.PixelShuffle(2))

    def fold_spectral_norm(self) -> None:
        for m in self.modules():
            if isinstance(m, SpectralConv2d):
                m.fold()

    def forward(self, feature):
        seg = feature
        x = self.fc(feature)
        for i in range(6):
            x = getattr(self, f"G_middle_{i}")(x, seg)
        x = self.up_0(F.interpolate(x, scale_factor=2), seg)
        x = self.up_1(F.interpolate(x, scale_factor=2), seg)
        return torch.sigmoid(self.conv_img(F.leaky_relu(x, 0.2)))
