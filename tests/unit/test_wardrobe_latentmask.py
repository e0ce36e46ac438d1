"""The token-grid mask inside a LATENT: plain video latents and core's nested audio-video latents (MiniMax H3)."""
import importlib.util
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from engines.common.errors import InputError
from engines.wardrobe import latentmask as LM
from engines.wardrobe import tokengrid as TG


def _core_nested_tensor():
    """Core's own NestedTensor class (comfy/nested_tensor.py imports only torch)."""
    root = os.environ.get("COMFYUI_PATH")
    path = Path(root or "") / "comfy" / "nested_tensor.py"
    if not root or not path.is_file():
        pytest.skip("COMFYUI_PATH is not set (source scripts/env.sh)")
    spec = importlib.util.spec_from_file_location("core_nested_tensor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.NestedTensor


def _masks(frames, h, w):
    m = torch.zeros(frames, h, w)
    m[frames // 2, h // 3:h // 2, w // 4:w // 2] = 1
    return m


def test_plain_wan_latent():
    latent = {"samples": torch.zeros(1, 16, 3, 12, 8), "batch_index": [0]}
    masks = _masks(9, 96, 64)
    out, grid_mask = LM.apply(latent, masks, TG.PRESETS["wan2.1"])
    assert "noise_mask" not in latent and out["batch_index"] == [0]
    assert out["noise_mask"].shape == (1, 1, 3, 12, 8)
    assert torch.equal(out["noise_mask"][0, 0], TG.snap_to_grid(masks, TG.PRESETS["wan2.1"], 3, 12, 8))
    # Core's sampler resizes the noise mask trilinearly to the latent's shape: the identity at that exact shape.
    resized = F.interpolate(out["noise_mask"], size=(3, 12, 8), mode="trilinear")
    assert torch.equal(resized, out["noise_mask"])
    spec, gm = LM.grid_of(out)
    assert spec == TG.PRESETS["wan2.1"] and torch.equal(gm, grid_mask)


def test_nested_h3_latent_keeps_the_soundtrack():
    NestedTensor = _core_nested_tensor()
    video = torch.zeros(1, 24, 7, 4, 6)
    audio = torch.randn(1, 32, 2, 37)
    latent = {"samples": NestedTensor((video, audio))}
    encoded = {"samples": torch.randn(1, 24, 7, 4, 6)}  # VAE Encode of the crops (video only)
    masks = _masks(22, 64, 96)
    out, grid_mask = LM.apply(latent, masks, TG.PRESETS["minimax-h3"], source_latent=encoded)
    v, a = out["samples"].unbind()
    assert isinstance(out["samples"], NestedTensor)
    assert torch.equal(v, encoded["samples"]) and a is audio  # the soundtrack latent is passed through untouched
    vm, am = out["noise_mask"].unbind()
    assert vm.shape == (1, 1, 7, 4, 6) and am.shape == (1, 1, 2, 37) and float(am.abs().sum()) == 0.0
    assert float(vm.sum()) > 0 and torch.equal(vm[0, 0], grid_mask)
    out2, _ = LM.apply(latent, masks, TG.PRESETS["minimax-h3"], regenerate_audio=True)
    assert float(out2["noise_mask"].unbind()[1].min()) == 1.0


def test_bad_latents():
    with pytest.raises(InputError, match="latent: expected a video latent"):
        LM.apply({"samples": torch.zeros(1, 4, 8, 8)}, torch.zeros(1, 64, 64), TG.PRESETS["wan2.1"])
    with pytest.raises(InputError, match="source_latent: expected a video latent of shape"):
        LM.apply({"samples": torch.zeros(1, 16, 3, 12, 8)}, _masks(9, 96, 64), TG.PRESETS["wan2.1"],
                 source_latent={"samples": torch.zeros(1, 16, 3, 12, 9)})
    with pytest.raises(InputError, match="mask: expected masks of 64x96"):
        LM.apply({"samples": torch.zeros(1, 16, 3, 12, 8)}, _masks(9, 90, 64), TG.PRESETS["wan2.1"])
    with pytest.raises(InputError, match="latent: expected the latent output of Broadcast Latent Inpaint Mask"):
        LM.grid_of({"samples": torch.zeros(1, 16, 3, 12, 8)})
