"""Streaming decode for the Load nodes: frames in bounded chunks, audio as float samples.

Frames are decoded with FFmpeg's frame threads and converted to RGB by swscale with accurate rounding (its fast
path is off by up to 3 levels on flat colours), honouring the file's own matrix and range tags. Selection happens
while decoding, so a frame cap or a lower target frame rate never decodes more than it keeps into memory:
- `skip_frames` source frames are dropped first;
- `target_fps` (0 = the file's rate) picks, for each output time k/target_fps, the source frame shown at that
  time (frames repeat when the target is faster, are skipped when it is slower);
- `frame_cap` (0 = no cap) stops after that many output frames.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterator, Optional

import numpy as np

from ..common.errors import InputError
from ..common.progress import Progress, ensure


@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    fps: Fraction
    frame_count: int        # from the container's header, or estimated from its duration
    duration: float
    has_audio: bool


def quiet_ffmpeg_logs() -> None:
    """Route FFmpeg's log messages to PyAV's no-op callback (PyAV's own default) before a codec is opened.

    Importing torchvision sets PyAV's level to ERROR (torchvision/io/video.py), which routes every FFmpeg message
    through a Python callback that takes the GIL. A threaded decoder's frame thread that logs while this thread frees
    the codec (a Stream's dealloc joins its threads with the GIL held, e.g. when a frame cap ends the decode early)
    then waits for the GIL forever: the server hangs. Measured: the memory test's server stopped in 4 of about 16
    wardrobe passes, gdb showing thread "av:h264:df0" in PyAV's log callback waiting for the GIL and the worker in
    avcodec_free_context. Errors still raise with FFmpeg's error code."""
    import av.logging

    if av.logging.get_level() is not None:
        av.logging.set_level(None)


def _open(path: os.PathLike | str, input_name: str):
    import av

    quiet_ffmpeg_logs()
    if not os.path.isfile(path):
        raise InputError(input_name, "an existing media file", f"'{os.path.basename(str(path))}' (not found)")
    try:
        return av.open(str(path))
    except Exception as exc:
        given = f"'{os.path.basename(str(path))}' ({exc})"
        raise InputError(input_name, "a media file FFmpeg can read", given) from exc


def _decode(container, stream, path, input_name: str) -> Iterator:
    """`container.decode(stream)`, with FFmpeg's decoding errors (a corrupt or truncated file that opened) as an
    `InputError` naming the input and the file, not PyAV's raw error."""
    import av

    frames = container.decode(stream)
    count = 0
    while True:
        try:
            frame = next(frames)
        except StopIteration:
            return
        except av.FFmpegError as exc:
            given = f"'{os.path.basename(str(path))}' (decoding failed after {count} {stream.type} frames: {exc})"
            raise InputError(input_name, "a media file FFmpeg can decode", given,
                             "Re-export the file, or pick another one.") from exc
        count += 1
        yield frame


def probe(path: os.PathLike | str, input_name: str = "video") -> VideoInfo:
    with _open(path, input_name) as container:
        if not container.streams.video:
            raise InputError(input_name, "a file with a video stream", f"'{os.path.basename(str(path))}' (no video)")
        stream = container.streams.video[0]
        fps = stream.average_rate or stream.guessed_rate or Fraction(25)
        duration = (float(stream.duration * stream.time_base) if stream.duration
                    else (container.duration or 0) / 1_000_000)
        frames = stream.frames or int(round(duration * fps))
        return VideoInfo(stream.codec_context.width, stream.codec_context.height, Fraction(fps), int(frames),
                         duration, bool(container.streams.audio))


def planned_count(info: VideoInfo, frame_cap: int = 0, skip_frames: int = 0, target_fps: float = 0.0) -> int:
    """How many frames `read_frames` will yield (exact for constant-rate files)."""
    left = max(0, info.frame_count - skip_frames)
    if target_fps and target_fps > 0:
        left = math.ceil(left * target_fps / float(info.fps) - 1e-9)
    return min(left, frame_cap) if frame_cap > 0 else left


def output_fps(info: VideoInfo, target_fps: float = 0.0) -> float:
    return float(target_fps) if target_fps and target_fps > 0 else float(info.fps)


def read_frames(path: os.PathLike | str, *, frame_cap: int = 0, skip_frames: int = 0, target_fps: float = 0.0,
                chunk_frames: int = 16, progress: Optional[Progress] = None,
                input_name: str = "video") -> Iterator[np.ndarray]:
    """Yield uint8 `[k, H, W, 3]` RGB chunks of at most `chunk_frames` frames."""
    from av.video.reformatter import ColorRange, Interpolation, VideoReformatter

    progress = ensure(progress)
    reformatter = VideoReformatter()
    flags = Interpolation.BILINEAR | Interpolation.ACCURATE_RND
    with _open(path, input_name) as container:
        if not container.streams.video:
            raise InputError(input_name, "a file with a video stream", f"'{os.path.basename(str(path))}' (no video)")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        src_fps = float(stream.average_rate or stream.guessed_rate or 25)
        step = 1.0 / target_fps if target_fps and target_fps > 0 else None
        buf: list[np.ndarray] = []
        emitted = 0
        index = -1
        for frame in _decode(container, stream, path, input_name):
            index += 1
            if index < skip_frames:
                continue
            # The source frame is on screen from t to t + 1/src_fps; output k shows whatever is on screen at k*step.
            t = (index - skip_frames) / src_fps
            repeats = 1 if step is None else max(0, math.ceil((t + 1.0 / src_fps) / step - 1e-9) - emitted)
            if repeats == 0:
                continue
            rng = frame.color_range if frame.color_range in (ColorRange.MPEG, ColorRange.JPEG) else ColorRange.MPEG
            rgb = reformatter.reformat(frame, format="gbrp", interpolation=flags, src_color_range=rng,
                                       dst_color_range=ColorRange.JPEG).to_ndarray()
            for _ in range(repeats):
                if frame_cap > 0 and emitted >= frame_cap:
                    break
                buf.append(rgb)
                emitted += 1
                if len(buf) >= chunk_frames:
                    yield np.stack(buf)
                    progress.step(len(buf))
                    buf = []
            if frame_cap > 0 and emitted >= frame_cap:
                break
        if buf:
            yield np.stack(buf)
            progress.step(len(buf))


def read_audio(path: os.PathLike | str, *, start_seconds: float = 0.0, duration_seconds: Optional[float] = None,
               input_name: str = "audio") -> Optional[tuple[np.ndarray, int]]:
    """Decode the first audio stream to float32 `[channels, samples]` at its own rate; None if there is none."""
    import av

    with _open(path, input_name) as container:
        if not container.streams.audio:
            return None
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate or stream.rate
        channels = stream.codec_context.layout.nb_channels if stream.codec_context.layout else 2
        layout = "mono" if channels == 1 else "stereo"
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        first = int(round(start_seconds * rate))
        last = None if duration_seconds is None else first + int(round(duration_seconds * rate))
        pieces: list[np.ndarray] = []
        position = 0  # samples decoded so far (from the first decoded sample, taken as time 0)
        for frame in _decode(container, stream, path, input_name):
            for out in resampler.resample(frame):
                pieces, position = _keep(pieces, out.to_ndarray(), position, first, last)
            if last is not None and position >= last:
                break
        for out in resampler.resample(None):
            pieces, position = _keep(pieces, out.to_ndarray(), position, first, last)
    if not pieces:
        return np.zeros((1 if layout == "mono" else 2, 0), np.float32), rate
    return np.ascontiguousarray(np.concatenate(pieces, axis=1), dtype=np.float32), rate


def _keep(pieces, block: np.ndarray, position: int, first: int, last: Optional[int]):
    n = block.shape[1]
    lo = max(first - position, 0)
    hi = n if last is None else min(n, last - position)
    if hi > lo:
        pieces.append(block[:, lo:hi])
    return pieces, position + n
