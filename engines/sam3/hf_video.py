"""SAM3 through transformers (>= 5): loading a local folder and driving the video model frame by frame.

Folder layout (the transformers format of the ``facebook/sam3`` repository, not its ``sam3.pt``)::

    models/sam3/<name>/config.json            model_type "sam3_video"
                       model.safetensors      (or model.safetensors.index.json + shards)
                       processor_config.json  Sam3VideoProcessor
                       tokenizer.json         CLIP BPE tokenizer (or vocab.json + merges.txt)

Loading is strictly local (``local_files_only=True``, safetensors only). The model is driven in transformers'
streaming mode: each frame is preprocessed on its own by the processor and added to the session, and dropped from
the session as soon as it has been processed, so the resized clip is never held whole.

A detection frame runs the model's own full step (backbone, detector for every prompt, matching, new tracks,
memory). A propagation frame runs only the backbone, the tracker's memory-conditioned decoder and the memory
encoder — the same calls the full step makes, minus detection and matching. Those calls are transformers
internals (`run_tracker_propagation`, `_tracker_update_memories`); `check_model_api` says so by name if a future
transformers renames them.
"""
from __future__ import annotations

import gc
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import torch

from ..common.errors import InputError, ModelFilesMissing
from ..common.model_files import require_files
from .segmenter import MaskSettings, TrackedMask

REQUIRED_FILES = (
    "config.json",
    ("model.safetensors", "model.safetensors.index.json"),
    "processor_config.json",
    ("tokenizer.json", "vocab.json"),
)
MODEL_TYPE = "sam3_video"
# Settings the node overrides for one run and restores afterwards (the loaded model is shared between runs).
_RUN_ATTRS = ("score_threshold_detection", "new_det_thresh", "max_num_objects")
_FORGOTTEN = torch.empty(0)
_INTERNALS = ("run_tracker_propagation", "_tracker_update_memories", "get_vision_features_for_tracker")
# The transformers releases these internals were tested on (scripts/check_transformers_range.sh runs the SAM3 tests
# at the lower end; the suite runs at the upper). 5.0-5.4 are untested (the tiny test model needs
# Sam3ImageProcessor, which arrived in 5.5); 6 may rename the internals. Outside the range SAM3 refuses to load
# rather than mask wrongly.
SUPPORTED_TRANSFORMERS = (5, 5), (6, 0)


@dataclass
class Sam3VideoBundle:
    """A loaded SAM3 video model with its processor; what the BROADCAST_SAM3_MODEL type carries."""

    model: torch.nn.Module
    processor: object
    folder: Path
    dtype: Optional[torch.dtype] = None  # None = let the node choose for the device at run time

    @property
    def parameter_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())


def check_folder(folder: Union[str, Path], input_name: str = "model_name") -> Path:
    """Check that `folder` is a complete transformers SAM3 video folder; name every missing file."""
    folder = Path(folder)
    if folder.is_dir() and (folder / "sam3.pt").is_file() and not (folder / "config.json").is_file():
        raise ModelFilesMissing(input_name, str(folder), ["config.json", "model.safetensors",
                                                          "processor_config.json", "tokenizer.json"],
                                hint="This folder holds the sam3 package checkpoint (sam3.pt); the pack reads the "
                                     "transformers files of the same Hugging Face repository.")
    require_files(folder, REQUIRED_FILES, input_name=input_name)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(input_name, "a readable JSON config.json", f"'{folder / 'config.json'}' ({exc})") from None
    if config.get("model_type") != MODEL_TYPE:
        raise InputError(input_name, f"a SAM3 video model folder (config.json model_type '{MODEL_TYPE}')",
                         f"model_type {config.get('model_type')!r} in '{folder}'",
                         "Use the video model files of facebook/sam3 (transformers format).")
    return folder


def load_sam3_video(folder: Union[str, Path], dtype: Optional[torch.dtype] = None,
                    device: Union[str, torch.device] = "cpu", input_name: str = "model_name") -> Sam3VideoBundle:
    """Load the model and processor from a local folder (never the hub), on `device` in `dtype` (None = float32)."""
    folder = check_folder(folder, input_name)
    from transformers import Sam3VideoModel, Sam3VideoProcessor

    model = Sam3VideoModel.from_pretrained(str(folder), local_files_only=True, use_safetensors=True,
                                           dtype=dtype or torch.float32)
    model.eval().to(device)
    processor = Sam3VideoProcessor.from_pretrained(str(folder), local_files_only=True)
    check_model_api(model)
    return Sam3VideoBundle(model=model, processor=processor, folder=folder, dtype=dtype)


def check_transformers_version(version: str) -> None:
    """Refuse a transformers outside SUPPORTED_TRANSFORMERS, saying which range and how to get it."""
    low, high = SUPPORTED_TRANSFORMERS
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if not low <= parts < high:
        wanted = f"transformers>={low[0]}.{low[1]},<{high[0]}"
        raise RuntimeError(f"SAM3 needs {wanted} (its video propagation calls transformers internals that were "
                           f"tested only there), found transformers {version}: pip install \"{wanted}\"")


def check_model_api(model) -> None:
    import transformers

    check_transformers_version(transformers.__version__)
    missing = [name for name in _INTERNALS if not hasattr(model, name)]
    if missing:
        raise RuntimeError(f"transformers {transformers.__version__}: Sam3VideoModel lacks {', '.join(missing)}, "
                           "which the propagation frames use; install a transformers 5.x that has them.")


def text_positions(model) -> Optional[int]:
    """How many tokens SAM3's CLIP text encoder reads (32 in facebook/sam3), or None if the model does not say."""
    encoder = getattr(getattr(model, "detector_model", None), "text_encoder", None)
    value = getattr(getattr(encoder, "config", None), "max_position_embeddings", None)
    return int(value) if value else None


def check_prompt_lengths(prompts: Sequence[str], tokenizer, limit: Optional[int]) -> None:
    """Refuse a prompt longer than the text encoder reads, naming it, before the model fails on it deep inside.

    transformers' SAM3 video processor pads every prompt to 32 tokens but does not truncate, so a longer one ends
    in a raw "Sequence length must be less than max_position_embeddings" from CLIP. Cutting it silently would mask
    a different garment than the user wrote; SAM3 is prompted with short noun phrases anyway."""
    if not limit:
        return
    for text in prompts:
        count = len(tokenizer(text)["input_ids"])          # with the start and end tokens, as the encoder sees it
        if count > limit:
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise InputError("prompts", f"prompts of at most {limit} tokens each (SAM3's text encoder reads no "
                                        "more; short noun phrases like 'burgundy dress' work best)",
                             f"{count} tokens in {shown!r}", "Shorten that prompt.")


class _CapNotice(logging.Filter):
    """Drops transformers' "hitting self.max_num_objects" warning: with a cap it repeats on every detection frame,
    and reaching `max_objects` is the setting doing its job, not a problem."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "max_num_objects" not in record.getMessage()


_MODEL_LOG = logging.getLogger("transformers.models.sam3_video.modeling_sam3_video")


class TransformersSegmenter:
    """`FrameSegmenter` over a loaded `Sam3VideoBundle` (model already on `device` in `dtype`)."""

    def __init__(self, bundle: Sam3VideoBundle, device: Union[str, torch.device, None] = None,
                 dtype: torch.dtype = torch.float32):
        self.bundle = bundle
        # None: where the model's weights are (a caller that moved the model need not repeat the device)
        self.device = torch.device(device) if device is not None else next(bundle.model.parameters()).device
        self.dtype = dtype
        self.session = None
        self.detector_calls = 0
        self._saved: dict = {}
        self._quiet = _CapNotice()
        tracker = bundle.model.tracker_model.config
        self._memory_reach = max(int(tracker.num_maskmem), int(tracker.max_object_pointers_in_encoder))

    # -- FrameSegmenter -------------------------------------------------------------------------------------------
    def start(self, prompts: Sequence[str], height: int, width: int, settings: MaskSettings) -> None:
        model, proc = self.bundle.model, self.bundle.processor
        check_prompt_lengths(prompts, proc.tokenizer, text_positions(model))
        self._saved = {name: getattr(model, name) for name in _RUN_ATTRS}
        model.score_threshold_detection = float(settings.detection_threshold)
        # A new track needs the same confidence as a detection: one threshold, as the posts' node exposes it.
        model.new_det_thresh = float(settings.detection_threshold)
        model.max_num_objects = int(settings.max_objects) if settings.max_objects else 10_000
        self.session = proc.init_video_session(inference_device=self.device, dtype=self.dtype,
                                               video_storage_device=self.device)
        self.session.video_height, self.session.video_width = int(height), int(width)
        proc.add_text_prompt(self.session, list(prompts))
        _MODEL_LOG.addFilter(self._quiet)
        self._prompt_index = {pid: list(prompts).index(text) for pid, text in self.session.prompts.items()}
        self.detector_calls = 0

    def detect(self, frame_idx: int, frame: torch.Tensor) -> list[TrackedMask]:
        pixels = self._pixels(frame)
        with torch.inference_mode():
            out = self.bundle.model(inference_session=self.session, frame=pixels, frame_idx=frame_idx)
        self.detector_calls += 1
        hidden = set(out.removed_obj_ids or ()) | set(out.suppressed_obj_ids or ())
        hidden |= set(self.session.hotstart_removed_obj_ids)
        alive = set(out.object_ids)
        found = [self._tracked(obj_id, logits, out.obj_id_to_score.get(obj_id, 1.0))
                 for obj_id, logits in out.obj_id_to_mask.items() if obj_id in alive and obj_id not in hidden]
        self._forget_frame(frame_idx)
        return found

    def propagate(self, frame_idx: int, frame: torch.Tensor) -> list[TrackedMask]:
        model, session = self.bundle.model, self.session
        session.add_new_frame(self._pixels(frame), frame_idx=frame_idx)
        with torch.inference_mode():
            vision = model.detector_model.get_vision_features(pixel_values=session.get_frame(frame_idx)[None])
            feats, pos = model.get_vision_features_for_tracker(vision_embeds=vision)
            session.cache.cache_vision_features(frame_idx, {"vision_feats": feats, "vision_pos_embeds": pos})
            low_res, scores = model.run_tracker_propagation(session, frame_idx, reverse=False)
            if len(session.obj_ids):
                model._tracker_update_memories(session, frame_idx, low_res)
        found = [self._tracked(obj_id, low_res[k], float(torch.sigmoid(scores[k].float()).reshape(-1)[0]))
                 for k, obj_id in enumerate(session.obj_ids)]
        self._forget_frame(frame_idx)
        return found

    def close(self) -> None:
        _MODEL_LOG.removeFilter(self._quiet)
        for name, value in self._saved.items():
            setattr(self.bundle.model, name, value)
        self._saved = {}
        if self.session is not None:
            self.session.reset_state()
            self.session.processed_frames = None
        self.session = None
        gc.collect()

    # -- helpers --------------------------------------------------------------------------------------------------
    def _pixels(self, frame: torch.Tensor) -> torch.Tensor:
        """One frame ``(H, W, 3)`` float 0-1 -> the model's normalised ``(3, S, S)`` input, via the processor."""
        # Resized on the compute device: one full-size frame crosses to the GPU, not a CPU resize per frame.
        chw = frame[..., :3].to(self.device).permute(2, 0, 1).float().clamp(0, 1)
        batch = self.bundle.processor(images=chw, do_rescale=False, return_tensors="pt", device=self.device)
        return batch["pixel_values"][0]

    def _tracked(self, obj_id: int, logits: torch.Tensor, score: float) -> TrackedMask:
        prompt_id = self.session.obj_id_to_prompt_id[obj_id]
        return TrackedMask(obj_id=int(obj_id), prompt_index=self._prompt_index[prompt_id],
                           logits=logits.detach(), score=float(score))

    def _forget_frame(self, frame_idx: int) -> None:
        """Free what later frames cannot use: the processed pixels and memories past the tracker's reach.

        The frame's entry stays (as an empty tensor): the tracker counts the session's frames to decide how many
        past object pointers to attend to, and with the entry removed it would attend to none and return NaN.
        Propagated (non-conditioning) outputs are read back only `num_maskmem` frames for the memory bank and
        `max_object_pointers_in_encoder` frames for object pointers; older ones would pile up for the whole clip
        (per object and frame, a memory map at the model's feature size), so they are dropped.
        """
        session = self.session
        if session.processed_frames is not None and frame_idx in session.processed_frames:
            session.processed_frames[frame_idx] = _FORGOTTEN
        oldest = frame_idx - self._memory_reach
        for outputs in session.output_dict_per_obj.values():
            non_cond = outputs["non_cond_frame_outputs"]
            for stale in [t for t in non_cond if t < oldest]:
                del non_cond[stale]
