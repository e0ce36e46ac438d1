"""The pack's Ditto modules reproduce upstream's checkpoint layout exactly, and load through the real loader."""
import json
from pathlib import Path

import pytest
import torch

from engines.ditto import loader, nets

KEYS = json.loads((Path(__file__).resolve().parents[1] / "data" / "ditto_full_size_keys.json").read_text())
FULL_SIZE = {
    "appearance_extractor": nets.AppearanceFeatureExtractor, "motion_extractor": nets.MotionExtractor,
    "warp_network": nets.WarpingNetwork, "decoder": nets.SPADEDecoder, "stitch_network": nets.StitchingNetwork,
    "lmdm": nets.MotionDecoder,
}


@pytest.mark.parametrize("name", sorted(FULL_SIZE))
def test_full_size_keys_and_shapes_match_upstream(name):
    with torch.device("meta"):
        module = FULL_SIZE[name]()
    mine = {k: list(v.shape) for k, v in module.state_dict().items()}
    assert mine == KEYS[name]


@pytest.mark.parametrize("name", sorted(FULL_SIZE))
def test_loader_infers_full_size_from_the_table(name):
    """The loader reads every size off the state dict: on the full-size table it rebuilds upstream's sizes."""
    state = {k: torch.empty(v, device="meta") for k, v in KEYS[name].items()}
    cfg = {"appearance_extractor": "appearance_extractor_cfg", "motion_extractor": "motion_extractor_cfg",
           "warp_network": "warp_network_cfg", "decoder": "decoder_cfg", "stitch_network": "stitch_network_cfg",
           "lmdm": "audio2motion_cfg"}[name]
    with torch.device("meta"):
        module = loader.BUILDERS[cfg](state)
    assert {k: list(v.shape) for k, v in module.state_dict().items()} == KEYS[name]


def test_spectral_norm_fold_matches_torch():
    torch.manual_seed(0)
    ref = torch.nn.utils.spectral_norm(torch.nn.Conv2d(6, 5, 3, padding=1)).eval()
    mine = nets.decoder.SpectralConv2d(6, 5, 3)
    mine.load_state_dict({k: v for k, v in ref.state_dict().items()}, strict=True)
    mine.fold()
    x = torch.randn(2, 6, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(mine(x), ref(x), rtol=1e-5, atol=1e-6)


def test_stitching_adds_offsets_and_shift():
    net = nets.StitchingNetwork(hidden_sizes=(4,))
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.mlp[-1].bias[:63] = 0.5
        net.mlp[-1].bias[63:] = torch.tensor([1.0, 2.0])
    xs, xd = torch.zeros(1, 21, 3), torch.ones(1, 21, 3)
    out = net(xs, xd)
    assert torch.allclose(out[..., 0], torch.full((1, 21), 2.5))
    assert torch.allclose(out[..., 1], torch.full((1, 21), 3.5))
    assert torch.allclose(out[..., 2], torch.full((1, 21), 1.5))


def test_rotary_rotates_pairs_by_position():
    rot = nets.lmdm.Rotary(4)
    x = torch.tensor([[[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]]])
    y = rot(x)
    assert torch.allclose(y[0, 0], x[0, 0])                      # position 0: no rotation
    f = rot.freqs
    assert torch.allclose(y[0, 1], torch.stack([f[0].cos(), f[0].sin(), f[1].cos(), f[1].sin()]), atol=1e-6)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1))
