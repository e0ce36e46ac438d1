"""Ditto's six networks for the accelerated layer (``engines/accel``).

motion extractor and appearance extractor (avatar registration, once per avatar), LMDM with classifier-free
guidance (one call per diffusion step), stitching, warp (its 5-D grid_sample exported in the gather form, see
``engines/accel/ops.py``) and the SPADE decoder (per rendered frame). Example shapes are read off one pass of the
loaded networks, so the same description serves upstream's sizes and the tests' tiny ones.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import torch
from torch import nn

from ..accel import BuildOptions, Network, accelerate

CROP_IN = 256                     # the extractors' input size
MOTION_OUTPUTS = ("pitch", "yaw", "roll", "t", "exp", "scale", "kp")   # MotionExtractor's tuple order
RENDER = ("stitch", "warp", "decoder")
REGISTER = ("motion_extractor", "appearance")


class GuidedLMDM(nn.Module):
    """(x, cond_frame, cond, times) -> guided x0, upstream's guidance weight baked in."""

    def __init__(self, lmdm, guidance: float):
        super().__init__()
        self.lmdm, self.guidance = lmdm, float(guidance)

    def forward(self, x, cond_frame, cond, times):
        return self.lmdm.guided(x, cond_frame, cond, times, self.guidance)


def _shapes(nets) -> dict:
    p = next(nets.parameters())
    with torch.inference_mode():
        img = torch.rand(1, 3, CROP_IN, CROP_IN, device=p.device, dtype=p.dtype)
        f_s = nets.appearance(img)
        kp = nets.motion_extractor(img)[-1].reshape(1, -1, 3)
        feat = nets.warp(f_s, kp, kp)
    return {"f_s": tuple(f_s.shape[1:]), "kp": tuple(kp.shape[1:]), "feat": tuple(feat.shape[1:])}


def networks(nets, guidance: float = 2.0, weights_id: Optional[str] = None) -> dict:
    """Network descriptions keyed as ``nets.runners`` holds them; `weights_id`: e.g. the pipeline's fingerprint."""
    s = _shapes(nets)
    lm = nets.lmdm
    gen = torch.Generator().manual_seed(0)

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen) * scale

    def wid(name):
        return None if weights_id is None else f"{weights_id}:{name}"

    motion_dim = lm.final_layer.out_features
    return {
        "motion_extractor": Network("ditto_motion_extractor", nets.motion_extractor,
                                    lambda b: (torch.rand(b, 3, CROP_IN, CROP_IN, generator=gen),),
                                    ("image",), MOTION_OUTPUTS, wid("motion"), convolutional=True),
        "appearance": Network("ditto_appearance_extractor", nets.appearance,
                              lambda b: (torch.rand(b, 3, CROP_IN, CROP_IN, generator=gen),),
                              ("image",), ("f_s",), wid("appearance"), convolutional=True),
        "lmdm": Network(f"ditto_lmdm_g{guidance:g}", GuidedLMDM(lm, guidance),
                        lambda b: (rnd(b, lm.seq_len, motion_dim), rnd(b, motion_dim),
                                   rnd(b, lm.seq_len, lm.cond_projection.in_features),
                                   torch.randint(0, 1000, (b,), generator=gen)),
                        ("x", "cond_frame", "cond", "times"), ("x0",), wid("lmdm")),
        "stitch": Network("ditto_stitching", nets.stitch,
                          lambda b: (rnd(b, *s["kp"], scale=0.1), rnd(b, *s["kp"], scale=0.1)),
                          ("kp_source", "kp_driving"), ("kp_stitched",), wid("stitch")),
        "warp": Network("ditto_warp", nets.warp,
                        lambda b: (rnd(b, *s["f_s"]), rnd(b, *s["kp"], scale=0.1), rnd(b, *s["kp"], scale=0.1)),
                        ("f_s", "kp_source", "kp_driving"), ("feature",), wid("warp")),
        "decoder": Network("ditto_decoder", nets.decoder, lambda b: (rnd(b, *s["feat"]),),
                           ("feature",), ("crop",), wid("decoder"), convolutional=True),
    }


def accelerate_ditto(nets, backend: str = "auto", opts: Optional[BuildOptions] = None, guidance: float = 2.0,
                     weights_id: Optional[str] = None, which=("lmdm", *RENDER)) -> list:
    """Build runners for `which` into ``nets.runners`` (the rest stay eager); returns their summaries."""
    descriptions = networks(nets, guidance, weights_id)
    runners = dict(getattr(nets, "runners", {}) or {})
    opts = opts or BuildOptions()
    for name in which:
        # LMDM samples one window at a time: its profile / graph is batch 1 whatever the render batch is
        runners[name] = accelerate(descriptions[name], backend,
                                   replace(opts, batches=(1,)) if name == "lmdm" else opts)
    nets.runners = runners
    return [runners[n].summary for n in which]

