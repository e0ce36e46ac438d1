"""MuseTalk nodes: Loader, Face Track, Avatar (precompile, cached) and Lip Sync.

All work is in `engines/musetalk/`: these nodes check inputs, resolve model folders, move the networks through
ComfyUI's model management (one ModelPatcher for UNet + VAE + Whisper encoder) and convert types.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import folder_paths
from comfy_api.latest import io, ui

from ..engines.common.errors import InputError
from ..engines.common.fingerprint import source_identity
from ..engines.common.frames import FrameStream, image_from_bytes
from ..engines.common.images import RGB, check_image_batch
from ..engines.common.loop_modes import LEGACY_LOOP_MODES, LOOP_MODES
from ..engines.export.paths import check_prefix
from ..engines.musetalk.face_track import HaarDetector, parse_box, track_faces, track_from_box, track_from_masks
from ..engines.musetalk.face_track import preview as track_preview
from ..engines.musetalk.accel import accelerate_musetalk
from ..engines.musetalk.avatar import CropSettings, build_avatar, source_key
from ..engines.musetalk.avatar import load_from_source as avatar_by_source
from ..engines.musetalk.blend import MouthEllipse
from ..engines.musetalk.cadence import VELOCITY_THRESHOLD
from ..engines.musetalk.lipsync import (BLEND_MODES, MAX_STRIDE, STRIDE_MODES, LipSyncSettings, LipSyncStats,
                                        frame_count, lipsync, lipsync_chunks)
from ..engines.musetalk.loader import describe, load_musetalk
from ..engines.musetalk.viseme import DEFAULT_CAPACITY as VISEME_CAPACITY, MAX_CAPACITY as VISEME_MAX_CAPACITY
from ..engines.musetalk.viseme import MAX_THRESHOLD as VISEME_MAX_THRESHOLD, OFF as VISEME_OFF
from . import comfy_bridge, core_features, sources, types
from .accel import Accelerated, backend_input
from .inputs import PRECISIONS, resolve_dtype, validate
from .model_check import loader_check
from .video_output import FRAMES_TOOLTIP, HIDDEN, STREAM_TO_EXPORT_TOOLTIP, check_one_stream, stream_video

log = logging.getLogger("broadcast_avatar.musetalk")
FAMILY = "musetalk"
CATEGORY = comfy_bridge.category("musetalk")
DETECTOR_FAMILIES = ("musetalk", "ditto")   # model folders searched for an SCRFD .onnx face detector
BUILTIN_DETECTORS = ("auto", "haar")


class MuseTalkHandle(comfy_bridge.ManagedModel, Accelerated):
    """What flows on a BROADCAST_MUSETALK_MODEL link: UNet + VAE + Whisper encoder behind ComfyUI's model
    management; `ready()` gives ``(nets, device)``; `ready_for(batch)` also builds the runners of the loader's
    `backend` for the UNet and the VAE decoder (engines/accel), once per device and batch."""

    def __init__(self, nets, name: str, backend: str = "auto"):
        super().__init__(nets, name)
        self.backend = backend
        self.summary: list[str] = []

    def ready_for(self, batch: int):
        nets, device = self.ready()
        self.summary = self.runners_for((str(device), int(batch)), batch,
                                        lambda opts: accelerate_musetalk(nets, self.backend, opts))
        return nets, device


def detector_files() -> list[str]:
    """SCRFD ONNX files under models/musetalk and models/ditto, as '<family>/<relative path>'."""
    found = set()
    for family in DETECTOR_FAMILIES:
        try:
            bases = folder_paths.get_folder_paths(family)
        except KeyError:
            continue
        for base in bases:
            for dirpath, _dirs, files in os.walk(base):
                for f in files:
                    low = f.lower()
                    if low.endswith(".onnx") and ("scrfd" in low or low.startswith("det_")):
                        rel = Path(dirpath, f).relative_to(base).as_posix()
                        found.add(f"{family}/{rel}")
    return sorted(found)


def _detector_path(name: str) -> Path:
    family, _, rel = name.partition("/")
    if family not in DETECTOR_FAMILIES or not rel or ".." in Path(rel).parts:
        raise InputError("detector", f"auto, haar or an SCRFD .onnx under models/{{{','.join(DETECTOR_FAMILIES)}}}",
                         repr(name))
    for base in folder_paths.get_folder_paths(family):
        if (Path(base) / rel).is_file():
            return Path(base) / rel
    raise InputError("detector", "an existing .onnx file", f"{name!r} (not found)",
                     "Refresh the page: the file list is read when the node list loads.")


def _has_onnxruntime() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def _resolve_detector(name: str) -> str:
    """`auto` -> the first SCRFD file found (with onnxruntime installed), else haar; other names unchanged."""
    if name == "auto":
        files = detector_files() if _has_onnxruntime() else []
        return files[0] if files else "haar"
    return name


def _face_track_source(inputs):
    """Face Track as a known source (nodes/sources.py): its inputs, the detector it will really run by identity."""
    name = _resolve_detector(inputs.get("detector", "auto"))
    detector = name if name in BUILTIN_DETECTORS else source_identity(_detector_path(name), name)
    return {**inputs, "detector": detector}


sources.register("BroadcastFaceTrack", _face_track_source)


def _make_detector(name: str):
    has_ort = _has_onnxruntime()
    name = _resolve_detector(name)
    if name == "haar":
        return HaarDetector(), "haar"
    if not has_ort:
        raise InputError("detector", "onnxruntime installed to run an SCRFD .onnx", "no onnxruntime",
                         "pip install onnxruntime (or onnxruntime-gpu), or choose haar.")
    from ..engines.musetalk.scrfd import ScrfdDetector

    return ScrfdDetector(_detector_path(name), device=comfy_bridge.torch_device()), "scrfd"


class BroadcastMuseTalkLoader(io.ComfyNode):
    """Loads MuseTalk v1.5 (UNet + sd-vae-ft-mse + whisper-tiny encoder) from a local folder."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastMuseTalkLoader",
            **core_features.searchable("BroadcastMuseTalkLoader", "Broadcast MuseTalk Loader"),
            category=CATEGORY,
            description="Load MuseTalk's UNet, VAE and Whisper encoder from a folder in models/musetalk laid out "
                        "as upstream's models/ (musetalkV15/, sd-vae/, whisper/); never downloads.",
            inputs=[
                io.Combo.Input("model_name", options=comfy_bridge.model_names(FAMILY),
                               tooltip="A folder in models/musetalk holding musetalkV15/{musetalk.json, unet.pth}, "
                                       "sd-vae/{config.json, diffusion_pytorch_model.safetensors} and whisper/{config.json, "
                                       "model.safetensors, preprocessor_config.json} (.bin weights load too)."),
                io.Combo.Input("precision", options=list(PRECISIONS), default="auto",
                               tooltip="Weights and compute dtype. auto: bf16 on a GPU that runs it well, else fp16 "
                                       "there, fp32 on the CPU (half precision is very slow on CPUs)."),
                backend_input(),
            ],
            outputs=[types.MuseTalkModel.Output("musetalk_model", display_name="musetalk_model")],
        )

    @classmethod
    def validate_inputs(cls, model_name=None):
        # Only model_name: ComfyUI repeats a refusal under every input named here; core checks the other combos.
        return loader_check(FAMILY, "model_name", model_name)

    @classmethod
    def execute(cls, model_name, precision, backend="auto") -> io.NodeOutput:
        folder = comfy_bridge.model_dir(FAMILY, model_name)
        nets = load_musetalk(folder, resolve_dtype(precision, comfy_bridge.torch_device()))
        log.info("Broadcast MuseTalk: loaded %s from %s (backend %s, built on first use)", describe(nets),
                 model_name, backend)
        return io.NodeOutput(MuseTalkHandle(nets, model_name, backend))


class BroadcastFaceTrack(io.ComfyNode):
    """Face boxes for every frame of a clip: detector on keyframes of a small proxy, interpolation between."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastFaceTrack",
            **core_features.searchable("BroadcastFaceTrack", "Broadcast Face Track"),
            category=CATEGORY,
            description="Track the face box through a clip: an SCRFD .onnx from models/ or OpenCV's built-in Haar "
                        "cascade on every Nth frame of a small proxy, interpolated between; or from a MASK or a box.",
            inputs=[
                io.Image.Input("images", tooltip="The avatar loop, [frames, height, width, 3]."),
                io.Combo.Input("detector", options=list(BUILTIN_DETECTORS) + detector_files(), default="auto",
                               tooltip="auto: the first SCRFD .onnx found under models/musetalk or models/ditto, "
                                       "else haar (OpenCV's bundled cascade, no files needed)."),
                io.Int.Input("detect_every", default=4, min=1, max=250, step=1,
                             tooltip="Run the detector on every Nth frame (and the last); frames between get "
                                     "boxes interpolated. 1 = every frame. 4 (160 ms at 25 fps) follows a "
                                     "presenter's head with linear steps; larger is faster on steady loops."),
                io.Int.Input("proxy_size", default=480, min=0, max=4096, step=16,
                             tooltip="Longest side (pixels) of the copy the detector sees; 0 = full size. 480 "
                                     "(a 1920 frame at a quarter) keeps a presenter's face tens of pixels wide for "
                                     "the detector at a sixteenth of the pixels."),
                io.String.Input("box", default="", optional=True,
                                tooltip="A fixed face box 'x1, y1, x2, y2' in pixels for every frame (brows to "
                                        "below the mouth); overrides the detector and the mask. Empty: unused."),
                io.Mask.Input("mask", optional=True,
                              tooltip="A face mask (one, or one per frame): its bounding box is the face box; "
                                      "frames with an empty mask are interpolated. Overrides the detector."),
            ],
            outputs=[types.FaceTrack.Output("face_track", display_name="face_track")],
        )

    @classmethod
    def validate_inputs(cls, detector=None, box=None):
        return validate(lambda: detector is None or detector in BUILTIN_DETECTORS or _detector_path(detector),
                        lambda: not (box and box.strip()) or parse_box(box))

    @classmethod
    def execute(cls, images, detector, detect_every, proxy_size, box="", mask=None) -> io.NodeOutput:
        images = check_image_batch(images, "images", channels=RGB)
        n, h, w = int(images.shape[0]), int(images.shape[1]), int(images.shape[2])
        if box and box.strip():
            track = track_from_box(parse_box(box), n, w, h)
        elif mask is not None:
            track = track_from_masks(mask, n, w, h)
        else:
            det, method = _make_detector(detector)
            track = track_faces(images, det, every=int(detect_every), proxy_size=int(proxy_size), method=method,
                                progress=comfy_bridge.progress(n))
        summary = (f"{n} frames, {int(track.found.sum())} boxes found ({track.method}), "
                   f"first box {[round(float(v)) for v in track.boxes[0]]}")
        shown = dict(ui.PreviewImage(track_preview(images, track), cls=cls).as_dict())
        shown["text"] = [summary]
        return io.NodeOutput(track, ui=shown)


class BroadcastMuseTalkAvatar(io.ComfyNode):
    """Precompiles an avatar loop (crop boxes, reference latents, mouth mask); cached by content."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastMuseTalkAvatar",
            **core_features.searchable("BroadcastMuseTalkAvatar", "Broadcast MuseTalk Avatar"),
            category=CATEGORY,
            description="Precompile a presenter loop for MuseTalk: face crops, their VAE latents and the mouth-only "
                        "blend mask. Stored in the pack's cache; the same frames load instantly next time.",
            inputs=[
                types.MuseTalkModel.Input("musetalk_model", tooltip="From Broadcast MuseTalk Loader (its VAE encodes "
                                                                    "the crops)."),
                io.Image.Input("images", lazy=True,
                               tooltip="The avatar loop (the frames the face track was made from). Fed by Broadcast "
                                       "Load Video, a cached avatar is found from the file itself (name, size, "
                                       "modification time) and the loop is not even decoded."),
                types.FaceTrack.Input("face_track", lazy=True, tooltip="Per-frame face boxes of these frames."),
                io.Float.Input("fps", default=25.0, min=1.0, max=120.0, step=0.001, lazy=True,
                               tooltip="The loop's frame rate (from the video loader): maps video time to loop "
                                       "frames. MuseTalk is trained at 25."),
                io.Float.Input("crop_top", default=0.08, min=-0.5, max=1.0, step=0.01,
                               tooltip="Crop margin above the face box, in box heights."),
                io.Float.Input("crop_bottom", default=0.22, min=-0.5, max=1.0, step=0.01,
                               tooltip="Crop margin below the face box, in box heights (the chin must be inside)."),
                io.Float.Input("crop_side", default=0.0, min=-0.3, max=1.0, step=0.01,
                               tooltip="Crop margin left and right, in box widths."),
                io.Float.Input("mouth_feather", default=0.5, min=0.05, max=1.0, step=0.05,
                               tooltip="Part of the mouth ellipse's radius over which the blend fades out (cosine)."),
                io.Int.Input("batch_size", default=8, min=1, max=64, step=1, tooltip="Crops per VAE encode call."),
            ],
            outputs=[types.MuseTalkAvatar.Output("avatar", display_name="avatar")],
            hidden=[io.Hidden.prompt, io.Hidden.unique_id],
        )

    LAZY = ("images", "face_track", "fps")

    @classmethod
    def _settings(cls, crop_top, crop_bottom, crop_side, mouth_feather) -> CropSettings:
        return CropSettings(top=float(crop_top), bottom=float(crop_bottom), side=float(crop_side),
                            mouth=MouthEllipse(feather=float(mouth_feather)))

    @classmethod
    def _source_key(cls, musetalk_model, settings):
        # What made the frames, the track and the rate, read off the prompt (files by identity): None when any of
        # it is not a known source, and the avatar is then found by content as before.
        nets = musetalk_model.engine
        return source_key(sources.signature(cls, cls.LAZY), settings, nets.vae_id, nets.compute_dtype)

    @classmethod
    def check_lazy_status(cls, musetalk_model, crop_top, crop_bottom, crop_side, mouth_feather, batch_size,
                          **lazy):
        key = cls._source_key(musetalk_model, cls._settings(crop_top, crop_bottom, crop_side, mouth_feather))
        if key is not None and avatar_by_source(comfy_bridge.cache(), key) is not None:
            return []       # a cold boot: the loop is neither decoded nor tracked
        # Only linked inputs appear here (as None until evaluated); asking for an unlinked one would fail.
        return [name for name in cls.LAZY if name in lazy and lazy[name] is None]

    @classmethod
    def execute(cls, musetalk_model, crop_top, crop_bottom, crop_side, mouth_feather, batch_size, images=None,
                face_track=None, fps=None) -> io.NodeOutput:
        settings = cls._settings(crop_top, crop_bottom, crop_side, mouth_feather)
        key = cls._source_key(musetalk_model, settings)
        nets, device = musetalk_model.ready()
        avatar = build_avatar(nets, images, face_track, None if fps is None else float(fps), settings, device=device,
                              cache=comfy_bridge.cache(), batch_size=int(batch_size),
                              progress=comfy_bridge.progress(int(images.shape[0]) if images is not None else 1),
                              source_key=key)
        state = ("loaded from cache" if avatar.from_cache else "precompiled") + \
                (" (found by its source file, not decoded)" if images is None else "")
        return io.NodeOutput(avatar, ui=ui.PreviewText(f"{len(avatar)} frames {state} ({avatar.key[:12]})"))


class BroadcastMuseTalkLipSync(io.ComfyNode):
    """Speech + avatar -> lip-synced frames (and the speech, passed through)."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastMuseTalkLipSync",
            **core_features.searchable("BroadcastMuseTalkLipSync", "Broadcast MuseTalk Lip Sync"),
            category=CATEGORY,
            description="Lip-sync an avatar loop to speech with MuseTalk: batched UNet, optional keyframe stride "
                        "with SLERP, mouth-only paste-back. Output length follows the audio, looping the avatar.",
            inputs=[
                types.MuseTalkModel.Input("musetalk_model", tooltip="From Broadcast MuseTalk Loader (the same model "
                                                                    "the avatar was made with)."),
                types.MuseTalkAvatar.Input("avatar", tooltip="From Broadcast MuseTalk Avatar."),
                io.Audio.Input("audio", tooltip="Speech of any length and sample rate (resampled to 16 kHz mono)."),
                io.Int.Input("batch_size", default=8, min=1, max=64, step=1,
                             tooltip="Frames per UNet and VAE call (8-32 on a GPU). The last batch is padded."),
                io.Int.Input("stride", default=2, min=1, max=3, step=1,
                             tooltip="Run the UNet on every Nth frame and SLERP the latents between (1 = every "
                                     "frame; 2-3 are faster and steadier). 2: per-frame evaluation makes the teeth "
                                     "shimmer from frame to frame, SLERP between keyframes 80 ms apart removes it "
                                     "and halves the UNet work. With stride_mode adaptive, this is the stride used on "
                                     "fast articulation."),
                io.Float.Input("fps", default=0.0, min=0.0, max=120.0, step=0.001,
                               tooltip="Output frame rate; 0 = the avatar's."),
                io.Combo.Input("loop_mode", options=list(LOOP_MODES), default="mirror",
                               tooltip="When the speech outlasts the avatar loop: mirror plays it forward then "
                                       "backward, each end frame shown twice (upstream MuseTalk's cycle, the loop "
                                       "then the loop reversed); ping-pong turns on the end frame instead (no "
                                       "frame held at the turn); both never jump for a loop that ends elsewhere "
                                       "than it starts. wrap restarts at the first frame (for a seamless loop)."),
                io.Boolean.Input("stream_to_file", default=False,
                                 tooltip="Encode frames (with the speech) to an MP4 in the output folder as they are "
                                         "rendered, so a long clip never exists whole in memory; the images output "
                                         "is then the last frame only."),
                io.String.Input("filename_prefix", default="broadcast/musetalk",
                                tooltip="Output name inside ComfyUI's output folder when streaming."),
                io.Combo.Input("blend", options=list(BLEND_MODES), default="feather", optional=True,
                               tooltip="Mouth paste-back: feather (alpha blend); reinhard (first match the mouth's "
                                       "colours to the frame in Lab: no skin-tone patch); poisson (OpenCV seamless "
                                       "clone: the frame's own border values). Outside the mouth region the frame "
                                       "is never changed."),
                io.Combo.Input("stride_mode", options=list(STRIDE_MODES), default="fixed", optional=True,
                               tooltip="fixed: a keyframe every `stride` frames. adaptive: the spacing follows the "
                                       "speech, segment by segment: `stride` where the audio moves fast (plosives, "
                                       "quick syllables), `max_stride` where every frame of the span is steadier "
                                       "than velocity_threshold (held vowels, pauses); SLERP fills between."),
                io.Int.Input("max_stride", default=4, min=1, max=MAX_STRIDE, step=1, optional=True,
                             tooltip="adaptive: keyframe spacing on steady audio (4-5 = 160-200 ms at 25 fps). "
                                     "At least `stride`."),
                io.Float.Input("velocity_threshold", default=VELOCITY_THRESHOLD, min=0.0, max=10.0, step=0.005,
                               optional=True,
                               tooltip="adaptive: audio velocity (mean absolute change of a frame's Whisper window "
                                       "mean from the previous frame's) above which a span counts as fast. 0.065 "
                                       "suits whisper-tiny; lower = more keyframes."),
                io.Int.Input("viseme_threshold", default=VISEME_OFF, min=VISEME_OFF, max=VISEME_MAX_THRESHOLD, step=1,
                             optional=True,
                             tooltip="Viseme cache: a keyframe whose audio window repeats reuses the mouth made "
                                     "for it, skipping the UNet and the VAE (looped scripts, repeated phrases, "
                                     "pauses). -1 = off; 0 = exact (only an identical window on the same loop "
                                     "frame: the output is bit-identical to no cache); 1-32 = the most bits (of a "
                                     "64-bit SimHash of the window) two sounds may differ by; 2 is near-duplicate "
                                     "sounds only, higher reuses more and follows the speech less. The summary "
                                     "shows the hit rate."),
                io.Int.Input("viseme_cache_size", default=VISEME_CAPACITY, min=1, max=VISEME_MAX_CAPACITY, step=1,
                             optional=True,
                             tooltip="Viseme cache: the most mouths kept (about 150 kB each on the CPU at a 256 "
                                     "crop); the least recently used goes first. 512 covers about 20 s of distinct "
                                     "keyframes at 25 fps."),
                # Last: a saved workflow's widget values are positional, so new inputs go at the end.
                io.Boolean.Input("stream_to_export", default=False, optional=True,
                                 tooltip=STREAM_TO_EXPORT_TOOLTIP),
            ],
            outputs=[
                io.Image.Output("images", display_name="images"),
                io.Audio.Output("audio_out", display_name="audio", tooltip="The input speech, unchanged."),
                io.Float.Output("fps_out", display_name="fps", tooltip="The output frame rate."),
                io.String.Output("path", display_name="path", tooltip="The streamed MP4 (empty when not streaming)."),
                types.FrameStream.Output("frames", display_name="frames", tooltip=FRAMES_TOOLTIP),
            ],
            hidden=HIDDEN,
        )

    @classmethod
    def validate_inputs(cls, loop_mode=None, filename_prefix=None, blend=None, stride_mode=None, stream_to_file=None,
                        stream_to_export=None):
        return validate(("loop_mode", loop_mode, LOOP_MODES, LEGACY_LOOP_MODES), ("blend", blend, BLEND_MODES),
                        ("stride_mode", stride_mode, STRIDE_MODES),
                        lambda: filename_prefix is None or check_prefix(filename_prefix),
                        lambda: check_one_stream(stream_to_file, stream_to_export))

    @classmethod
    def execute(cls, musetalk_model, avatar, audio, batch_size, stride, fps, loop_mode, stream_to_file=False,
                filename_prefix="broadcast/musetalk", blend="feather", stride_mode="fixed", max_stride=4,
                velocity_threshold=VELOCITY_THRESHOLD, viseme_threshold=VISEME_OFF,
                viseme_cache_size=VISEME_CAPACITY, stream_to_export=False) -> io.NodeOutput:
        settings = LipSyncSettings(batch_size=int(batch_size), stride=int(stride), fps=float(fps) or None,
                                   loop_mode=loop_mode, blend=blend, stride_mode=stride_mode,
                                   max_stride=int(max_stride), velocity_threshold=float(velocity_threshold),
                                   viseme_threshold=int(viseme_threshold),
                                   viseme_cache_size=int(viseme_cache_size))
        out_fps = float(settings.fps or avatar.fps)
        stats = LipSyncStats()
        if stream_to_export:
            def render():      # called once by FrameStream here, then again per further pass (the nets may have moved)
                nets, device = musetalk_model.ready_for(settings.batch_size)
                return lipsync_chunks(nets, avatar, audio, settings, device=device,
                                      progress=comfy_bridge.progress(1), stats=stats, reuse_buffers=True)

            frames = FrameStream(render, frame_count(audio, settings, avatar), out_fps, "MuseTalk Lip Sync")
            return io.NodeOutput(None, audio, out_fps, "", frames, ui=comfy_bridge.with_audio_player(
                ui.PreviewText("\n".join([f"{len(frames)} frames at {out_fps:g} fps, rendered as Export Video "
                                          "encodes them", *musetalk_model.summary])),    # built by FrameStream's check
                audio, cls))
        nets, device = musetalk_model.ready_for(settings.batch_size)
        if not stream_to_file:
            frames = lipsync(nets, avatar, audio, settings, device=device, progress=comfy_bridge.progress(1),
                             stats=stats)
            log.info("Broadcast MuseTalk Lip Sync: %s", stats.summary())
            text = "\n".join([stats.summary(), *musetalk_model.summary])    # what ran, and on which backend
            return io.NodeOutput(frames, audio, out_fps, "", None,
                                 ui=comfy_bridge.with_audio_player(ui.PreviewText(text), audio, cls))
        chunks = lipsync_chunks(nets, avatar, audio, settings, device=device, progress=comfy_bridge.progress(1),
                                stats=stats, reuse_buffers=True)
        video = stream_video(cls, chunks, out_fps, filename_prefix, audio)
        log.info("Broadcast MuseTalk Lip Sync: %s", stats.summary())
        video.ui["text"] = [*video.ui.get("text", []), stats.summary(), *musetalk_model.summary]
        return io.NodeOutput(image_from_bytes(video.last_frame), audio, out_fps, video.path, None,   # IMAGE edge
                             ui=comfy_bridge.with_audio_player(video.ui, audio, cls))


NODES = [BroadcastMuseTalkLoader, BroadcastFaceTrack, BroadcastMuseTalkAvatar, BroadcastMuseTalkLipSync]
