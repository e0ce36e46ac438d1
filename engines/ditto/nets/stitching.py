"""S, the stitching network: an MLP that nudges driven keypoints so the rendered crop joins the frame seamlessly.

Keys: ``mlp.{0,2,4,6}`` (Linear; ReLU between). Input: source and driven keypoints flattened (B, 126);
output (B, 65) = 63 keypoint offsets + an (x, y) shift for every keypoint.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


class StitchingNetwork(nn.Module):
    def __init__(self, input_size: int = 126, hidden_sizes: Sequence[int] = (128, 128, 64), output_size: int = 65):
        super().__init__()
        layers: list[nn.Module] = []
        width = input_size
        for h in hidden_sizes:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, output_size))
        self.mlp = nn.Sequential(*layers)

    def forward(self, kp_source: torch.Tensor, kp_driving: torch.Tensor) -> torch.Tensor:
        """(B, K, 3) source and driven keypoints -> stitched driven keypoints (B, K, 3)."""
        b, k = kp_source.shape[0], kp_source.shape[1]
        delta = self.mlp(torch.cat([kp_source.reshape(b, -1), kp_driving.reshape(b, -1)], dim=1))
        out = kp_driving + delta[:, : 3 * k].reshape(b, k, 3)
        # the (x, y) shift of every keypoint, z unchanged; built without an in-place slice write, which the ONNX
        # exporter freezes at the traced batch size
        xy = delta[:, 3 * k: 3 * k + 2]
        shift = torch.cat([xy, torch.zeros_like(xy[:, :1])], dim=1)[:, None, :]
        return out + shift
