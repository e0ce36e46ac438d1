"""Export nodes: Export Video (IMAGE + AUDIO -> .mp4 in the output folder), Load Video and Load Audio.

All work is in `engines/export/`: the streaming writer (NVENC with a libx264 fallback, AAC in the same pass, atomic
rename), the streaming reader, whole-clip loading and the output-path checks; `nodes/video_output.py` is the node
side of every .mp4 written. These nodes check inputs, resolve folders, report progress and convert between
ComfyUI's types and the engine's.
"""
from __future__ import annotations

import logging
import os

import folder_paths
from comfy_api.latest import InputImpl, io

from ..engines.common.errors import InputError
from ..engines.common.frames import FrameStream
from ..engines.common.images import check_image_batch
from ..engines.export import (AUDIO_MODES, ENCODER_CHOICES, PRESET_CHOICES, RATE_CONTROLS, TUNE_CHOICES, EncodeSettings,
                              check_prefix, split_frames)
from ..engines.export.clips import load_audio, load_clip
from . import comfy_bridge, core_features, types
from .inputs import validate
from .video_output import HIDDEN, stream_video

log = logging.getLogger("broadcast_avatar.export")
CATEGORY = comfy_bridge.category("export")
CHUNK_FRAMES = 8  # frames per writer call: the progress bar and the cancel check move this often
BIT_DEPTHS = ("8", "10")


def _input_files(kinds: list[str]) -> list[str]:
    """Top-level files of ComfyUI's input folder of the given kinds (where the upload button puts them)."""
    folder = folder_paths.get_input_directory()
    try:
        names = [f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f))]
    except FileNotFoundError:
        names = []
    return sorted(folder_paths.filter_files_content_types(names, kinds))


def _check_input_file(input_name: str, name) -> None:
    """A file of ComfyUI's input folder; None (a linked input) passes."""
    if name is not None and (not name or not folder_paths.exists_annotated_filepath(name)):
        raise InputError(input_name, "a file in ComfyUI's input folder", f"{name!r} (not found)", "Upload it first.")


def _file_fingerprint(name: str) -> str:
    path = folder_paths.get_annotated_filepath(name)
    st = os.stat(path)
    return f"{st.st_mtime_ns}:{st.st_size}"


class BroadcastExportVideo(io.ComfyNode):
    """Encode frames and audio into one .mp4 in a single streaming pass."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastExportVideo",
            **core_features.searchable("BroadcastExportVideo", "Broadcast Export Video"),
            category=CATEGORY,
            description="Encode IMAGE frames (+ AUDIO as AAC) into one .mp4 in the output folder in a single "
                        "streaming pass: NVENC where it works, else libx264; preview in the node.",
            inputs=[
                io.MultiType.Input(
                    io.Image.Input("images", tooltip="Frames to encode, [frames, height, width, 3], or a renderer's "
                                                     "frame stream (MuseTalk Lip Sync / Ditto Render 'frames' with "
                                                     "stream_to_export): encoded as they are rendered, never held "
                                                     "whole. Odd sizes are padded to even by repeating the last "
                                                     "row/column."),
                    types=[io.Image, types.FrameStream]),
                io.Float.Input("fps", default=25.0, min=1.0, max=240.0, step=0.001,
                               tooltip="Frames per second. 23.976, 29.97 and 59.94 are stored as exact NTSC rates. "
                                       "25: the rate MuseTalk and Ditto render at (link a renderer's fps when it "
                                       "has one). A renderer's frame stream is always written at its own rate."),
                io.String.Input("filename_prefix", default="broadcast/clip",
                                tooltip="Name inside ComfyUI's output folder; sub-folders allowed, leaving the "
                                        "folder (absolute paths, '..') is refused. A 5-digit counter is appended."),
                io.Combo.Input("encoder", options=list(ENCODER_CHOICES), default="auto",
                               tooltip="auto: NVENC H.264 (HEVC at 10 bit) where the GPU allows, else libx264/libx265 "
                                       "with one warning. Explicit NVENC choices fall back the same way."),
                io.Combo.Input("preset", options=list(PRESET_CHOICES), default="auto",
                               tooltip="Speed/quality: p1 (fastest) .. p7 (best) for NVENC, or an x264 preset; either "
                                       "kind is mapped onto the other encoder. auto: p4 / veryfast, for a file "
                                       "(p1 with tune ull is for a live stream, where latency beats size)."),
                io.Combo.Input("tune", options=list(TUNE_CHOICES), default="auto",
                               tooltip="hq: quality; ll / ull: low / ultra-low latency (x264: zerolatency). "
                                       "auto: hq on NVENC, none on x264."),
                io.Combo.Input("rate_control", options=list(RATE_CONTROLS), default="cq",
                               tooltip="cq: constant quality (NVENC cq, x264 crf) from 'quality'; vbr / cbr: from "
                                       "'bitrate_kbps'; constqp: fixed quantiser 'quality'."),
                io.Int.Input("quality", default=19, min=0, max=51, step=1,
                             tooltip="For cq and constqp: 0 best .. 51 worst. 17-23 is visually clean."),
                io.Int.Input("bitrate_kbps", default=8000, min=50, max=500000, step=50,
                             tooltip="For vbr and cbr: target video bitrate in kbit/s."),
                io.Float.Input("gop_seconds", default=1.0, min=0.04, max=60.0, step=0.01,
                               tooltip="Seconds between keyframes (default 1: seekable, stream-friendly)."),
                io.Combo.Input("bit_depth", options=list(BIT_DEPTHS), default="8",
                               tooltip="8 plays everywhere; 10 reduces banding (HEVC/x264 High 10)."),
                io.Boolean.Input("faststart", default=True,
                                 tooltip="Put the index at the front so playback starts before the download ends."),
                io.Combo.Input("audio_mode", options=list(AUDIO_MODES), default="match_video",
                               tooltip="match_video: cut/pad the audio to the video; match_audio: cut the video or "
                                       "hold its last frame to the audio's length; shortest: the shorter wins."),
                io.Int.Input("audio_bitrate_kbps", default=192, min=16, max=512, step=8,
                             tooltip="AAC bitrate in kbit/s."),
                io.Audio.Input("audio", optional=True,
                               tooltip="Optional soundtrack (one clip), muxed as AAC in the same pass."),
                types.Captions.Input("captions", optional=True,
                                     tooltip="From Broadcast Captions: its SRT + WebVTT files are written beside "
                                             "the MP4, its soft track muxed and its burned-in text drawn in this "
                                             "same pass."),
            ],
            outputs=[
                io.Video.Output("video", display_name="video", tooltip="The written file as ComfyUI VIDEO."),
                io.String.Output("path", display_name="path", tooltip="Absolute path of the written .mp4."),
            ],
            hidden=HIDDEN,
            is_output_node=True,
        )

    @classmethod
    def validate_inputs(cls, filename_prefix=None, encoder=None, preset=None, tune=None, rate_control=None,
                        bit_depth=None, audio_mode=None):
        # Only combos and the prefix are named here: 0.3.75 skips min/max checks of inputs named in this method.
        return validate(lambda: filename_prefix is None or check_prefix(filename_prefix),
                        ("encoder", encoder, ENCODER_CHOICES), ("preset", preset, PRESET_CHOICES),
                        ("tune", tune, TUNE_CHOICES), ("rate_control", rate_control, RATE_CONTROLS),
                        ("bit_depth", None if bit_depth is None else str(bit_depth), BIT_DEPTHS),
                        ("audio_mode", audio_mode, AUDIO_MODES))

    @classmethod
    def execute(cls, images, fps, filename_prefix, encoder, preset, tune, rate_control, quality, bitrate_kbps,
                gop_seconds, bit_depth, faststart, audio_mode, audio_bitrate_kbps, audio=None,
                captions=None) -> io.NodeOutput:
        note = ""
        if isinstance(images, FrameStream):
            chunks, progress = images, None       # the renderer's own progress bar moves as its frames are encoded
            # A stream is written at the rate it was rendered at: any other rate would make the video run fast or
            # slow against its soundtrack (Ditto renders at 25 fps whatever the loop's rate). A differing fps
            # input is said, not obeyed.
            if abs(float(fps) - images.fps) > 1e-3:
                note = f"fps {float(fps):g} ignored: {images.source} streams its frames at {images.fps:g} fps"
                log.warning("Export Video: %s", note)
            fps = images.fps
        else:
            images = check_image_batch(images, "images")
            chunks, progress = split_frames(images, CHUNK_FRAMES), comfy_bridge.progress(int(images.shape[0]))
        settings = EncodeSettings(encoder=encoder, preset=preset, tune=tune, rate_control=rate_control,
                                  quality=int(quality), bitrate_kbps=int(bitrate_kbps), gop_seconds=float(gop_seconds),
                                  bit_depth=int(bit_depth), faststart=bool(faststart),
                                  audio_bitrate_kbps=int(audio_bitrate_kbps))
        video = stream_video(cls, chunks, fps, filename_prefix, audio, settings=settings, audio_mode=audio_mode,
                             progress=progress, captions=captions)
        if note:
            video.ui["text"] = [f"{video.ui['text'][0]}\n{note}"]
        return io.NodeOutput(InputImpl.VideoFromFile(video.path), video.path, ui=video.ui)


class BroadcastLoadVideo(io.ComfyNode):
    """Decode a video from the input folder into frames, its audio and its rate."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastLoadVideo",
            **core_features.searchable("BroadcastLoadVideo", "Broadcast Load Video"),
            category=CATEGORY,
            description="Load a video from ComfyUI's input folder (streaming decode) as IMAGE frames, its AUDIO, "
                        "its frame rate and frame count; optional frame cap, skip and target rate.",
            inputs=[
                # The core's video upload widget (where the core has it): an upload button and a preview of the
                # chosen file in the node. Its button is saved in the UI file after the value; the runner skips it.
                io.Combo.Input("video", options=_input_files(["video"]), upload=core_features.upload_type("video"),
                               tooltip="A video file in ComfyUI's input folder: upload one with the button below "
                                       "(or copy it there and press R to refresh the list)."),
                io.Int.Input("frame_cap", default=0, min=0, max=100000, step=1,
                             tooltip="Keep at most this many frames; 0 keeps all."),
                io.Int.Input("skip_first_frames", default=0, min=0, max=1000000, step=1,
                             tooltip="Source frames to drop from the start (the audio starts there too)."),
                io.Float.Input("target_fps", default=0.0, min=0.0, max=240.0, step=0.001,
                               tooltip="Resample to this rate by repeating/dropping frames; 0 keeps the file's rate."),
            ],
            outputs=[
                io.Image.Output("images", display_name="images"),
                io.Audio.Output("audio", display_name="audio",
                                tooltip="The file's audio over the kept frames (silence if it has none)."),
                io.Float.Output("fps", display_name="fps"),
                io.Int.Output("frame_count", display_name="frame_count"),
            ],
        )

    @classmethod
    def validate_inputs(cls, video=None):
        return validate(lambda: _check_input_file("video", video))

    @classmethod
    def fingerprint_inputs(cls, video, **_):
        return _file_fingerprint(video)

    @classmethod
    def execute(cls, video, frame_cap, skip_first_frames, target_fps) -> io.NodeOutput:
        clip = load_clip(folder_paths.get_annotated_filepath(video), video, frame_cap=int(frame_cap),
                         skip_frames=int(skip_first_frames), target_fps=float(target_fps),
                         progress=comfy_bridge.progress(1), input_name="video")
        return io.NodeOutput(clip.images, clip.audio, clip.fps, clip.frame_count,
                             ui=comfy_bridge.with_audio_player(None, clip.audio, cls))


class BroadcastLoadAudio(io.ComfyNode):
    """Decode an audio file (or a video's soundtrack) from the input folder."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="BroadcastLoadAudio",
            **core_features.searchable("BroadcastLoadAudio", "Broadcast Load Audio"),
            category=CATEGORY,
            description="Load audio (or a video's soundtrack) from ComfyUI's input folder as AUDIO, at its own "
                        "sample rate, optionally a time range.",
            inputs=[
                # The editor's own audio upload widget only serves core's Load Audio (an input named "audio" with its
                # player), so the pack's web extension (web/js/broadcast_media.js) adds the button and the player.
                io.Combo.Input("audio_file", options=_input_files(["audio", "video"]),
                               tooltip="An audio or video file in ComfyUI's input folder: upload one with the button "
                                       "below (or copy it there and press R to refresh the list)."),
                io.Float.Input("start_seconds", default=0.0, min=0.0, max=86400.0, step=0.01,
                               tooltip="Skip this much from the start."),
                io.Float.Input("duration_seconds", default=0.0, min=0.0, max=86400.0, step=0.01,
                               tooltip="Keep this much; 0 keeps everything after the start."),
            ],
            outputs=[io.Audio.Output("audio", display_name="audio")],
        )

    @classmethod
    def validate_inputs(cls, audio_file=None):
        return validate(lambda: _check_input_file("audio_file", audio_file))

    @classmethod
    def fingerprint_inputs(cls, audio_file, **_):
        return _file_fingerprint(audio_file)

    @classmethod
    def execute(cls, audio_file, start_seconds, duration_seconds) -> io.NodeOutput:
        return io.NodeOutput(load_audio(folder_paths.get_annotated_filepath(audio_file), audio_file,
                                        start_seconds=float(start_seconds),
                                        duration_seconds=float(duration_seconds) or None, input_name="audio_file"))


NODES = [BroadcastExportVideo, BroadcastLoadVideo, BroadcastLoadAudio]
