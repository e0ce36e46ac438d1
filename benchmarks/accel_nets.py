"""Full-size networks with random weights for the accelerated-backend benchmarks (CPU and GPU share them).

Speed does not depend on the weights' values, so the real architectures are built from their configs and randomly
initialised: MuseTalk's UNet (musetalk.json) + the sd-vae-ft-mse decoder (needs diffusers), Ditto's warp network
and SPADE decoder at upstream's sizes (the pack's own modules, no extra package). ``tiny=True`` gives the small
versions the smoke runs use.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engines.accel import Network  # noqa: E402
from engines.ditto import nets as ditto_nets  # noqa: E402
from engines.musetalk.accel import CPU_PREFERENCE, UNetStep, VaeDecode  # noqa: E402

UNET = dict(act_fn="silu", attention_head_dim=8, block_out_channels=[320, 640, 1280, 1280], cross_attention_dim=384,
            down_block_types=["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"], downsample_padding=1,
            flip_sin_to_cos=True, freq_shift=0, in_channels=8, layers_per_block=2, norm_eps=1e-5, norm_num_groups=32,
            out_channels=4, sample_size=64, up_block_types=["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3)
VAE = dict(act_fn="silu", block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
           in_channels=3, latent_channels=4, layers_per_block=2, norm_num_groups=32, out_channels=3, sample_size=256,
           up_block_types=["UpDecoderBlock2D"] * 4)
TINY_UNET = dict(UNET, attention_head_dim=2, block_out_channels=[32, 64, 64, 64], layers_per_block=1)
TINY_VAE = dict(VAE, block_out_channels=[16, 16, 32, 32], layers_per_block=1, norm_num_groups=16)
TINY_WARP = dict(block_expansion=2, max_features=16, reshape_channel=4, dense_block_expansion=2, dense_max_features=8,
                 dense_num_blocks=2, dense_reshape_depth=4, dense_compress=1)
TINY_DECODER = dict(max_features=8, block_expansion=2, out_channels=4, spade_hidden=4)


def _seeded(seed):
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def musetalk_modules(tiny: bool = False, seed: int = 0, unet: bool = True) -> tuple:
    """(UNet, VAE): MuseTalk's diffusers modules with random weights, fp32 on the CPU, eval, no grad (UNet None
    when `unet` is false: it is 3.4 GB at full size). Raises ImportError without diffusers."""
    from diffusers import AutoencoderKL, UNet2DConditionModel

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(**(TINY_UNET if tiny else UNET)).eval().requires_grad_(False) if unet else None
    vae = AutoencoderKL(**(TINY_VAE if tiny else VAE)).eval().requires_grad_(False)
    return unet, vae


def musetalk_networks(tiny: bool = False, names=None) -> list:
    """[UNet step, VAE decode] as accel Networks (CPU, fp32); only those in `names` when given. Raises ImportError
    without diffusers."""
    unet, vae = musetalk_modules(tiny, unet=not names or "musetalk_unet" in names)
    gen = _seeded(0)
    vae.encoder = None                              # only the decoder runs per frame
    tag = "-tiny" if tiny else ""                   # weights_id is part of the ONNX cache key: tiny != full size
    nets = [
        Network("musetalk_unet", UNetStep(unet), lambda b: (torch.randn(b, 8, 32, 32, generator=gen),
                                                            torch.randn(b, 50, 384, generator=gen)),
                ("latents", "audio"), ("pred",), "random-unet" + tag, convolutional=True,
                prefer={"cpu": CPU_PREFERENCE["unet"]}) if unet is not None else None,
        Network("musetalk_vae_decoder", VaeDecode(vae, 0.18215), lambda b: (torch.randn(b, 4, 32, 32, generator=gen),),
                ("latents",), ("faces",), "random-vae" + tag, convolutional=True,
                prefer={"cpu": CPU_PREFERENCE["vae_decode"]}),
    ]
    return [n for n in nets if n is not None]


def ditto_networks(tiny: bool = False) -> list:
    """[warp, decoder] at upstream's sizes: f_s (B, 32, 16, 64, 64) + keypoints -> (B, 256, 64, 64) -> 512 crop."""
    gen = _seeded(0)
    warp = ditto_nets.WarpingNetwork(**(TINY_WARP if tiny else {})).eval().requires_grad_(False)
    decoder = ditto_nets.SPADEDecoder(**(TINY_DECODER if tiny else {})).eval().requires_grad_(False)
    decoder.fold_spectral_norm()
    c, d, hw = (4, 4, 16) if tiny else (32, 16, 64)
    tag = "-tiny" if tiny else ""
    feat_c, feat_hw = (8, 16) if tiny else (256, 64)
    return [
        Network("ditto_warp", warp, lambda b: (torch.randn(b, c, d, hw, hw, generator=gen),
                                               torch.randn(b, 21, 3, generator=gen) * 0.1,
                                               torch.randn(b, 21, 3, generator=gen) * 0.1),
                ("f_s", "kp_source", "kp_driving"), ("feature",), "random-warp" + tag),
        Network("ditto_decoder", decoder, lambda b: (torch.randn(b, feat_c, feat_hw, feat_hw, generator=gen),),
                ("feature",), ("crop",), "random-decoder" + tag, convolutional=True),
    ]
