"""DDIM schedule, update rule and classifier-free guidance of the motion model (upstream: eta = 1)."""
import math

import torch

from engines.ditto import diffusion, nets


def test_time_pairs_for_ten_steps():
    pairs = diffusion.time_pairs(10)
    assert [t for t, _ in pairs] == [999, 899, 799, 699, 599, 499, 399, 299, 199, 99]
    assert [n for _, n in pairs] == [899, 799, 699, 599, 499, 399, 299, 199, 99, -1]


def test_cosine_schedule_endpoints():
    ac = diffusion.cosine_alphas_cumprod()
    assert ac.shape == (1000,) and ac.dtype == torch.float32
    assert 0.999 < ac[0] <= 1.0 and ac[-1] < 1e-4
    assert bool((ac[1:] <= ac[:-1]).all())


def test_update_rule_eta_one():
    gen = torch.Generator().manual_seed(0)
    plan = diffusion.make_plan(10, (1, 3, 4), gen)
    ac = diffusion.cosine_alphas_cumprod()
    t, tn = plan.pairs[2]
    a, an = ac[t].double(), ac[tn].double()
    sigma = math.sqrt((1 - a / an) * (1 - an) / (1 - a))
    c = math.sqrt(1 - an - sigma ** 2)
    x0, x_t = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    eps = diffusion.noise_from_x0(plan, x_t, t, x0)
    torch.testing.assert_close(eps, (x_t - a.sqrt().float() * x0) / (1 - a).sqrt().float(), rtol=1e-4, atol=1e-4)
    got = diffusion.ddim_step(plan, 2, x0, eps)
    want = x0 * math.sqrt(an) + c * eps + sigma * plan.noises[2]
    torch.testing.assert_close(got, want.float(), rtol=1e-5, atol=1e-5)
    assert sigma > 0                                             # eta = 1: stochastic, not DDIM-deterministic


def test_last_step_returns_x0_and_noises_are_shared():
    gen = torch.Generator().manual_seed(1)
    plan = diffusion.make_plan(4, (1, 2, 2), gen)
    assert len(plan.noises) == 3                                 # no noise for the final (t_next = -1) step
    seen = []

    def predict(x, times):
        seen.append(int(times[0]))
        return torch.full_like(x, 0.25)
    out = diffusion.sample(predict, plan, torch.zeros(1, 2, 2))
    assert torch.all(out == 0.25) and seen == [999, 749, 499, 249]


def test_guidance_combines_branches():
    torch.manual_seed(0)
    m = nets.MotionDecoder(nfeats=265, seq_len=6, latent_dim=16, ff_size=8, num_layers=1, cond_feature_dim=1103).eval()
    x, cf, c = torch.randn(1, 6, 265), torch.randn(1, 265), torch.randn(1, 6, 1103)
    t = torch.tensor([500])
    with torch.no_grad():
        cond = m(x, cf, c, t, use_cond=True)
        unc = m(x, cf, c, t, use_cond=False)
        torch.testing.assert_close(m.guided(x, cf, c, t, 2.0), unc + 2.0 * (cond - unc), rtol=1e-4, atol=1e-5)
        # the unconditional branch ignores the condition
        torch.testing.assert_close(unc, m(x, cf, torch.randn(1, 6, 1103), t, use_cond=False))
