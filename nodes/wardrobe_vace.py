"""Wan 2.1 VACE wardrobe: writes the pack's sampler-side mask where VACE reads it (engines/wardrobe/vace.py).

Core's WanVaceToVideo stays in the graph and encodes the control video with the pixel mask it is given; this node
follows it and replaces the `vace_mask` it appended to the conditioning with the per-latent-frame union of the mask,
snapped to 16 x 16 tokens (and, when asked, sets the LATENT noise mask with the same mapping). The token-grid mask
therefore exists only inside CONDITIONING and LATENT: no MASK output a compositor could take.
"""
from __future__ import annotations

from comfy_api.latest import io

from ..engines.common.errors import InputError
from ..engines.wardrobe import vace
from ..engines.wardrobe.checks import as_masks
from .comfy_bridge import category, progress
from . import core_features

CATEGORY = category("wardrobe")


def _last_vace_mask(conditioning, input_name: str):
    """Shape of the `vace_mask` WanVaceToVideo appended last, checked to be the same in every entry."""
    shapes = set()
    for entry in conditioning or []:
        masks = entry[1].get("vace_mask") if len(entry) > 1 and isinstance(entry[1], dict) else None
        if not masks:
            raise InputError(input_name, "conditioning that went through WanVaceToVideo (it carries a vace_mask)",
                             "conditioning without one", "Connect WanVaceToVideo's positive/negative outputs here.")
        shapes.add(tuple(masks[-1].shape))
    if len(shapes) != 1:
        raise InputError(input_name, "conditioning from one WanVaceToVideo node",
                         "no entries" if not shapes else f"vace masks of shapes {sorted(shapes)}")
    return shapes.pop()


def _with_vace_mask(conditioning, mask):
    """A copy of `conditioning` whose last `vace_mask` is `mask` (inputs are never modified)."""
    out = []
    for entry in conditioning:
        values = dict(entry[1])
        old = values["vace_mask"]
        values["vace_mask"] = list(old[:-1]) + [mask.to(dtype=old[-1].dtype, device=old[-1].device)]
        out.append([entry[0], values] + list(entry[2:]))
    return out


class BroadcastVaceSamplerMask(io.ComfyNode):
    """Replaces WanVaceToVideo's one-frame-per-latent mask with the token-snapped union of each VAE frame group."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastVaceSamplerMask",
            **core_features.searchable("BroadcastVaceSamplerMask", "Broadcast Vace Sampler Mask"),
            category=CATEGORY,
            description="Sampler-side mask for Wan 2.1 VACE: per latent frame, the union of its pixel frames "
                        "snapped to 16x16 tokens, written into the conditioning (never a MASK output).",
            inputs=[
                io.Conditioning.Input("positive", tooltip="WanVaceToVideo's positive output."),
                io.Conditioning.Input("negative", tooltip="WanVaceToVideo's negative output."),
                io.Latent.Input("latent", tooltip="WanVaceToVideo's latent output."),
                io.Int.Input("trim_latent", default=0, min=0, max=64,
                             tooltip="WanVaceToVideo's trim_latent output: latent slots its reference image put in "
                                     "front (0 without a reference). Their mask is left as core writes it."),
                io.Mask.Input("sampler_mask",
                              tooltip="Sampler-side pixel mask sequence, the one given to WanVaceToVideo's "
                                      "control_masks (e.g. the shielded garment mask), at its width x height "
                                      "(multiples of 16). Any pixel > 0 marks its 16x16 token for regeneration."),
                io.Boolean.Input("set_noise_mask", default=False,
                                 tooltip="Also set the LATENT noise mask with the same token mapping (latent cells "
                                         "outside it are kept). Off: VACE alone decides from vace_mask, as core "
                                         "does; the reference slot is always left free."),
            ],
            outputs=[
                io.Conditioning.Output("positive_out", display_name="positive"),
                io.Conditioning.Output("negative_out", display_name="negative"),
                io.Latent.Output("latent_out", display_name="latent"),
            ],
        )

    @classmethod
    def execute(cls, positive, negative, latent, trim_latent, sampler_mask, set_noise_mask=False) -> io.NodeOutput:
        shape = _last_vace_mask(positive, "positive")
        if _last_vace_mask(negative, "negative") != shape:
            raise InputError("negative", f"conditioning from the same WanVaceToVideo node as positive (vace mask "
                             f"{list(shape)})", f"vace mask {list(_last_vace_mask(negative, 'negative'))}")
        samples = latent.get("samples") if isinstance(latent, dict) else None
        mask, noise = vace.sampler_masks(shape, samples, int(trim_latent), as_masks(sampler_mask, "sampler_mask"),
                                         bool(set_noise_mask), progress(1))
        latent_out = dict(latent)
        if noise is not None:
            latent_out["noise_mask"] = noise
        return io.NodeOutput(_with_vace_mask(positive, mask), _with_vace_mask(negative, mask), latent_out)


NODES = [BroadcastVaceSamplerMask]
