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

# `auto` on a CPU, per network: eager for both (docs/accel.md). On 2026-12-02, idle (load average 0.3-1.5), full size,
# random weights, cos 1.000000: with both libraries on their default threads (what a ComfyUI user gets) the UNet step
# took 960 ms eager fp32 and 1220 ms on ONNX Runtime (0.79x), the VAE decoder 1456 vs 1377 ms (1.06x), the pair
# 0.93x, and the ORT session holds a second copy of the UNet (+3.3 GB) after a 20 s export. ORT won only single-
# threaded (UNet 853 vs 1784 ms, 2.09x) and got slower with a second thread (1212 ms), while torch scaled (960 ms):
# the earlier 4.65x was measured one thread each under heavy load. Explicit `onnxruntime` stays one choice away.
CPU_PREFERENCE = {
    "unet": Preference(("eager",), "ONNX Runtime measured 0.79x eager fp32 on the full-size UNet at default "
                                   "threads, and +3.3 GB"),
    "vae_decode": Preference(("eager",), "ONNX Runtime measured 1.06x eager fp32 on the full-size VAE decoder, "
                                         "not worth a second copy of the weights"),
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
