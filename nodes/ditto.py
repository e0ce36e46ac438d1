"""Ditto nodes: Loader, Avatar (registration packet, cached), Audio Features, Motion and Render.

All work is in `engines/ditto/`; these nodes check inputs, resolve the model folder, move the networks through
ComfyUI's model management (one ModelPatcher over the six networks) and convert types.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from comfy_api.latest import io, ui

from ..engines.common.audio import make_audio, to_mono
from ..engines.common.errors import InputError
from ..engines.common.frames import FrameStream, image_from_bytes
from ..engines.common.images import check_image_batch
from ..engines.common.loop_modes import DITTO_LEGACY_LOOP_MODES, DITTO_LOOP_MODES
from ..engines.ditto.accel import RENDER, accelerate_ditto
from ..engines.ditto.audio_features import SAMPLE_RATE, check_length
from ..engines.ditto.keypoints import DriveSettings
from ..engines.ditto.living import LivingSettings
from ..engines.ditto.motion import EMOTIONS
from ..engines.ditto.avatar import AvatarSettings
from ..engines.ditto.avatar import load_from_source as packet_by_source
from ..engines.ditto.pipeline import DittoPipeline
from ..engines.ditto.putback import BLEND_MODES as PUTBACK_BLENDS
from ..engines.ditto.render import RenderSettings
from ..engines.export import check_prefix
from . import comfy_bridge, core_features, sources, types
from .accel import Accelerated, backend_input
from .inputs import PRECISIONS, resolve_precision, validate
from .model_check import loader_check
from .video_output import FRAMES_TOOLTIP, HIDDEN, STREAM_TO_EXPORT_TOOLTIP, check_one_stream, stream_video

log = logging.getLogger("broadcast_avatar.ditto")
FAMILY = "ditto"
CATEGORY = comfy_bridge.category("ditto")
STEP_PRESETS = ("50", "25", "10", "4", "custom")
TRI_STATE = ("auto", "on", "off")
BLINKS = ("off", "random", "fixed", "natural")


class DittoHandle(comfy_bridge.ManagedModel, Accelerated):
    """What flows on a BROADCAST_DITTO_MODEL link: the pipeline, its networks behind ComfyUI's model management;
    `ready()` gives ``(pipeline, device)``; `ready_for(batch)` also builds the runners of the loader's `backend` for
    the renderer networks (engines/accel) for that device and render batch, `ready_for_motion(guidance)` LMDM's for
    that device and guidance weight."""

    def __init__(self, pipeline: DittoPipeline, name: str, backend: str = "auto"):
        super().__init__(pipeline.nets, name, engine=pipeline)
        self.backend = backend
        self.summary: list[str] = []

    def ready_for(self, batch: int) -> tuple[DittoPipeline, object]:
        """Ready to render at `batch` frames per call: the renderer's networks' runners for that batch."""
        pipeline, device = self.ready()
        self.summary = self.runners_for(
            (str(device), int(batch)), batch,
            lambda opts: accelerate_ditto(pipeline.nets, self.backend, opts, weights_id=pipeline.fingerprint,
                                          which=RENDER))
        return pipeline, device

    def ready_for_motion(self, guidance: float) -> tuple[DittoPipeline, object]:
        """Ready to sample motion with `guidance`: LMDM's runner for this run's shapes (one window per call) and
        guidance weight (baked into the network), built before the first window, not after a Render built one."""
        pipeline, device = self.ready()
        self.motion_summary = self.runners_for(
            (str(device), float(guidance)), 1,
            lambda opts: accelerate_ditto(pipeline.nets, self.backend, opts, guidance=float(guidance),
                                          weights_id=pipeline.fingerprint, which=("lmdm",)), group="motion")
        return pipeline, device

    def ready(self) -> tuple[DittoPipeline, object]:
        pipeline, device = super().ready()
        pipeline.device = device      # ComfyUI may have moved the networks since the last run
        return pipeline, device


@dataclass(frozen=True)
class AudioFeatures:
    """What flows on a BROADCAST_DITTO_AUDIO_FEATURES link."""

    features: np.ndarray        # (frames, 1024) at 25 fps
    audio16k: np.ndarray        # the mono 16 kHz speech they came from


class BroadcastDittoLoader(io.ComfyNode):
    """Loads Ditto's networks, HuBERT and face models from a folder in models/ditto (upstream layout)."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastDittoLoader",
            **core_features.searchable("BroadcastDittoLoader", "Broadcast Ditto Loader"),
            category=CATEGORY,
            description="Load Ditto (PyTorch release) from a folder in models/ditto laid out as upstream's "
                        "checkpoints/: ditto_cfg/*.pkl, ditto_pytorch/models/*.pth, ditto_pytorch/aux_models/*.onnx.",
            inputs=[
                io.Combo.Input("model_name", options=comfy_bridge.model_names(FAMILY),
                               tooltip="A folder in models/ditto holding ditto_cfg/v0.4_hubert_cfg_pytorch.pkl, "
                                       "ditto_pytorch/models/ (6 .pth) and ditto_pytorch/aux_models/ (det_10g, "
                                       "2d106det, landmark203, hubert_streaming_fix_kv .onnx)."),
                io.Combo.Input("precision", options=list(PRECISIONS), default="auto",
                               tooltip="Autocast dtype of the renderer (the motion model always runs in fp32). "
                                       "auto: bf16 on a GPU that runs it well, else fp16 there, fp32 on the CPU. "
                                       "fp16 is refused on the CPU."),
                backend_input(),
            ],
            outputs=[types.DittoModel.Output("ditto_model", display_name="ditto_model")],
        )

    @classmethod
    def validate_inputs(cls, model_name=None):
        # Only model_name: ComfyUI repeats a refusal under every input named here; core checks the other combos.
        return loader_check(FAMILY, "model_name", model_name)

    @classmethod
    def execute(cls, model_name, precision, backend="auto") -> io.NodeOutput:
        folder = comfy_bridge.model_dir(FAMILY, model_name)
        device = comfy_bridge.torch_device()
        chosen = resolve_precision(precision, device, supported=DittoPipeline.PRECISIONS)
        pipeline = DittoPipeline(folder, device=device, precision=chosen)
        log.info("Broadcast Ditto: loaded %s (%s, backend %s, built on first render)", model_name, chosen, backend)
        return io.NodeOutput(DittoHandle(pipeline, model_name, backend))


class BroadcastDittoAvatar(io.ComfyNode):
    """Registers a portrait or an action loop once; later runs load the packet from the cache."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastDittoAvatar",
            **core_features.searchable("BroadcastDittoAvatar", "Broadcast Ditto Avatar"),
            category=CATEGORY,
            description="Face landmarks, 512 crop, source motion, appearance features and eye measures for every "
                        "frame, saved as a packet keyed by the frames' content; a second run never re-registers.",
            inputs=[
                types.DittoModel.Input("ditto_model", tooltip="From Broadcast Ditto Loader."),
                io.Image.Input("images", lazy=True,
                               tooltip="A portrait (1 frame) or an action loop (frames played in a loop behind the "
                                       "talking face). Frames without a face are interpolated. Fed by Broadcast "
                                       "Load Video (or Load Image), a cached packet is found from the file itself "
                                       "(name, size, modification time) and the loop is not even decoded."),
                io.Float.Input("crop_scale", default=2.3, min=1.5, max=4.0, step=0.05,
                               tooltip="Crop side as a multiple of the face's landmark extent (upstream 2.3)."),
                io.Float.Input("crop_vy_ratio", default=-0.125, min=-0.5, max=0.5, step=0.005,
                               tooltip="Vertical shift of the crop centre along the face axis, in crop sizes; "
                                       "negative moves up to include more forehead (upstream -0.125)."),
                io.Int.Input("loop_smoothing", default=13, min=1, max=61, step=2,
                             tooltip="Frames of the mean filter over a loop's head motion (upstream 13; 1 = off). "
                                     "Ignored for a single portrait."),
                io.Int.Input("batch_size", default=4, min=1, max=64,
                             tooltip="Frames through the extractors at once."),
            ],
            outputs=[types.DittoAvatar.Output("avatar", display_name="avatar")],
            hidden=[io.Hidden.prompt, io.Hidden.unique_id],
        )

    @classmethod
    def _source_key(cls, ditto_model, crop_scale, crop_vy_ratio, loop_smoothing, batch_size):
        # What made the frames, read off the prompt (files by identity); None when it is not a known source, and the
        # packet is then found by content as before.
        settings = AvatarSettings(crop_scale=float(crop_scale), crop_vy_ratio=float(crop_vy_ratio),
                                  smooth_k=int(loop_smoothing), batch_size=int(batch_size))
        return settings, ditto_model.engine.avatar_source_key(sources.signature(cls, ("images",)), settings)

    @classmethod
    def check_lazy_status(cls, ditto_model, crop_scale, crop_vy_ratio, loop_smoothing, batch_size, images=None):
        _, key = cls._source_key(ditto_model, crop_scale, crop_vy_ratio, loop_smoothing, batch_size)
        if key is not None and packet_by_source(comfy_bridge.cache(), key) is not None:
            return []       # a cold boot: the loop is not decoded
        return ["images"] if images is None else []

    @classmethod
    def execute(cls, ditto_model, crop_scale, crop_vy_ratio, loop_smoothing, batch_size, images=None) -> io.NodeOutput:
        if images is not None:
            images = check_image_batch(images, "images")
        settings, key = cls._source_key(ditto_model, crop_scale, crop_vy_ratio, loop_smoothing, batch_size)
        pipeline, _ = ditto_model.ready()
        avatar, hit = pipeline.prepare_avatar(images, settings, comfy_bridge.cache(),
                                              comfy_bridge.progress(2 * images.shape[0] if images is not None else 1),
                                              source_key=key)
        log.info("Broadcast Ditto: avatar %s (%d frames) %s", avatar.key[:12], avatar.num_frames,
                 ("loaded from its packet" if hit else "registered")
                 + (", found by its source file (not decoded)" if images is None else ""))
        return io.NodeOutput(avatar)


class BroadcastDittoAudioFeatures(io.ComfyNode):
    """HuBERT features for speech, one per 25 fps frame (cached by content)."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastDittoAudioFeatures",
            **core_features.searchable("BroadcastDittoAudioFeatures", "Broadcast Ditto Audio Features"),
            category=CATEGORY,
            description="Speech -> 16 kHz mono -> streaming HuBERT (ONNX) windows -> one 1024-d feature per video "
                        "frame at 25 fps. Any sample rate is resampled.",
            inputs=[
                types.DittoModel.Input("ditto_model", tooltip="From Broadcast Ditto Loader."),
                io.Audio.Input("audio", tooltip="The speech to lip-sync (first batch item; channels are averaged)."),
            ],
            outputs=[types.DittoAudioFeatures.Output("audio_features", display_name="audio_features")],
        )

    @classmethod
    def execute(cls, ditto_model, audio) -> io.NodeOutput:
        mono, _ = to_mono(audio, SAMPLE_RATE, "audio")
        check_length(mono, "audio")
        pipeline, _ = ditto_model.ready()
        feats = pipeline.audio_features(mono, comfy_bridge.cache(), comfy_bridge.progress(1))
        return io.NodeOutput(AudioFeatures(feats, mono))


class BroadcastDittoMotion(io.ComfyNode):
    """Head, lip, eye and brow motion for the whole clip from the motion diffusion model."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastDittoMotion",
            **core_features.searchable("BroadcastDittoMotion", "Broadcast Ditto Motion"),
            category=CATEGORY,
            description="LMDM motion diffusion over overlapping windows (DDIM, eta 1, classifier-free guidance), "
                        "conditioned on the audio features, an emotion, the avatar's eyes and keypoints.",
            inputs=[
                types.DittoModel.Input("ditto_model", tooltip="From Broadcast Ditto Loader."),
                types.DittoAvatar.Input("avatar", tooltip="From Broadcast Ditto Avatar."),
                types.DittoAudioFeatures.Input("audio_features", tooltip="From Broadcast Ditto Audio Features."),
                io.Combo.Input("steps_preset", options=list(STEP_PRESETS), default="50",
                               tooltip="DDIM steps per window: 50 is upstream's default; 25 is close to it; 10 and 4 "
                                       "are faster with stiffer lips. 'custom' uses custom_steps."),
                io.Int.Input("custom_steps", default=50, min=1, max=1000,
                             tooltip="Steps when steps_preset is 'custom'."),
                io.Int.Input("seed", default=0, min=0, max=2 ** 63 - 1,
                             tooltip="Fixes every noise of the run (all windows): same inputs and seed, same motion."),
                io.Combo.Input("emotion", options=list(EMOTIONS), default="neutral",
                               tooltip="Emotion condition, upstream's 8 labels in its order: angry, disgust, fear, "
                                       "happy, neutral (default), sad, surprise, contempt."),
                io.Combo.Input("drive_eyes", options=list(TRI_STATE), default="auto",
                               tooltip="Let the audio drive the eyes (with gaze kept on camera). auto: on for a "
                                       "portrait, off for a loop (the loop's own eyes play)."),
                io.Combo.Input("blinks", options=list(BLINKS), default="off",
                               tooltip="Add the config's blink template: random gaps of 60-100 frames, fixed gaps "
                                       "of blink_gap frames, or natural (Poisson timing at blinks_per_minute with a "
                                       "1 s refractory gap, varied lengths, never on a closed-eye source frame). "
                                       "Needs delta_eye_arr in the config and the eyes driven."),
                io.Int.Input("blink_gap", default=80, min=1, max=1000, tooltip="Frames between blinks when fixed."),
                io.Float.Input("delta_pitch", default=0.0, min=-30.0, max=30.0, step=0.5,
                               tooltip="Head pitch offset in degrees (positive nods down)."),
                io.Float.Input("delta_yaw", default=0.0, min=-30.0, max=30.0, step=0.5,
                               tooltip="Head yaw offset in degrees."),
                io.Float.Input("delta_roll", default=0.0, min=-30.0, max=30.0, step=0.5,
                               tooltip="Head roll offset in degrees."),
                io.Int.Input("pose_smoothing", default=0, min=0, max=51,
                             tooltip="Savitzky-Golay window (frames) on head pose and translation only; 0 = off "
                                     "(upstream's own mean smoothing always runs)."),
                io.Combo.Input("loop_mode", options=list(DITTO_LOOP_MODES), default="mirror",
                               tooltip="When the speech outlasts a loop avatar: mirror plays it forward then "
                                       "backward (each end frame shown twice, as upstream), so a loop that ends "
                                       "elsewhere than it starts never jumps; wrap restarts it at the first frame. "
                                       "A saved ping-pong loads as mirror (what it always did here)."),
                io.Float.Input("blinks_per_minute", default=17.0, min=2.0, max=60.0, step=0.5, optional=True,
                               tooltip="Mean blink rate of natural blinks (people: 15-20 a minute)."),
                io.Boolean.Input("saccades", default=False, optional=True,
                                 tooltip="Small gaze saccades: the gaze holds about a second, then jumps a little "
                                         "in two frames (eyes driven; never while the eyes are shut)."),
                io.Float.Input("emotion_steering", default=0.0, min=0.0, max=4.0, step=0.1, optional=True,
                               tooltip="0: the emotion above for every frame. Above 0: louder and higher speech "
                                       "than the clip's norm leans happy (surprise on pitch jumps), loud and low "
                                       "angry, quiet and low sad; silence keeps the emotion above."),
                io.Boolean.Input("head_lock", default=False, optional=True,
                                 tooltip="Full-body loops: remove head rotation from the motion (pose kept at the "
                                         "source's, rigid turns projected out of the expression) so the head stays "
                                         "on the body."),
            ],
            outputs=[types.DittoMotion.Output("motion", display_name="motion")],
        )

    @classmethod
    def validate_inputs(cls, steps_preset=None, emotion=None, drive_eyes=None, blinks=None, loop_mode=None):
        return validate(("steps_preset", steps_preset, STEP_PRESETS), ("emotion", emotion, EMOTIONS),
                        ("drive_eyes", drive_eyes, TRI_STATE), ("blinks", blinks, BLINKS),
                        ("loop_mode", loop_mode, DITTO_LOOP_MODES, DITTO_LEGACY_LOOP_MODES))

    @classmethod
    def execute(cls, ditto_model, avatar, audio_features, steps_preset, custom_steps, seed, emotion, drive_eyes,
                blinks, blink_gap, delta_pitch, delta_yaw, delta_roll, pose_smoothing, loop_mode,
                blinks_per_minute=17.0, saccades=False, emotion_steering=0.0, head_lock=False) -> io.NodeOutput:
        steps = int(custom_steps) if steps_preset == "custom" else int(steps_preset)
        settings = ditto_model.engine.motion_settings(steps=steps, seed=int(seed), emotion=emotion,
                                                      pose_smoothing=int(pose_smoothing),
                                                      emotion_steering=float(emotion_steering))
        pipeline, _ = ditto_model.ready_for_motion(settings.guidance)     # LMDM's runner for this run's guidance
        living = None
        if blinks == "natural" or saccades:
            living = LivingSettings(blinks=blinks == "natural", blinks_per_minute=float(blinks_per_minute),
                                    saccades=bool(saccades), seed=int(seed))
        drive = DriveSettings(
            drive_eyes=None if drive_eyes == "auto" else drive_eyes == "on", delta_pitch=float(delta_pitch),
            delta_yaw=float(delta_yaw), delta_roll=float(delta_roll),
            blink_open_frames={"off": -1, "random": 0, "fixed": int(blink_gap), "natural": -1}[blinks],
            loop_mode=loop_mode, seed=int(seed), living=living, head_lock=bool(head_lock))
        seq = pipeline.motion(avatar, audio_features.features, settings, drive, audio_features.audio16k,
                              comfy_bridge.progress(1))
        return io.NodeOutput(seq)


class BroadcastDittoRender(io.ComfyNode):
    """Stitch, warp, decode and put the face back into every frame (or stream the frames to an MP4)."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastDittoRender",
            **core_features.searchable("BroadcastDittoRender", "Broadcast Ditto Render"),
            category=CATEGORY,
            description="Render the talking head at full frame size: batched warp + SPADE decode, putback with the "
                        "crop's affine, optional cadence infill and silence bypass; or stream straight to an MP4.",
            is_output_node=True,      # so a streaming render with nothing downstream still runs
            inputs=[
                types.DittoModel.Input("ditto_model", tooltip="From Broadcast Ditto Loader."),
                types.DittoAvatar.Input("avatar", tooltip="The avatar the motion was made for."),
                types.DittoMotion.Input("motion", tooltip="From Broadcast Ditto Motion."),
                io.Audio.Input("audio", optional=True,
                               tooltip="Passed through to the audio output (and muxed when streaming). Without it "
                                       "the 16 kHz speech the features came from is used."),
                io.Int.Input("batch_size", default=4, min=1, max=64, tooltip="Frames through the renderer at once."),
                io.Int.Input("cadence_stride", default=1, min=1, max=3,
                             tooltip="Render every n-th frame and SLERP-fill the rest: 1 = every frame, 2 = about "
                                     "twice as fast (highest recommended), 3 may miss blinks."),
                io.Boolean.Input("silence_bypass", default=False,
                                 tooltip="Show the avatar frame itself where the speech is silent (RMS below the "
                                         "threshold over the frame's 40 ms), easing in and out. Off by default: "
                                         "the later posts settled on dense evaluation (every frame rendered) "
                                         "after the bypass showed a frozen mouth around pauses."),
                io.Float.Input("silence_threshold", default=0.008, min=0.0, max=0.5, step=0.001,
                               tooltip="RMS (full scale 1.0) below which a frame counts as silent."),
                io.Int.Input("ease_frames", default=3, min=0, max=25,
                             tooltip="Frames of Hermite easing into and out of a silent stretch."),
                io.Boolean.Input("stream_to_file", default=False,
                                 tooltip="Encode frames to an MP4 in the output folder as they are rendered, so a long "
                                         "clip never exists whole in memory; the images output is then the last "
                                         "frame only."),
                io.String.Input("filename_prefix", default="broadcast/ditto",
                                tooltip="Output name inside ComfyUI's output folder when streaming."),
                io.Combo.Input("blend", options=list(PUTBACK_BLENDS), default="feather", optional=True,
                               tooltip="Putback of the rendered face: feather (upstream's feathered alpha); "
                                       "reinhard (first match the mouth's colours to the frame in Lab, mouth "
                                       "region only: no lip-colour patch, the rest as feather); poisson (OpenCV "
                                       "seamless clone of the face: no boundary ring, but it can grey the face; "
                                       "slower). Frame pixels the face mask does not reach never change."),
                io.Boolean.Input("stream_to_export", default=False, optional=True,
                                 tooltip=STREAM_TO_EXPORT_TOOLTIP),
            ],
            outputs=[io.Image.Output("images", display_name="images"),
                     io.Audio.Output("audio_out", display_name="audio"),
                     io.String.Output("path", display_name="path"),
                     types.FrameStream.Output("frames", display_name="frames", tooltip=FRAMES_TOOLTIP),
                     io.Float.Output("fps_out", display_name="fps",
                                     tooltip="The rate Ditto renders at (25 fps, its audio features' rate, whatever "
                                             "the loop's): link it to Export Video's fps.")],
            hidden=HIDDEN,
        )

    @classmethod
    def validate_inputs(cls, stream_to_file=None, filename_prefix=None, blend=None, stream_to_export=None):
        # refused when queued, before anything renders
        return validate(("blend", blend, PUTBACK_BLENDS),
                        lambda: not (stream_to_file and filename_prefix is not None) or check_prefix(filename_prefix),
                        lambda: check_one_stream(stream_to_file, stream_to_export))

    @classmethod
    def execute(cls, ditto_model, avatar, motion, batch_size, cadence_stride, silence_bypass, silence_threshold,
                ease_frames, stream_to_file, filename_prefix, audio=None, blend="feather",
                stream_to_export=False) -> io.NodeOutput:
        if audio is None:
            if motion.audio16k is None:
                raise InputError("audio", "speech (connect it, or make the motion from audio features)", "none")
            audio = make_audio(motion.audio16k, SAMPLE_RATE)
        settings = RenderSettings(batch_size=int(batch_size), stride=int(cadence_stride),
                                  silence_bypass=bool(silence_bypass), silence_threshold=float(silence_threshold),
                                  ease_frames=int(ease_frames), blend=blend)
        n = len(motion.kp_driven)
        if stream_to_export:
            # FrameStream calls this once here (so its checks fail in this node), then again for each further pass.
            frames = FrameStream(lambda: ditto_model.ready_for(int(batch_size))[0].render(
                avatar, motion, settings, comfy_bridge.progress(n), reuse_buffers=True), n, motion.fps, "Ditto Render")
            return io.NodeOutput(None, audio, "", frames, motion.fps, ui=comfy_bridge.with_audio_player(
                ui.PreviewText("\n".join([f"{n} frames at {motion.fps:g} fps, rendered as Export Video encodes them",
                                          *ditto_model.summary])), audio, cls))    # built by FrameStream's check
        pipeline, _ = ditto_model.ready_for(int(batch_size))
        progress = comfy_bridge.progress(n)
        if not stream_to_file:
            shown = comfy_bridge.with_audio_player(ui.PreviewText("\n".join(ditto_model.summary)), audio, cls)
            return io.NodeOutput(pipeline.render_frames(avatar, motion, settings, progress), audio, "", None,
                                 motion.fps, ui=shown)
        video = stream_video(cls, pipeline.render(avatar, motion, settings, progress, reuse_buffers=True), motion.fps,
                             filename_prefix, audio)
        video.ui["text"] = [*video.ui.get("text", []), *ditto_model.summary]    # what ran, and on which backend
        return io.NodeOutput(image_from_bytes(video.last_frame), audio, video.path, None, motion.fps,   # IMAGE edge
                             ui=comfy_bridge.with_audio_player(video.ui, audio, cls))


NODES = [BroadcastDittoLoader, BroadcastDittoAvatar, BroadcastDittoAudioFeatures, BroadcastDittoMotion,
         BroadcastDittoRender]
