"""The node side of every .mp4 the pack writes (Export Video, MuseTalk Lip Sync and Ditto Render when streaming).

One helper so the three behave alike: the file goes to ComfyUI's output folder under the user's prefix, the
prompt and the workflow are embedded (as core's Save Video does, unless ComfyUI runs with --disable-metadata),
the node shows the video and the writer's one-line summary, and a renderer's generator is consumed chunk by chunk.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Optional

import torch
from comfy_api.latest import io, ui

from ..engines.common.progress import Progress
from ..engines.export import AudioTrack, EncodeSettings, ExportResult, next_output, write_stream
from ..engines.export import settings as encode_settings
from . import comfy_bridge

log = logging.getLogger("broadcast_avatar.export")

# What a node that writes video declares in its schema so `stream_video` can embed the workflow.
HIDDEN = [io.Hidden.prompt, io.Hidden.extra_pnginfo]

# The renderers' (MuseTalk Lip Sync, Ditto Render) hand-off of a frame stream to Export Video.
STREAM_TO_EXPORT_TOOLTIP = (
    "Hand the frames to Broadcast Export Video as a stream (connect 'frames' to its 'images'): they are rendered "
    "while the export encodes them, so a long clip never exists whole in memory, and the export's own settings, "
    "summary and video output apply. The images output is then empty.")
FRAMES_TOOLTIP = ("With stream_to_export: the frames, not rendered yet, for Broadcast Export Video's 'images' (empty "
                  "otherwise).")


def check_one_stream(stream_to_file, stream_to_export) -> None:
    """A renderer writes its own file or hands its frames to the export, not both (None: a linked input)."""
    from ..engines.common.errors import InputError

    if stream_to_file and stream_to_export:
        raise InputError("stream_to_export", "stream_to_file or stream_to_export, not both",
                         "both on", "Turn stream_to_file off when 'frames' goes to Export Video.")


@dataclass(frozen=True)
class StreamedVideo:
    """A written clip: its absolute `path`, the writer's `result`, the `last_frame` ``[1, H, W, 3]`` of the stream
    (what a renderer's images output carries when streaming) and the node's `ui` (video preview + summary text)."""

    path: str
    result: ExportResult
    last_frame: Optional[torch.Tensor]
    ui: dict


def workflow_metadata(hidden) -> dict:
    """The prompt and workflow to embed, from a node's hidden inputs (empty with --disable-metadata)."""
    from comfy.cli_args import args

    if args.disable_metadata or hidden is None:
        return {}
    metadata = dict(getattr(hidden, "extra_pnginfo", None) or {})
    prompt = getattr(hidden, "prompt", None)
    if prompt is not None:
        metadata["prompt"] = prompt
    return metadata


def stream_video(node_cls, chunks: Iterable[Any], fps: float, filename_prefix: str, audio: Optional[dict] = None,
                 *, settings: Optional[EncodeSettings] = None, audio_mode: str = "match_video",
                 progress: Optional[Progress] = None, captions: Any = None) -> StreamedVideo:
    """Encode `chunks` (frame chunks, e.g. a renderer's generator) with the ComfyUI `audio` into the next
    ``<prefix>_NNNNN.mp4`` of the output folder, with `node_cls`'s workflow metadata; return the clip.

    `captions` (Broadcast Captions' plan) burns its text into the chunks as they pass, muxes its soft track in the
    same pass and writes its sidecar files beside the MP4; they are listed in the UI output under "captions" (what
    the headless and batch runners report with the video). Everything that can be refused (encoder settings, frame
    rate, audio) is checked before the output folder is touched.
    """
    settings = (settings or EncodeSettings()).check()
    encode_settings.frame_rate(fps)
    track = AudioTrack.from_comfy(audio) if audio is not None else None
    target = next_output(comfy_bridge.output_dir(), filename_prefix, "mp4")
    last: list = []

    def remember_last(stream):
        for chunk in stream:
            last[:] = [chunk[-1:].clone()]  # a copy: a view would keep the whole chunk alive
            yield chunk

    subtitles = captions.soft_subtitles() if captions is not None else None
    if captions is not None:
        chunks = captions.frames(chunks, fps)
    result = write_stream(target.path, fps, remember_last(chunks), audio=track, settings=settings,
                          audio_mode=audio_mode, progress=progress, subtitles=subtitles,
                          metadata=workflow_metadata(getattr(node_cls, "hidden", None)))
    sidecars = captions.write_sidecars(result.path) if captions is not None else []
    summary = result.summary() + "".join(f"; {p.name}" for p in sidecars)
    log.info("%s: %s", getattr(node_cls, "__name__", "Broadcast"), summary)
    shown = dict(ui.PreviewVideo([ui.SavedResult(target.filename, target.subfolder, io.FolderType.output)]).as_dict())
    shown["text"] = [summary]
    if sidecars:
        shown["captions"] = [dict(ui.SavedResult(p.name, target.subfolder, io.FolderType.output))
                             for p in sidecars]
    return StreamedVideo(str(result.path), result, last[0] if last else None, shown)
