"""MuseTalk's networks for the accelerated layer: the UNet step and the VAE decoder (``engines/accel``).

The UNet is run at timestep 0 with the audio windows as cross-attention context, exactly as ``lipsync`` calls it;
the VAE decoder takes the UNet's latents and returns faces in [-1, 1]. Whisper stays eager (it runs once per
30 s of audio, not per frame).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..accel import BuildOptions, Network, Preference, accelerate
from .audio_features import TOKENS

LATENT = 32          # 256 px face crop / 8

# `auto` on a CPU, per network (docs/accel.md, full size, random weights, one thread each, cos 1.000000 vs eager):
# ONNX Runtime ran the UNet step in 3.70 s against eager fp32's 17.2 s (4.65x) and the VAE decoder in 26.5 s
# against 11.5 s (0.43x); the mix (ORT UNet, eager VAE) was 1.89x eager on UNet + VAE. GPUs keep the device order.
CPU_PREFERENCE = {
    "unet": Preference(("onnxruntime", "eager"), "ONNX Runtime measured 4.65x eager fp32 on the full-size UNet"),
    "vae_decode": Preference(("eager",), "ONNX Runtime measured 0.43x eager fp32 on the full-size VAE decoder"),
}


class UNetStep(nn.Module):
    """(latents [B, 8, h, w], audio [B, 50, 384]) -> predicted latents [B, 4, h, w] at timestep 0."""

    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, latents, audio):
        timestep = torch.zeros(1, dtype=torch.long, device=latents.device)
        return self.unet(latents, timestep, encoder_hidden_states=audio).sample


class VaeDecode(nn.Module):
    """Scaled latents [B, 4, h, w] -> faces [B, 3, 8h, 8w] in [-1, 1]."""

    def __init__(self, vae, scaling_factor: float):
        super().__init__()
        self.vae = vae
        self.scale = float(scaling_factor)

    def forward(self, latents):
        return self.vae.decode(latents / self.scale).sample


def networks(nets, latent: int = LATENT) -> dict:
    width = nets.audio_width
    weights = getattr(nets, "vae_id", None)
    unet_id = getattr(nets, "unet_id", None)      # the files' fingerprint; None: hashed from the weights (slow)
    gen = torch.Generator().manual_seed(0)
    return {
        "unet": Network("musetalk_unet", UNetStep(nets.unet),
                        lambda b: (torch.randn(b, 8, latent, latent, generator=gen),
                                   torch.randn(b, TOKENS, width, generator=gen)),
                        ("latents", "audio"), ("pred",), unet_id, convolutional=True,
                        prefer={"cpu": CPU_PREFERENCE["unet"]}),
        "vae_decode": Network("musetalk_vae_decoder", VaeDecode(nets.vae, nets.scaling_factor),
                              lambda b: (torch.randn(b, 4, latent, latent, generator=gen),),
                              ("latents",), ("faces",), weights, convolutional=True,
                              prefer={"cpu": CPU_PREFERENCE["vae_decode"]}),
    }


def accelerate_musetalk(nets, backend: str = "auto", opts: Optional[BuildOptions] = None,
                        latent: int = LATENT) -> list:
    """Build the runners ``lipsync`` uses (``nets.runners``); returns their summaries."""
    runners = {k: accelerate(net, backend, opts) for k, net in networks(nets, latent).items()}
    nets.runners = runners
    return [r.summary for r in runners.values()]
