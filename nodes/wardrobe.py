"""Wardrobe swap nodes: the decoupled mask chain around a video diffusion inpainter (engines/wardrobe/).

Sampler side: Mask Shield -> Latent Inpaint Mask (the token grid lives only inside the LATENT and a preview image).
Compositor side: Pixel Mask Refine -> Subject Crop (record with the pixel mask) -> Subject Uncrop -> Re-paste Layer.
"""
from __future__ import annotations

from comfy_api.latest import io, ui

from ..engines.common.errors import InputError
from ..engines.common.prompt_graph import upstream_signature
from ..engines.wardrobe import condcache, latentmask, maskcache, morphology, overlay, repaste, tokengrid
from ..engines.wardrobe import crop as crop_engine
from ..engines.wardrobe.checks import as_images, as_masks, check_same_masks
from .comfy_bridge import cache, category, progress
from .inputs import validate
from .types import CropRecord
from . import core_features, sources

CATEGORY = category("wardrobe")
GRID_CHOICES = ["auto (from vae)"] + list(tokengrid.PRESETS)


# validate_inputs names only the combo it checks: in ComfyUI 0.3.75 an input named there (or **kwargs) loses its
# min/max check, so numbers keep core's range checks.


class BroadcastMaskShield(io.ComfyNode):
    """Sampler-side shield: dilate, shrink, threshold (swallows strap remnants; closes finger gaps)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastMaskShield", category=CATEGORY,
            **core_features.searchable("BroadcastMaskShield", "Broadcast Mask Shield"),
            description="Sampler-side mask: dilate by r, shrink by s, threshold. Never feed it to a compositor.",
            inputs=[
                io.Mask.Input("mask", tooltip="Garment mask sequence (after the crop), 0..1."),
                io.Int.Input("dilate", default=8, min=0, max=256, step=1,
                             tooltip="Outward growth in pixels (square). 0 = none. Posts: 8."),
                io.Int.Input("shrink", default=2, min=0, max=256, step=1,
                             tooltip="Shrink after the growth, in pixels. 0 = none. Posts: 2."),
                io.Float.Input("threshold", default=0.45, min=0.0, max=1.0, step=0.01,
                               tooltip="Mask values at or above this count as garment. Posts: 0.45."),
            ],
            outputs=[io.Mask.Output("shielded_mask", display_name="sampler_mask")],
        )

    @classmethod
    def execute(cls, mask, dilate, shrink, threshold) -> io.NodeOutput:
        m = as_masks(mask, "mask")
        return io.NodeOutput(morphology.shield(m, dilate, shrink, threshold, progress=progress(m.shape[0])))


class BroadcastPixelMaskRefine(io.ComfyNode):
    """Compositor-side lean refine: signed expand, inward feather, optional hole fill (off keeps finger gaps)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastPixelMaskRefine", category=CATEGORY,
            **core_features.searchable("BroadcastPixelMaskRefine", "Broadcast Pixel Mask Refine"),
            description="Pixel-accurate compositor mask: signed expand, inward feather, fill holes (off by default).",
            inputs=[
                io.Mask.Input("mask", tooltip="Pixel-accurate garment mask sequence."),
                io.Int.Input("expand", default=0, min=-256, max=256, step=1,
                             tooltip="Grow (>0) or shrink (<0) in pixels before feathering. 0 keeps the outline."),
                io.Float.Input("feather", default=4.0, min=0.0, max=64.0, step=0.5,
                               tooltip="Soft edge width in pixels, inside the mask only (never grows it). 0 = hard."),
                io.Boolean.Input("fill_holes", default=False,
                                 tooltip="Fill enclosed holes. Off keeps the negative space between fingers."),
                io.Boolean.Input("tapered_corners", default=True,
                                 tooltip="Round (on) or square (off) corners for expand."),
            ],
            outputs=[io.Mask.Output("refined_mask", display_name="pixel_mask")],
        )

    @classmethod
    def execute(cls, mask, expand, feather, fill_holes, tapered_corners) -> io.NodeOutput:
        m = as_masks(mask, "mask")
        out = morphology.refine(m, expand, feather, fill_holes, tapered_corners, progress=progress(m.shape[0]))
        return io.NodeOutput(out)


class BroadcastMaskGrow(io.ComfyNode):
    """Grow or shrink a mask with round or square corners, at a cost independent of the radius."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastMaskGrow", category=CATEGORY,
            **core_features.searchable("BroadcastMaskGrow", "Broadcast Mask Grow"),
            description="Grow (or shrink) a mask sequence, tapered (round) or square corners.",
            inputs=[
                io.Mask.Input("mask", tooltip="Mask sequence, e.g. the hands."),
                io.Int.Input("expand", default=6, min=-256, max=256, step=1,
                             tooltip="Pixels to grow (>0) or shrink (<0). Posts: hands grown by 6."),
                io.Boolean.Input("tapered_corners", default=True, tooltip="Round corners (on) or square (off)."),
            ],
            outputs=[io.Mask.Output("grown_mask", display_name="mask")],
        )

    @classmethod
    def execute(cls, mask, expand, tapered_corners) -> io.NodeOutput:
        m = as_masks(mask, "mask")
        return io.NodeOutput(morphology.grow(m, expand, tapered_corners, progress=progress(m.shape[0])))


class BroadcastMaskCombine(io.ComfyNode):
    """Subtract, union or intersect two mask sequences of the same size (b may be one frame)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastMaskCombine", category=CATEGORY,
            **core_features.searchable("BroadcastMaskCombine", "Broadcast Mask Combine"),
            description="Pixelwise a - b (clamped), union or intersection of two mask sequences.",
            inputs=[
                io.Mask.Input("mask_a", tooltip="First mask sequence (e.g. the garment)."),
                io.Mask.Input("mask_b", tooltip="Second mask sequence (e.g. the grown hands); one frame is broadcast."),
                io.Combo.Input("operation", options=["subtract", "union", "intersect"], default="subtract",
                               tooltip="subtract: a - b; union: max; intersect: min."),
            ],
            outputs=[io.Mask.Output("combined_mask", display_name="mask")],
        )

    @classmethod
    def validate_inputs(cls, operation=None):
        return validate(("operation", operation, ("subtract", "union", "intersect")))

    @classmethod
    def execute(cls, mask_a, mask_b, operation) -> io.NodeOutput:
        a = as_masks(mask_a, "mask_a")
        b = check_same_masks(a, as_masks(mask_b, "mask_b"), "mask_a", "mask_b")
        return io.NodeOutput(morphology.combine(a, b, operation))


class BroadcastSubjectCrop(io.ComfyNode):
    """Crops the clip to the garment's box; the record keeps the pixel-accurate mask for the uncrop."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastSubjectCrop", category=CATEGORY,
            **core_features.searchable("BroadcastSubjectCrop", "Broadcast Subject Crop"),
            description="Crop frames to the garment box (one size for the clip); outputs crops, crop mask, record.",
            inputs=[
                io.Image.Input("images", tooltip="Source frames."),
                io.Mask.Input("mask", tooltip="Pixel-accurate compositor mask (refined garment minus grown hands). "
                                              "It is stored in the record and is the only mask the uncrop uses."),
                io.Int.Input("padding", default=32, min=0, max=1024, step=1,
                             tooltip="Pixels added around the garment's largest box on each side."),
                io.Int.Input("multiple", default=32, min=1, max=256, step=1,
                             tooltip="Box size is rounded up to this (the token block: 16 for Wan 2.1, 32 for "
                                     "MiniMax H3 and LTXV)."),
                io.Combo.Input("mode", options=["fixed", "tracked"], default="fixed",
                               tooltip="fixed: one box (union over the clip, no camera motion); tracked: box "
                                       "follows the garment, centres smoothed over smooth_frames."),
                io.Int.Input("smooth_frames", default=9, min=1, max=255, step=2,
                             tooltip="Moving-average window of the tracked box centres, in frames (1 = none)."),
                io.Int.Input("upscale_to", default=0, min=0, max=8192, step=8,
                             tooltip="0 = source pixels; else resize the crops so their longer side is this many "
                                     "pixels (never down). The record keeps the source-resolution mask."),
                io.Int.Input("feather", default=16, min=0, max=256, step=1,
                             tooltip="Ramp in pixels along box sides inside the frame, used by the uncrop."),
            ],
            outputs=[
                io.Image.Output("cropped_images", display_name="cropped_images"),
                io.Mask.Output("cropped_mask", display_name="cropped_mask"),
                CropRecord.Output("crop_record", display_name="crop_record"),
                io.Int.Output("crop_width", display_name="width"),
                io.Int.Output("crop_height", display_name="height"),
                io.Int.Output("frame_count", display_name="frame_count"),
            ],
        )

    @classmethod
    def validate_inputs(cls, mode=None):
        return validate(("mode", mode, ("fixed", "tracked")))

    @classmethod
    def execute(cls, images, mask, padding, multiple, mode, smooth_frames, upscale_to, feather) -> io.NodeOutput:
        imgs = as_images(images, "images")
        m = as_masks(mask, "mask")
        crops, crop_masks, record = crop_engine.crop(imgs, m, padding, multiple, mode, smooth_frames, upscale_to,
                                                     feather, progress=progress(imgs.shape[0]))
        h, w = record.crop_size
        return io.NodeOutput(crops, crop_masks, record, w, h, record.frame_count)


class BroadcastLatentInpaintMask(io.ComfyNode):
    """LATENT + pixel mask -> the LATENT with its noise mask snapped to the model's token grid, plus a preview."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastLatentInpaintMask", category=CATEGORY,
            **core_features.searchable("BroadcastLatentInpaintMask", "Broadcast Latent Inpaint Mask"),
            description="Sets the LATENT's noise mask on the model's token grid (VAE stride x patch, VAE frame "
                        "groups). The grid never leaves the LATENT as a MASK.",
            inputs=[
                io.Latent.Input("latent", tooltip="The sampler's latent (video, or MiniMax H3 / LTX audio-video)."),
                io.Mask.Input("mask", tooltip="Sampler-side pixel mask of the cropped frames (e.g. Mask Shield's). "
                                              "Size must be the latent's times the VAE stride."),
                io.Combo.Input("grid", options=GRID_CHOICES, default="wan2.1",
                               tooltip="Token grid of the model. auto reads the VAE's strides (causal VAEs) and "
                                       "uses patch_size."),
                io.Vae.Input("vae", optional=True, tooltip="Needed only for grid = auto."),
                io.Int.Input("patch_size", default=2, min=1, max=8, step=1,
                             tooltip="Latent cells per token side, for grid = auto (Wan/Hunyuan/H3: 2, LTXV: 1)."),
                io.Float.Input("coverage", default=0.0, min=0.0, max=0.99, step=0.01,
                               tooltip="A token is regenerated when more than this fraction of its pixels is masked "
                                       "in any frame of its group. 0 = any pixel."),
                io.Combo.Input("audio", options=["keep", "regenerate"], default="keep",
                               tooltip="Audio part of an audio-video latent: keep (mask 0, the soundtrack latent "
                                       "is not resampled) or regenerate (mask 1)."),
                io.Latent.Input("source_latent", optional=True,
                                tooltip="VAE Encode of the cropped frames: replaces the latent's video part (or the "
                                        "whole latent if it is audio-video too) so unmasked tokens keep the source."),
                io.Image.Input("preview_images", optional=True,
                               tooltip="Cropped frames to draw the preview over (else black)."),
            ],
            outputs=[
                io.Latent.Output("masked_latent", display_name="latent"),
                io.Image.Output("grid_preview", display_name="grid_preview"),
            ],
        )

    @classmethod
    def validate_inputs(cls, grid=None, audio=None):
        return validate(("grid", grid, GRID_CHOICES), ("audio", audio, ("keep", "regenerate")))

    @classmethod
    def execute(cls, latent, mask, grid, patch_size, coverage, audio, vae=None, source_latent=None,
                preview_images=None) -> io.NodeOutput:
        if grid.startswith("auto"):
            if vae is None or not hasattr(vae, "downscale_ratio"):
                raise InputError("vae", "a VAE when grid is auto", "nothing", "Connect the VAE or pick a preset.")
            spec = tokengrid.grid_from_vae(vae.downscale_ratio, patch_size)
        else:
            spec = tokengrid.PRESETS[grid]
        m = as_masks(mask, "mask")
        imgs = None
        if preview_images is not None:
            imgs = as_images(preview_images, "preview_images")
            if tuple(imgs.shape[:3]) != tuple(m.shape):
                raise InputError("preview_images", f"the {m.shape[0]} cropped frames of {m.shape[2]}x{m.shape[1]}",
                                 f"{imgs.shape[0]} of {imgs.shape[2]}x{imgs.shape[1]}")
        out, grid_mask = latentmask.apply(latent, m, spec, coverage, audio == "regenerate", source_latent,
                                          progress=progress(m.shape[0]))
        return io.NodeOutput(out, tokengrid.preview(grid_mask, spec, m.shape[0], imgs))


class BroadcastSubjectUncrop(io.ComfyNode):
    """Inpainted crops -> full frames, blended with the record's pixel mask and feather only."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastSubjectUncrop", category=CATEGORY,
            **core_features.searchable("BroadcastSubjectUncrop", "Broadcast Subject Uncrop"),
            description="Puts inpainted crops back with the crop record's pixel mask; pixels outside it stay the "
                        "source, bit for bit.",
            inputs=[
                io.Image.Input("source_images", tooltip="The source frames the crop was made from."),
                io.Image.Input("cropped_images", tooltip="Inpainted crops (decoded), one per source frame."),
                CropRecord.Input("crop_record", tooltip="From Broadcast Subject Crop."),
                io.Combo.Input("blend", options=list(crop_engine.BLEND_MODES), default="feather", optional=True,
                               tooltip="feather: the mask's alpha blend. reinhard: first remove the inpainting's "
                                       "colour cast (Lab mean and spread fitted on a 16 px ring of context around "
                                       "the garment, where the crop should match the source; the new garment keeps "
                                       "its own colours). poisson: OpenCV seamless clone over the mask (no edge "
                                       "where the lighting differs; slower on large garments). Pixels outside the "
                                       "mask stay the source in every mode."),
            ],
            outputs=[io.Image.Output("uncropped_images", display_name="images")],
        )

    @classmethod
    def validate_inputs(cls, blend=None):
        return validate(("blend", blend, crop_engine.BLEND_MODES))

    @classmethod
    def execute(cls, source_images, cropped_images, crop_record, blend="feather") -> io.NodeOutput:
        src = as_images(source_images, "source_images")
        crops = as_images(cropped_images, "cropped_images")
        return io.NodeOutput(crop_engine.uncrop(src, crops, crop_record, progress=progress(src.shape[0]),
                                                blend=blend))


class BroadcastRepasteLayer(io.ComfyNode):
    """Source pixels (hands) back over the result through a mask feathered outward."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastRepasteLayer", category=CATEGORY,
            **core_features.searchable("BroadcastRepasteLayer", "Broadcast Repaste Layer"),
            description="Pastes the source's protected pixels (hands) over the result; protected pixels equal "
                        "the source exactly.",
            inputs=[
                io.Image.Input("images", tooltip="The composited result (Subject Uncrop's output)."),
                io.Image.Input("source_images", tooltip="The original frames."),
                io.Mask.Input("protected_mask", tooltip="Pixels to restore, e.g. the SAM3 hands mask."),
                io.Float.Input("feather", default=4.0, min=0.0, max=64.0, step=0.5,
                               tooltip="Soft ramp in pixels outside the protected mask. 0 = hard edge."),
                io.Int.Input("expand", default=0, min=0, max=64, step=1,
                             tooltip="Grow the protected mask first (round corners), in pixels."),
            ],
            outputs=[io.Image.Output("repasted_images", display_name="images")],
        )

    @classmethod
    def execute(cls, images, source_images, protected_mask, feather, expand) -> io.NodeOutput:
        res = as_images(images, "images")
        src = as_images(source_images, "source_images")
        m = as_masks(protected_mask, "protected_mask")
        return io.NodeOutput(repaste.repaste(res, src, m, feather, expand, progress=progress(res.shape[0])))


class BroadcastMaskSequenceCache(io.ComfyNode):
    """Lossless mask cache keyed by the frames' content, the prompt and the settings of the nodes that make the masks;
    a hit skips the segmenter."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastMaskSequenceCache", category=CATEGORY,
            **core_features.searchable("BroadcastMaskSequenceCache", "Broadcast Mask Sequence Cache"),
            description="Stores masks by a hash of the frames, the prompt and every setting of the nodes feeding "
                        "the mask inputs; on a hit those nodes (the segmenter) are never evaluated.",
            inputs=[
                io.Image.Input("images", tooltip="The source frames the masks belong to (hashed by content)."),
                io.String.Input("prompt", multiline=True, default="",
                                tooltip="The segmenter prompt(s); part of the key."),
                io.Mask.Input("masks", lazy=True, tooltip="Masks to store on a miss (e.g. SAM3 mask_1)."),
                io.Mask.Input("masks_2", lazy=True, optional=True,
                              tooltip="Optional second sequence stored in the same entry (e.g. SAM3 mask_2)."),
                io.Combo.Input("mode", options=["use cache", "refresh"], default="use cache",
                               tooltip="refresh: recompute and overwrite the entry. Changing the segmenter's "
                                       "settings (model, thresholds, interval) is a miss by itself: they are part "
                                       "of the key."),
            ],
            hidden=[io.Hidden.prompt, io.Hidden.unique_id],
            outputs=[
                io.Mask.Output("cached_masks", display_name="masks"),
                io.Mask.Output("cached_masks_2", display_name="masks_2"),
                io.String.Output("cache_key", display_name="cache_key"),
            ],
        )

    @classmethod
    def validate_inputs(cls, mode=None):
        return validate(("mode", mode, ("use cache", "refresh")))

    @classmethod
    def _key(cls, images, prompt):
        # The key follows what really makes the masks: the settings of every node upstream of the mask inputs,
        # read off the prompt being executed (never evaluated: on a hit they must not run).
        producer = upstream_signature(cls.hidden.prompt, cls.hidden.unique_id, ("masks", "masks_2"),
                                      identify=sources.picked_file)
        return maskcache.mask_key(as_images(images, "images"), prompt, producer)

    @classmethod
    def check_lazy_status(cls, images, prompt, mode, **lazy):
        if mode != "refresh" and maskcache.has_masks(cache(), cls._key(images, prompt)):
            return []
        # Only linked inputs appear here (as None until evaluated); asking for an unlinked one would fail.
        return [name for name in ("masks", "masks_2") if name in lazy and lazy[name] is None]

    @classmethod
    def execute(cls, images, prompt, mode, masks=None, masks_2=None) -> io.NodeOutput:
        imgs = as_images(images, "images")
        key = cls._key(imgs, prompt)
        given = (as_masks(masks, "masks") if masks is not None else None,
                 as_masks(masks_2, "masks_2") if masks_2 is not None else None)
        first, second = maskcache.masks_for(cache(), key, imgs.shape, given, refresh=mode == "refresh",
                                            meta={"prompt": prompt})
        return io.NodeOutput(first, second, key)


class BroadcastConditioningCache(io.ComfyNode):
    """Conditioning cache keyed by prompt, reference images, canvas and the settings of the nodes that make the
    conditioning; a hit skips the text encoder."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastConditioningCache", category=CATEGORY,
            **core_features.searchable("BroadcastConditioningCache", "Broadcast Conditioning Cache"),
            description="Stores a CONDITIONING by a hash of prompt + reference images + latent shape + every "
                        "setting of the nodes feeding the conditioning input (encoder file, type, VAE, reference "
                        "sizing); on a hit that input (and the text encoder feeding it) is never evaluated.",
            inputs=[
                io.String.Input("prompt", multiline=True, default="",
                                tooltip="The prompt the conditioning is encoded from (link the same text to the "
                                        "encoder); part of the key."),
                io.Conditioning.Input("conditioning", lazy=True,
                                      tooltip="The encoder's conditioning, evaluated only on a miss. The settings "
                                              "of every node feeding it are part of the key."),
                io.Image.Input("reference", optional=True,
                               tooltip="Reference picture(s) the encoder also sees (hashed by content)."),
                io.Latent.Input("latent", optional=True,
                                tooltip="The latent the conditioning is made for: its shape (canvas, length) is "
                                        "part of the key (MiniMax H3 sizes its references to the canvas)."),
                *[io.Int.Input(name, optional=True, force_input=True, min=0, max=1 << 20,
                               tooltip=f"The {what} the encoder is given, linked from the same output: the key "
                                       "then holds the value, not the graph that computed it, so a new clip with "
                                       "the same canvas is still a hit.")
                  for name, what in (("width", "canvas width"), ("height", "canvas height"),
                                     ("length", "frame count"))],
                io.Combo.Input("mode", options=["use cache", "refresh"], default="use cache",
                               tooltip="refresh: re-encode and overwrite the entry. Changing the encoder's "
                                       "settings (file, type, VAE, reference sizing) is a miss by itself: they "
                                       "are part of the key."),
            ],
            hidden=[io.Hidden.prompt, io.Hidden.unique_id],
            outputs=[
                io.Conditioning.Output("cached_conditioning", display_name="conditioning"),
                io.String.Output("conditioning_key", display_name="cache_key"),
            ],
        )

    @classmethod
    def validate_inputs(cls, mode=None):
        return validate(("mode", mode, ("use cache", "refresh")))

    @classmethod
    def _key(cls, prompt, reference, latent, **canvas):
        # What made the conditioning is read off the prompt being executed (never evaluated: on a hit it must not
        # run).
        ref = as_images(reference, "reference") if reference is not None else None
        return condcache.node_key(cls.hidden.prompt, cls.hidden.unique_id, prompt, ref, condcache.latent_shapes(latent),
                                  canvas, identify=sources.picked_file)

    @classmethod
    def check_lazy_status(cls, prompt, mode, conditioning=None, reference=None, latent=None, **canvas):
        if mode != "refresh" and condcache.has_conditioning(cache(), cls._key(prompt, reference, latent, **canvas)):
            return []
        return ["conditioning"] if conditioning is None else []

    @classmethod
    def execute(cls, prompt, mode, conditioning=None, reference=None, latent=None, **canvas) -> io.NodeOutput:
        key = cls._key(prompt, reference, latent, **canvas)
        loaded = condcache.conditioning_for(cache(), key, conditioning, refresh=mode == "refresh",
                                            meta={"prompt": prompt})
        return io.NodeOutput(loaded, key)


class BroadcastMaskCheckPreview(io.ComfyNode):
    """Overlay of the sampler's token-grid mask and the compositor's pixel mask, before spending GPU time."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastMaskCheckPreview", category=CATEGORY,
            **core_features.searchable("BroadcastMaskCheckPreview", "Broadcast Mask Check Preview"),
            description="Overlay video: token-grid mask (blue), pixel mask (green), protected pixels (red), plus a "
                        "report.",
            inputs=[
                io.Image.Input("images", tooltip="The source frames."),
                CropRecord.Input("crop_record", tooltip="From Broadcast Subject Crop (holds the pixel mask)."),
                io.Latent.Input("latent", tooltip="Broadcast Latent Inpaint Mask's latent (holds the token grid)."),
                io.Mask.Input("protected_mask", optional=True, tooltip="Hands (or other protected pixels)."),
                io.Float.Input("scale", default=0.5, min=0.1, max=1.0, step=0.05,
                               tooltip="Size of the overlay frames relative to the source."),
            ],
            outputs=[
                io.Image.Output("overlay_images", display_name="overlay"),
                io.String.Output("report_text", display_name="report"),
            ],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, images, crop_record, latent, scale, protected_mask=None) -> io.NodeOutput:
        if not isinstance(crop_record, crop_engine.CropRecord):
            raise InputError("crop_record", "a crop record from Broadcast Subject Crop", type(crop_record).__name__)
        spec, grid_mask = latentmask.grid_of(latent)
        imgs = as_images(images, "images")
        prot = as_masks(protected_mask, "protected_mask") if protected_mask is not None else None
        frames, stats = overlay.mask_check(imgs, crop_record, grid_mask, spec, prot,
                                           scale, progress=progress(imgs.shape[0]))
        text = overlay.describe(stats)
        return io.NodeOutput(frames, text, ui=ui.PreviewText(text))


NODES = [
    BroadcastMaskShield, BroadcastPixelMaskRefine, BroadcastMaskGrow, BroadcastMaskCombine, BroadcastSubjectCrop,
    BroadcastLatentInpaintMask, BroadcastSubjectUncrop, BroadcastRepasteLayer, BroadcastMaskSequenceCache,
    BroadcastConditioningCache, BroadcastMaskCheckPreview,
]
