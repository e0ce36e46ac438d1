"""DDIM sampling of motion windows, as upstream's LMDM runs it.

Upstream facts kept here: T = 1000 steps, cosine beta schedule (s = 0.008, betas clipped at 0.999, built in float64
and used in float32); sampling times ``int(linspace(-1, 999, S + 1))`` reversed in (t, t_next) pairs
(S = 10: 999, 899, ..., 99, -1); eta = 1; one set of per-step noises drawn at setup and reused by every window, a
fresh x_T per window; the model predicts x0 with classifier-free guidance (weight 2) and the noise is derived from it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

N_TIMESTEPS = 1000
STEP_PRESETS = (50, 25, 10, 4)


def cosine_alphas_cumprod(n: int = N_TIMESTEPS, s: float = 8e-3) -> torch.Tensor:
    steps = torch.arange(n + 1, dtype=torch.float64) / n + s
    f = torch.cos(steps / (1 + s) * math.pi / 2).pow(2)
    f = f / f[0]
    betas = np.clip((1 - f[1:] / f[:-1]).numpy(), 0, 0.999)
    return torch.cumprod(1.0 - torch.tensor(betas, dtype=torch.float32), dim=0)


def time_pairs(steps: int, n: int = N_TIMESTEPS) -> list[tuple[int, int]]:
    """[(t, t_next), ...] from n-1 down to -1 (upstream truncates linspace to int)."""
    times = torch.linspace(-1, n - 1, steps=steps + 1).int().tolist()[::-1]
    return list(zip(times[:-1], times[1:]))


@dataclass
class DDIMPlan:
    """Per-step constants and the noises shared by every window of one run."""

    pairs: list
    alpha_next_sqrt: list
    c: list
    sigma: list
    noises: list
    sqrt_recip_1m: torch.Tensor    # sqrt(1 / (1 - a)) per t
    sqrt_recip_m1: torch.Tensor    # sqrt(1 / a - 1) per t


def make_plan(steps: int, shape: tuple, generator: torch.Generator, eta: float = 1.0) -> DDIMPlan:
    if steps < 1 or steps > N_TIMESTEPS:
        raise ValueError(f"sampling steps must be in 1..{N_TIMESTEPS}, got {steps}")
    ac = cosine_alphas_cumprod()
    pairs = time_pairs(steps)
    ans, cs, sigmas, noises = [], [], [], []
    for t, t_next in pairs:
        if t_next < 0:
            continue
        a, an = ac[t], ac[t_next]
        sigma = eta * ((1 - a / an) * (1 - an) / (1 - a)).sqrt()
        ans.append(an.sqrt().item())
        cs.append((1 - an - sigma ** 2).sqrt().item())
        sigmas.append(sigma.item())
        noises.append(torch.randn(shape, generator=generator))
    return DDIMPlan(pairs, ans, cs, sigmas, noises, torch.sqrt(1.0 / (1.0 - ac)), torch.sqrt(1.0 / ac - 1))


def noise_from_x0(plan: DDIMPlan, x_t: torch.Tensor, t: int, x0: torch.Tensor) -> torch.Tensor:
    return plan.sqrt_recip_1m[t].item() * x_t - x0 / plan.sqrt_recip_m1[t].item()


def ddim_step(plan: DDIMPlan, i: int, x0: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """x_{t_next} = sqrt(a_next) x0 + c eps + sigma z_i."""
    z = plan.noises[i].to(x0.device, x0.dtype)
    return x0 * plan.alpha_next_sqrt[i] + plan.c[i] * eps + plan.sigma[i] * z


def sample(predict_x0: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], plan: DDIMPlan,
           x_T: torch.Tensor, check: Optional[Callable[[], None]] = None) -> torch.Tensor:
    """Run the reverse process from x_T; `predict_x0(x_t, times)` is the guided model."""
    x = x_T
    for i, (t, t_next) in enumerate(plan.pairs):
        if check is not None:
            check()
        times = torch.full((x.shape[0],), t, dtype=torch.long, device=x.device)
        x0 = predict_x0(x, times)
        if t_next < 0:
            return x0
        x = ddim_step(plan, i, x0, noise_from_x0(plan, x, t, x0))
    return x
