"""Numeric parity with upstream at full width: the pack's modules, given the same seeded full-size weights and
inputs, reproduce reference outputs recorded by running antgroup/ditto-talkinghead's own modules (commit e9191cf)
on the same weights (tests/data/ditto_upstream_parity.json). Spatial sizes are small where the architecture
allows it (the weights and channel widths are full size), to keep the test quick on a CPU.
"""
import json
from pathlib import Path

import pytest
import torch

from engines.ditto import nets

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "ditto_upstream_parity.json").read_text())


def fill(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Deterministic weights over the sorted state-dict keys (identical for any module with the same keys)."""
    gen = torch.Generator().manual_seed(seed)
    state = module.state_dict()
    with torch.no_grad():
        for key in sorted(state):
            t = state[key]
            if not t.dtype.is_floating_point or key.endswith("freqs"):
                continue
            if key.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=gen) + 0.5)
            elif key.endswith("weight_u") or key.endswith("weight_v"):
                t.copy_(torch.nn.functional.normalize(torch.randn(t.shape, generator=gen), dim=0))
            elif t.dim() > 1:
                t.copy_(torch.randn(t.shape, generator=gen) / max(1, t[0].numel()) ** 0.5)
            else:
                t.copy_(torch.randn(t.shape, generator=gen) * 0.1)
        # spectral norm: u = W v / |W v| makes sigma = |W v|, a sensible scale (random u would blow the weights up)
        for key in sorted(k for k in state if k.endswith("weight_u")):
            prefix = key[: -len("weight_u")]
            w, v = state[prefix + "weight_orig"], state[prefix + "weight_v"]
            state[key].copy_(torch.nn.functional.normalize(w.reshape(w.shape[0], -1) @ v, dim=0))
    return module.eval()


def inputs(name: str):
    gen = torch.Generator().manual_seed(1234)
    if name in ("appearance_extractor", "motion_extractor"):
        return (torch.rand(1, 3, 64, 64, generator=gen),)
    if name == "warp_network":
        xs = torch.rand(1, 21, 3, generator=gen) - 0.5
        return torch.randn(1, 32, 16, 32, 32, generator=gen), xs, xs + 0.05 * torch.randn(1, 21, 3, generator=gen)
    if name == "decoder":
        return (torch.randn(1, 256, 16, 16, generator=gen),)
    if name == "stitch_network":
        xs = torch.rand(1, 21, 3, generator=gen) - 0.5
        return xs, xs + 0.05 * torch.randn(1, 21, 3, generator=gen)
    if name == "lmdm":
        return (torch.randn(1, 80, 265, generator=gen), torch.randn(1, 265, generator=gen),
                torch.randn(1, 80, 1103, generator=gen), torch.tensor([899]))
    raise KeyError(name)


def summary(out) -> dict:
    flat = torch.cat([o.reshape(-1) for o in (out if isinstance(out, (tuple, list)) else (out,))]).double()
    step = max(1, flat.numel() // 64)
    return {"numel": flat.numel(), "sum": flat.sum().item(), "abs_sum": flat.abs().sum().item(),
            "samples": flat[::step][:64].tolist()}


MODULES = {
    "appearance_extractor": nets.AppearanceFeatureExtractor, "motion_extractor": nets.MotionExtractor,
    "warp_network": nets.WarpingNetwork, "decoder": nets.SPADEDecoder, "stitch_network": nets.StitchingNetwork,
    "lmdm": nets.MotionDecoder,
}


def run_pack(name: str):
    module = fill(MODULES[name](), seed=7)
    if name == "decoder":
        module.fold_spectral_norm()
    with torch.no_grad():
        if name == "lmdm":
            return module.guided(*inputs(name), guidance_weight=2.0)
        return module(*inputs(name))


@pytest.mark.parametrize("name", sorted(MODULES))
def test_outputs_match_upstream(name):
    ref = REFERENCE[name]
    got = summary(run_pack(name))
    assert got["numel"] == ref["numel"]
    tol = 1e-4 * max(1.0, ref["abs_sum"])
    assert abs(got["sum"] - ref["sum"]) <= tol and abs(got["abs_sum"] - ref["abs_sum"]) <= tol
    torch.testing.assert_close(torch.tensor(got["samples"]), torch.tensor(ref["samples"]), rtol=1e-4, atol=1e-5)
