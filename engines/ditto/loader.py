"""Loading a Ditto model folder in the upstream layout.

    <folder>/ditto_cfg/v0.4_hubert_cfg_pytorch.pkl        (any one *.pkl there)
    <folder>/ditto_pytorch/models/{appearance_extractor,motion_extractor,warp_network,decoder,stitch_network}.pth
    <folder>/ditto_pytorch/models/lmdm_v0.4_hubert.pth
    <folder>/ditto_pytorch/aux_models/{det_10g,2d106det,landmark203,hubert_streaming_fix_kv}.onnx

Weights are read with ``torch.load(weights_only=True)``. Every network's sizes are read off its state dict (the
released files give upstream's sizes; the tests' tiny files give tiny ones) and the state dict is then loaded with
``strict=True``, so a file for another architecture is refused with the names of the mismatched keys.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from ..common.errors import InputError, ModelFilesMissing
from ..common.model_files import load_state_dict
from . import nets
from .config import DittoConfig, load_config

CFG_DIR = "ditto_cfg"
MODELS_DIR = "ditto_pytorch/models"
AUX_DIR = "ditto_pytorch/aux_models"
# base_cfg entry -> default file name
WEIGHT_FILES = {
    "appearance_extractor_cfg": "appearance_extractor.pth",
    "motion_extractor_cfg": "motion_extractor.pth",
    "warp_network_cfg": "warp_network.pth",
    "decoder_cfg": "decoder.pth",
    "stitch_network_cfg": "stitch_network.pth",
    "audio2motion_cfg": "lmdm_v0.4_hubert.pth",
}
AUX_FILES = {
    "insightface_det_cfg": "det_10g.onnx",
    "landmark106_cfg": "2d106det.onnx",
    "landmark203_cfg": "landmark203.onnx",
    "hubert_cfg": "hubert_streaming_fix_kv.onnx",
}


def _count(sd: Mapping[str, torch.Tensor], pattern: str) -> int:
    rx = re.compile(pattern)
    return len({m.group(1) for k in sd for m in [rx.match(k)] if m})


def build_appearance(sd) -> nn.Module:
    be = sd["first.conv.weight"].shape[0]
    maxf = sd["second.weight"].shape[0]
    rc = sd["resblocks_3d.3dr0.conv1.weight"].shape[0]
    return nets.AppearanceFeatureExtractor(
        image_channel=sd["first.conv.weight"].shape[1], block_expansion=be,
        num_down_blocks=_count(sd, r"down_blocks\.(\d+)\."), max_features=maxf, reshape_channel=rc,
        reshape_depth=maxf // rc, num_resblocks=_count(sd, r"resblocks_3d\.3dr(\d+)\."))


def build_motion_extractor(sd) -> nn.Module:
    n_stages = _count(sd, r"detector\.stages\.(\d+)\.")
    dims = [sd[f"detector.stages.{i}.0.dwconv.weight"].shape[0] for i in range(n_stages)]
    depths = [_count(sd, rf"detector\.stages\.{i}\.(\d+)\.") for i in range(n_stages)]
    return nets.MotionExtractor(num_kp=sd["detector.fc_kp.weight"].shape[0] // 3,
                                num_bins=sd["detector.fc_pitch.weight"].shape[0], depths=depths, dims=dims)


def build_warp(sd) -> nn.Module:
    p = "dense_motion_network."
    num_kp = sd[p + "mask.weight"].shape[0] - 1
    compress, channels = sd[p + "compress.weight"].shape[:2]
    n_blocks = _count(sd, p.replace(".", r"\.") + r"hourglass\.encoder\.down_blocks\.(\d+)\.")
    out_filters = sd[p + "hourglass.decoder.conv.weight"].shape[0]
    out = sd["third.conv.weight"].shape[0]
    return nets.WarpingNetwork(
        num_kp=num_kp, block_expansion=out // 4, max_features=sd["third.conv.weight"].shape[1], num_down_blocks=2,
        reshape_channel=channels, dense_block_expansion=out_filters - (num_kp + 1) * (compress + 1),
        dense_max_features=sd[p + f"hourglass.encoder.down_blocks.{n_blocks - 1}.conv.weight"].shape[0],
        dense_num_blocks=n_blocks, dense_reshape_depth=sd[p + "occlusion.weight"].shape[1] // out_filters,
        dense_compress=compress)


def build_decoder(sd) -> nn.Module:
    cin = sd["fc.weight"].shape[1]
    return nets.SPADEDecoder(upscale=2 if "conv_img.0.weight" in sd else 1, max_features=cin,
                             block_expansion=cin // 4, out_channels=sd["up_1.conv_1.weight_orig"].shape[0],
                             spade_hidden=sd["G_middle_0.norm_0.mlp_shared.0.weight"].shape[0])


def build_stitch(sd) -> nn.Module:
    n = _count(sd, r"mlp\.(\d+)\.weight")
    ws = [sd[f"mlp.{2 * i}.weight"] for i in range(n)]
    return nets.StitchingNetwork(input_size=ws[0].shape[1], hidden_sizes=[w.shape[0] for w in ws[:-1]],
                                 output_size=ws[-1].shape[0])


def build_lmdm(sd, num_heads: int = 8) -> nn.Module:
    return nets.MotionDecoder(
        nfeats=sd["final_layer.weight"].shape[0], seq_len=sd["null_cond_embed"].shape[1],
        latent_dim=sd["input_projection.weight"].shape[0],
        ff_size=sd["seqTransDecoder.stack.0.linear1.weight"].shape[0],
        num_layers=_count(sd, r"seqTransDecoder\.stack\.(\d+)\."), num_heads=num_heads,
        cond_feature_dim=sd["cond_projection.weight"].shape[1])


def _unwrap(name: str, raw: Mapping[str, Any]) -> dict:
    """Upstream's containers: stitch keeps ``retarget_shoulder`` (DDP ``module.`` prefixes), LMDM
    ``model_state_dict``."""
    if name == "stitch_network_cfg" and "retarget_shoulder" in raw:
        raw = {k.replace("module.", ""): v for k, v in raw["retarget_shoulder"].items()}
    if name == "audio2motion_cfg" and "model_state_dict" in raw:
        raw = raw["model_state_dict"]
    return dict(raw)


BUILDERS = {
    "appearance_extractor_cfg": build_appearance, "motion_extractor_cfg": build_motion_extractor,
    "warp_network_cfg": build_warp, "decoder_cfg": build_decoder, "stitch_network_cfg": build_stitch,
    "audio2motion_cfg": build_lmdm,
}


def build_network(name: str, state: Mapping[str, torch.Tensor], path: Path, input_name: str) -> nn.Module:
    try:
        module = BUILDERS[name](state)
    except (KeyError, IndexError, ValueError, ZeroDivisionError) as exc:
        raise InputError(input_name, f"'{path.name}' to hold the {name.replace('_cfg', '')} weights of Ditto",
                         f"a state dict without the expected layout ({type(exc).__name__}: {exc})",
                         "Use the .pth files of the Ditto PyTorch release, unchanged.") from None
    result = module.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise InputError(input_name, f"'{path.name}' to match the {name.replace('_cfg', '')} network exactly",
                         f"missing keys {result.missing_keys[:5]}, unexpected keys {result.unexpected_keys[:5]}")
    if isinstance(module, nets.SPADEDecoder):
        module.fold_spectral_norm()
    return module.eval().requires_grad_(False)


@dataclass
class DittoFiles:
    folder: Path
    config: DittoConfig
    weights: dict      # base_cfg entry -> Path
    aux: dict          # base_cfg entry -> Path


def resolve_files(folder: Path, input_name: str = "model_name") -> DittoFiles:
    """Find the config and every file it needs; a missing one is named with its folder before anything loads."""
    folder = Path(folder)
    cfg_dir = folder / CFG_DIR
    cfgs = sorted(cfg_dir.glob("*pytorch*.pkl")) or sorted(cfg_dir.glob("*.pkl"))
    if not cfgs:
        raise ModelFilesMissing(input_name, str(cfg_dir), ["v0.4_hubert_cfg_pytorch.pkl"])
    config = load_config(cfgs[0], input_name)
    weights = {k: folder / MODELS_DIR / config.model_paths.get(k, v) for k, v in WEIGHT_FILES.items()}
    # the config may name a .trt/.onnx variant; the PyTorch files keep upstream's default names then
    weights = {k: p if p.suffix == ".pth" else folder / MODELS_DIR / WEIGHT_FILES[k] for k, p in weights.items()}
    aux = {k: folder / AUX_DIR / config.model_paths.get(k, v) for k, v in AUX_FILES.items()}
    aux = {k: p if p.suffix == ".onnx" else folder / AUX_DIR / AUX_FILES[k] for k, p in aux.items()}
    missing = [str(p.relative_to(folder)) for p in list(weights.values()) + list(aux.values()) if not p.is_file()]
    if missing:
        raise ModelFilesMissing(input_name, str(folder), missing)
    return DittoFiles(folder, config, weights, aux)


class DittoNetworks(nn.Module):
    """The five renderer networks and the motion denoiser in one module (one unit for device management)."""

    def __init__(self, modules: Mapping[str, nn.Module]):
        super().__init__()
        self.appearance = modules["appearance_extractor_cfg"]
        self.motion_extractor = modules["motion_extractor_cfg"]
        self.warp = modules["warp_network_cfg"]
        self.decoder = modules["decoder_cfg"]
        self.stitch = modules["stitch_network_cfg"]
        self.lmdm = modules["audio2motion_cfg"]


def load_networks(files: DittoFiles, input_name: str = "model_name") -> DittoNetworks:
    modules = {}
    for name, path in files.weights.items():
        state = load_state_dict(path)
        modules[name] = build_network(name, _unwrap(name, state), path, input_name)
    lmdm = modules["audio2motion_cfg"]
    a2m = files.config.audio2motion
    if lmdm.seq_len != a2m["seq_frames"] or lmdm.cond_projection.in_features != a2m["audio_feat_dim"]:
        raise InputError(input_name, f"the motion model to match the config (window {a2m['seq_frames']}, condition "
                         f"{a2m['audio_feat_dim']})", f"window {lmdm.seq_len}, condition "
                         f"{lmdm.cond_projection.in_features} in '{files.weights['audio2motion_cfg'].name}'")
    return DittoNetworks(modules)
