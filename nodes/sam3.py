"""SAM3 nodes: load a local SAM3 video model, mask a clip from text prompts, and read core's SAM3 track data.

The work is in engines/sam3/: `hf_video.py` (loading, the transformers-driven segmenter), `video_mask.py` (the
loop: detection every Nth frame and on the last, propagation between), `core_track.py` (core's track data). The
model sits behind a ComfyUI ModelPatcher, so core's model management makes room for it on the compute device, and
it is unloaded again after the run unless `keep_loaded` is set: the mask pass is usually followed by a diffusion
model that needs the memory.
"""
from __future__ import annotations

import transformers
from comfy_api.latest import io

from ..engines.common.errors import InputError
from ..engines.sam3 import core_track
from ..engines.sam3.hf_video import (Sam3VideoBundle, TransformersSegmenter, check_transformers_version,
                                     load_sam3_video)
from ..engines.sam3.segmenter import MaskSettings
from ..engines.sam3.video_mask import MAX_PROMPTS, OUTPUT_MODES, check_frames, parse_prompts, segment_video
from . import core_features, types
from .comfy_bridge import ManagedModel, category, model_dir, model_names, progress
from .inputs import PRECISIONS, resolve_dtype, validate
from .model_check import loader_check

try:  # the family guard in __init__.py checks this first; kept for imports that bypass it
    check_transformers_version(transformers.__version__)
except RuntimeError as exc:
    raise ImportError(str(exc)) from None

FAMILY = "sam3"
CATEGORY = category("sam3")


class Sam3Handle(ManagedModel):
    """What flows on a BROADCAST_SAM3_MODEL link: the loaded bundle behind ComfyUI's model management."""

    def __init__(self, bundle: Sam3VideoBundle, name: str):
        super().__init__(bundle.model, name, wrap=True, engine=bundle)
        self.bundle = bundle


def _mask_outputs() -> list:
    outputs = [io.Mask.Output("union", display_name="union",
                              tooltip="Every kept object of every prompt, [frames, height, width], 0 or 1.")]
    for k in range(1, MAX_PROMPTS + 1):
        outputs.append(io.Mask.Output(f"mask_{k}", display_name=f"mask_{k}",
                                      tooltip=f"Prompt line {k} (or object {k} in 'per object' mode); all zero when "
                                              "unused."))
    return outputs


class BroadcastSam3Loader(io.ComfyNode):
    """Load a SAM3 video model (transformers format) from a folder in models/sam3."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastSam3Loader",
            **core_features.searchable("BroadcastSam3Loader", "Broadcast Sam3 Loader"),
            category=CATEGORY,
            description="Load SAM3 (text-prompted video segmentation) from models/sam3/<folder> in the Hugging Face "
                        "transformers layout; never downloads.",
            inputs=[
                io.Combo.Input("model_name", options=model_names(FAMILY),
                               tooltip="A folder inside models/sam3 holding config.json, model.safetensors, "
                                       "processor_config.json and tokenizer.json (facebook/sam3, transformers files)."),
                io.Combo.Input("dtype", options=list(PRECISIONS), default="auto",
                               tooltip="Weights and compute precision. auto: bf16 on a GPU that runs it well, else "
                                       "fp16 there, fp32 on the CPU."),
            ],
            outputs=[types.Sam3Model.Output("sam3_model", display_name="sam3_model",
                                            tooltip="The loaded model; connect to Broadcast Sam3 Video Mask.")],
        )

    @classmethod
    def validate_inputs(cls, model_name=None):
        # Only model_name: ComfyUI repeats a refusal under every input named here (it showed under dtype too);
        # core checks dtype's combo.
        return loader_check(FAMILY, "model_name", model_name)

    @classmethod
    def execute(cls, model_name, dtype) -> io.NodeOutput:
        import comfy.model_management as mm

        folder = model_dir(FAMILY, model_name)
        bundle = load_sam3_video(folder, dtype=resolve_dtype(dtype, mm.get_torch_device(), "dtype"),
                                 device=mm.unet_offload_device())
        return io.NodeOutput(Sam3Handle(bundle, model_name))


class BroadcastSam3VideoMask(io.ComfyNode):
    """Mask a clip from up to four text prompts: a union mask plus one mask per prompt line."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastSam3VideoMask",
            **core_features.searchable("BroadcastSam3VideoMask", "Broadcast Sam3 Video Mask"),
            category=CATEGORY,
            description="Segment and track text-prompted objects through a clip with SAM3: full detection every Nth "
                        "frame and on the last, memory propagation between; union + one mask per prompt line.",
            inputs=[
                types.Sam3Model.Input("sam3_model", tooltip="From Broadcast Sam3 Loader."),
                io.Image.Input("images", tooltip="The clip, [frames, height, width, 3], one size for all frames."),
                io.String.Input("prompts", default="person", multiline=True,
                                tooltip="One text prompt per line, up to 4 (line k -> mask_k), e.g. 'burgundy dress, "
                                        "corset, straps' then 'hands'. Blank lines give all-zero masks."),
                io.Float.Input("detection_threshold", default=0.25, min=0.0, max=1.0, step=0.01,
                               tooltip="Minimum detection probability for an object to be found and tracked "
                                       "(0-1). 0.25 finds thin garment parts (straps, a corset's edge) that SAM3 "
                                       "scores low; raise it (transformers' own 0.5) if stray objects appear."),
                io.Int.Input("detect_interval", default=4, min=1, max=1000, step=1,
                             tooltip="Full detection every N frames (and always on the last); frames between are "
                                     "propagated from SAM3's memory. 1 = detect on every frame (slowest)."),
                io.Int.Input("max_objects", default=4, min=0, max=256, step=1,
                             tooltip="Tracks kept at most, over all prompts, in order of appearance; 0 = no limit. "
                                     "Each track costs one tracker pass per frame: 4 holds a garment, two hands and "
                                     "one spare; raise it for more people or objects."),
                io.Float.Input("mask_threshold", default=0.5, min=0.0, max=1.0, step=0.01,
                               tooltip="Probability above which a pixel is inside an object's mask (0-1). Lower "
                                       "grows the masks slightly, higher shrinks them."),
                io.Combo.Input("output_mode", options=list(OUTPUT_MODES), default="per prompt",
                               tooltip="per prompt: mask_k = all objects of prompt line k. per object: mask_k = the "
                                       "k-th object tracked (e.g. each hand separately)."),
                io.Boolean.Input("keep_loaded", default=False,
                                 tooltip="Keep the model on the GPU after the run (faster repeats). Off: it is "
                                         "offloaded and the memory freed for the next model."),
            ],
            outputs=_mask_outputs(),
        )

    @classmethod
    def validate_inputs(cls, output_mode=None):
        return validate(("output_mode", output_mode, OUTPUT_MODES))

    @classmethod
    def execute(cls, sam3_model, images, prompts, detection_threshold, detect_interval, max_objects,
                mask_threshold, output_mode, keep_loaded) -> io.NodeOutput:
        if not isinstance(sam3_model, Sam3Handle):
            raise InputError("sam3_model", "a model from Broadcast Sam3 Loader", type(sam3_model).__name__)
        lines = parse_prompts(prompts)
        frames, _, _ = check_frames(images)
        settings = MaskSettings(detection_threshold=float(detection_threshold), detect_interval=int(detect_interval),
                                max_objects=int(max_objects), mask_threshold=float(mask_threshold),
                                output_mode=output_mode)
        bar = progress(frames)
        _, device = sam3_model.ready()
        try:
            segmenter = TransformersSegmenter(sam3_model.bundle, device=device, dtype=sam3_model.bundle.model.dtype)
            result = segment_video(segmenter, images, lines, settings, bar)
        finally:
            if not keep_loaded:
                sam3_model.release()
        return io.NodeOutput(result.union, *result.masks)


class BroadcastSam3TrackToMasks(io.ComfyNode):
    """Turn core's SAM3 track data into the same union + four masks as Broadcast Sam3 Video Mask."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastSam3TrackToMasks",
            **core_features.searchable("BroadcastSam3TrackToMasks", "Broadcast Sam3 Track To Masks"),
            category=CATEGORY,
            description="Adapter for ComfyUI core's SAM3 Video Track: its track data -> union + mask_1..mask_4 at the "
                        "frames' size, binary, so core's SAM3 model can feed the pack's mask cache and compositors.",
            inputs=[
                types.CoreSam3TrackData.Input("track_data", tooltip="From core's SAM3 Video Track node."),
                io.String.Input("object_groups", default="", multiline=True,
                                tooltip="One line per output (mask_1..mask_4): comma-separated object indices "
                                        "from 0, e.g. '0' then '1, 2'. Empty: mask_k = object k-1. Indices SAM3 did "
                                        "not track in this run select nothing."),
                io.Float.Input("threshold", default=0.5, min=0.0, max=1.0, step=0.01,
                               tooltip="Resized masks above this value are inside (0-1); 0.5 keeps the model's "
                                       "edge."),
            ],
            outputs=_mask_outputs(),
        )

    @classmethod
    def validate_inputs(cls, object_groups=None):
        return validate(lambda: not isinstance(object_groups, str) or core_track.parse_groups(object_groups))

    @classmethod
    def execute(cls, track_data, object_groups, threshold) -> io.NodeOutput:
        groups = core_track.parse_groups(object_groups)
        _, frames, _, _ = core_track.check_track_data(track_data)
        union, masks = core_track.track_data_to_masks(track_data, groups, float(threshold), progress(frames))
        return io.NodeOutput(union, *masks)


NODES = [BroadcastSam3Loader, BroadcastSam3VideoMask, BroadcastSam3TrackToMasks]
