"""Whole clips for the Load nodes: a file's frames as one float IMAGE batch with its audio over the kept frames,
and a file's audio as ComfyUI AUDIO (the streaming reader `reader.py` does the decoding)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..common.audio import make_audio
from ..common.errors import InputError
from ..common.progress import Progress, ensure
from . import reader

SILENCE_RATE = 48000  # the rate of the silent track given to a file without audio


@dataclass(frozen=True)
class Clip:
    images: torch.Tensor     # [frames, height, width, 3] float32 0-1
    audio: dict              # ComfyUI AUDIO over the kept frames (silence when the file has none)
    fps: float
    frame_count: int


def load_clip(path: os.PathLike | str, name: str, *, frame_cap: int = 0, skip_frames: int = 0,
              target_fps: float = 0.0, progress: Optional[Progress] = None, input_name: str = "video") -> Clip:
    """Decode `path` (shown to the user as `name`) into a `Clip`: at most `frame_cap` frames (0: all) after
    `skip_frames`, resampled to `target_fps` (0: the file's rate)."""
    progress = ensure(progress)
    info = reader.probe(path, input_name)
    expected = reader.planned_count(info, frame_cap, skip_frames, target_fps)
    if expected <= 0 and info.frame_count > 0:
        raise InputError("skip_first_frames", f"fewer than the file's {info.frame_count} frames", str(skip_frames))
    # A file whose header gives no frame count (some WebM/MKV) is collected chunk by chunk instead.
    expected = max(expected, 0)
    fps = reader.output_fps(info, target_fps)
    progress.reset(max(expected, 1))
    # One float tensor filled chunk by chunk: the decoded uint8 frames are never all held at once.
    out = torch.empty((expected, info.height, info.width, 3), dtype=torch.float32)
    extra, count = [], 0
    for chunk in reader.read_frames(path, frame_cap=frame_cap, skip_frames=skip_frames, target_fps=target_fps,
                                    progress=progress, input_name=input_name):
        part = torch.from_numpy(chunk).float().div_(255.0)
        room = max(0, min(len(part), expected - count))
        out[count:count + room] = part[:room]
        if room < len(part):  # the header under-counted: keep the rest too
            extra.append(part[room:])
        count += len(part)
    if count == 0:
        raise InputError(input_name, "a file with decodable frames", f"'{name}' (no frames decoded)")
    images = torch.cat([out] + extra) if extra else out[:count]
    start = skip_frames / float(info.fps)
    decoded = reader.read_audio(path, start_seconds=start, duration_seconds=count / fps, input_name=input_name)
    if decoded is None or decoded[0].shape[1] == 0:
        audio = make_audio(np.zeros((1, max(1, round(count / fps * SILENCE_RATE))), np.float32), SILENCE_RATE)
    else:
        audio = make_audio(decoded[0], decoded[1])
    return Clip(images, audio, fps, count)


def load_audio(path: os.PathLike | str, name: str, *, start_seconds: float = 0.0,
               duration_seconds: Optional[float] = None, input_name: str = "audio_file") -> dict:
    """A file's audio (or a video's soundtrack) from `start_seconds`, `duration_seconds` long (None: to the end),
    as ComfyUI AUDIO at the file's own rate."""
    decoded = reader.read_audio(path, start_seconds=float(start_seconds), duration_seconds=duration_seconds,
                                input_name=input_name)
    if decoded is None:
        raise InputError(input_name, "a file with an audio stream", f"'{name}' (no audio)")
    samples, rate = decoded
    if samples.shape[1] == 0:
        raise InputError("start_seconds", "a start inside the file's audio", f"{start_seconds} s (past the end)")
    return make_audio(samples, rate)
