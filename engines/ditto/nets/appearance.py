"""F, the appearance feature extractor: a 256x256 RGB crop -> a 3-D feature volume f_s.

Shapes at upstream size: (B, 3, 256, 256) in [0, 1] -> (B, 32, 16, 64, 64).
Keys: ``first``, ``down_blocks.{0,1}``, ``second``, ``resblocks_3d.3dr{0..5}``.
"""
from __future__ import annotations

from torch import nn

from .blocks import ConvNormAct2d, Down2d, PreActResidual3d


class AppearanceFeatureExtractor(nn.Module):
    def __init__(self, image_channel: int = 3, block_expansion: int = 64, num_down_blocks: int = 2,
                 max_features: int = 512, reshape_channel: int = 32, reshape_depth: int = 16,
                 num_resblocks: int = 6):
        super().__init__()
        if reshape_channel * reshape_depth != max_features:
            raise ValueError(f"reshape_channel*reshape_depth ({reshape_channel}*{reshape_depth}) must equal "
                             f"max_features ({max_features})")
        self.reshape_channel = reshape_channel
        self.reshape_depth = reshape_depth
        self.first = ConvNormAct2d(image_channel, block_expansion)
        width = [min(max_features, block_expansion * 2 ** i) for i in range(num_down_blocks + 1)]
        self.down_blocks = nn.ModuleList(Down2d(width[i], width[i + 1]) for i in range(num_down_blocks))
        self.second = nn.Conv2d(width[-1], max_features, kernel_size=1)
        self.resblocks_3d = nn.Sequential()
        for i in range(num_resblocks):
            self.resblocks_3d.add_module(f"3dr{i}", PreActResidual3d(reshape_channel))

    def forward(self, image):
        x = self.first(image)
        for block in self.down_blocks:
            x = block(x)
        x = self.second(x)
        b, _, h, w = x.shape
        return self.resblocks_3d(x.view(b, self.reshape_channel, self.reshape_depth, h, w))
