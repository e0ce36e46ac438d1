"""What QC reads: a media file streamed packet by packet, or frames + audio already in memory.

A file is demuxed once; video packets are decoded with FFmpeg's frame threads and each frame's Y, U, V planes are
read in place (no RGB conversion, no copy of the picture beyond the analysis grid), audio packets are decoded and
fed to the meter as they come. Only a handful of evenly spaced frames are converted to RGB, small, for the contact
sheet. Memory therefore does not grow with the clip beyond the per-frame numbers the meters keep.

Frames handed over as an IMAGE batch are converted to Y/UV with the export writer's own BT.601 limited-range
converter, so they are measured exactly as they would be encoded.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..common.errors import InputError
from ..common.progress import Progress, ensure
from .audio_meter import AudioMeasurements, AudioMeter
from .picture_meter import LevelWindow, PictureMeasurements, PictureMeter, level_window

THUMBNAILS = 6
THUMB_HEIGHT = 160
CHUNK = 16  # frames per progress step

# FFmpeg's AVColorRange / AVColorSpace / AVColorPrimaries / AVColorTransferCharacteristic names.
RANGE_NAMES = {0: "unspecified", 1: "tv", 2: "pc"}
MATRIX_NAMES = {0: "rgb", 1: "bt709", 2: "unspecified", 4: "fcc", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m",
                8: "ycgco", 9: "bt2020nc", 10: "bt2020c"}
PRIMARIES_NAMES = {1: "bt709", 2: "unspecified", 4: "bt470m", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m",
                   8: "film", 9: "bt2020", 12: "smpte432"}
TRANSFER_NAMES = {1: "bt709", 2: "unspecified", 4: "gamma22", 5: "gamma28", 6: "smpte170m", 7: "smpte240m",
                  8: "linear", 13: "iec61966-2-1", 14: "bt2020-10", 15: "bt2020-12", 16: "smpte2084",
                  18: "arib-std-b67"}
PLANAR = {"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "yuv420p10le", "yuv422p10le",
          "yuv444p10le"}


@dataclass
class SourceInfo:
    kind: str                          # "file" or "frames"
    name: str
    width: int
    height: int
    fps: float
    video_seconds: float               # declared (container) or given
    audio_seconds: Optional[float]     # declared (container) or given; None without audio
    decoded_frames: int = 0
    decoded_audio_seconds: Optional[float] = None
    video_codec: str = ""
    audio_codec: str = ""
    pix_fmt: str = ""
    bit_depth: int = 8
    sample_rate: Optional[int] = None
    channels: Optional[int] = None
    layout: str = ""
    tags: Optional[dict] = None        # stream colour tags; None for frames (no file)
    frame_tags: Optional[dict] = None  # the same tags as the first decoded frame carries

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class Measured:
    info: SourceInfo
    picture: PictureMeasurements
    audio: Optional[AudioMeasurements]
    window: LevelWindow
    notes: list = field(default_factory=list)


def _tags(obj) -> dict:
    def name(table, value):
        return table.get(int(value), f"reserved({int(value)})") if value is not None else "unspecified"

    return {"range": name(RANGE_NAMES, obj.color_range), "matrix": name(MATRIX_NAMES, obj.colorspace),
            "primaries": name(PRIMARIES_NAMES, obj.color_primaries), "transfer": name(TRANSFER_NAMES, obj.color_trc)}


def _thumb_indices(total: int) -> set:
    if total <= 0:
        return {0}
    return {min(total - 1, int(round((i + 0.5) * total / THUMBNAILS))) for i in range(THUMBNAILS)}


def _open(source, input_name: str):
    import av

    from ..export.reader import quiet_ffmpeg_logs

    quiet_ffmpeg_logs()  # a threaded decoder freed while FFmpeg logs through Python deadlocks (reader.py)
    label = os.path.basename(str(source)) if isinstance(source, (str, os.PathLike)) else "the video stream"
    if isinstance(source, (str, os.PathLike)) and not os.path.isfile(source):
        raise InputError(input_name, "an existing media file", f"'{label}' (not found)")
    if isinstance(source, io.IOBase):
        source.seek(0)
    try:
        return av.open(source if not isinstance(source, os.PathLike) else str(source)), label
    except Exception as exc:
        raise InputError(input_name, "a media file FFmpeg can read", f"'{label}' ({exc})") from exc


def _planes(frame) -> tuple[np.ndarray, tuple]:
    """(Y, chroma planes) of a decoded frame as numpy views of FFmpeg's buffers (rows cut to the picture width)."""
    fmt = frame.format.name
    if fmt not in PLANAR and fmt != "nv12":
        frame = frame.reformat(format="yuv444p" if frame.format.name.startswith(("rgb", "bgr", "gbr")) else "yuv420p")
        fmt = frame.format.name
    dtype = np.uint16 if fmt.endswith("10le") else np.uint8
    size = np.dtype(dtype).itemsize
    views = []
    for plane in frame.planes:
        arr = np.frombuffer(plane, dtype=dtype).reshape(plane.height, plane.line_size // size)
        views.append(arr[:, : plane.width * (2 if fmt == "nv12" and len(views) == 1 else 1)])
    return views[0], tuple(views[1:])


def measure_file(source, limits, *, keep_mono: bool = False, progress: Optional[Progress] = None,
                 input_name: str = "video") -> Measured:
    """Stream one file through both meters."""
    import av

    progress = ensure(progress)
    container, label = _open(source, input_name)
    with container:
        if not container.streams.video:
            raise InputError(input_name, "a file with a video stream", f"'{label}' (no video)")
        vs = container.streams.video[0]
        vs.thread_type = "AUTO"
        cc = vs.codec_context
        fps = float(vs.average_rate or vs.guessed_rate or 25)
        v_seconds = (float(vs.duration * vs.time_base) if vs.duration else
                     (vs.frames / fps if vs.frames else (container.duration or 0) / 1e6))
        expected = vs.frames or int(round(v_seconds * fps))
        pix_fmt = cc.format.name if cc.format else ""
        depth = 10 if "10" in pix_fmt else 8
        tags = _tags(cc)
        window = level_window(tags["range"] == "pc", depth, limits.luma_min_percent, limits.luma_max_percent,
                              limits.chroma_max_percent, limits.black_luma_percent)
        picture = PictureMeter(cc.width, cc.height, window, depth, expected)
        streams = [vs]
        audio_meter = resampler = None
        info = SourceInfo("file", label, cc.width, cc.height, fps, v_seconds, None, video_codec=cc.name,
                          pix_fmt=pix_fmt, bit_depth=depth, tags=tags)
        if container.streams.audio:
            ast = container.streams.audio[0]
            acc = ast.codec_context
            channels = acc.layout.nb_channels if acc.layout else 1
            info.audio_seconds = (float(ast.duration * ast.time_base) if ast.duration else
                                  (container.duration or 0) / 1e6)
            info.audio_codec, info.sample_rate, info.channels = acc.name, acc.sample_rate, channels
            info.layout = acc.layout.name if acc.layout else ""
            audio_meter = AudioMeter(acc.sample_rate, channels, keep_mono=keep_mono)
            resampler = av.AudioResampler(format="fltp", layout=acc.layout, rate=acc.sample_rate)
            streams.append(ast)
        thumbs = _thumb_indices(expected)
        progress.reset(max(expected, 1))
        audio_stream = streams[1] if len(streams) > 1 else None
        for packet in container.demux(*streams):
            if packet.stream is audio_stream:
                for frame in packet.decode():
                    for out in resampler.resample(frame):
                        audio_meter.feed(out.to_ndarray())
                continue
            for frame in packet.decode():
                _video_frame(frame, picture, info, thumbs, progress)
        if resampler is not None:
            for out in resampler.resample(None):
                audio_meter.feed(out.to_ndarray())
        progress.step(picture.count % CHUNK)
    audio = audio_meter.finish() if audio_meter else None
    if audio is not None:
        info.decoded_audio_seconds = audio.seconds
    info.decoded_frames = picture.count
    if picture.count == 0:
        raise InputError(input_name, "a file with decodable frames", f"'{label}' (no frames decoded)")
    return Measured(info, picture.finish(), audio, window)


def _video_frame(frame, picture: PictureMeter, info: SourceInfo, thumbs: set, progress: Progress) -> None:
    index = picture.count
    if index == 0:
        info.frame_tags = _tags(frame)
    y, chroma = _planes(frame)
    picture.add(y, chroma)
    if index in thumbs:
        h = THUMB_HEIGHT
        w = max(2, int(round(frame.width * h / max(frame.height, 1))) // 2 * 2)
        picture.add_thumbnail(index, frame.to_ndarray(format="rgb24", width=w, height=h))
    if picture.count % CHUNK == 0:
        progress.step(CHUNK)


def measure_frames(images, fps: float, audio: Optional[tuple[np.ndarray, int]], limits, *,
                   keep_mono: bool = False, progress: Optional[Progress] = None, name: str = "frames") -> Measured:
    """Measure an IMAGE batch `[N, H, W, 3]` (tensor or array, 0-1 floats or uint8) and optional `(samples [C, T],
    rate)` audio, as the export writer would encode them (BT.601 limited range, 8 bit)."""
    import torch

    from ..export.frames import rgb_to_yuv420

    progress = ensure(progress)
    frames = images if isinstance(images, torch.Tensor) else torch.as_tensor(np.asarray(images))
    n, h, w = (int(d) for d in frames.shape[:3])
    h2, w2 = h + h % 2, w + w % 2
    window = level_window(False, 8, limits.luma_min_percent, limits.luma_max_percent, limits.chroma_max_percent,
                          limits.black_luma_percent)
    picture = PictureMeter(w2, h2, window, 8, n)
    info = SourceInfo("frames", name, w2, h2, float(fps), n / float(fps), None, pix_fmt="nv12", bit_depth=8)
    thumbs = _thumb_indices(n)
    progress.reset(max(n, 1))
    for start in range(0, n, CHUNK):
        chunk = frames[start:start + CHUNK]
        yuv = rgb_to_yuv420(chunk, 8).cpu().numpy()
        for i in range(yuv.shape[0]):
            picture.add(yuv[i, :h2], (yuv[i, h2:],))
            if start + i in thumbs:
                step = max(1, h // THUMB_HEIGHT)
                rgb = chunk[i, ::step, ::step, :3].float().cpu().numpy()
                rgb = rgb * 255.0 if not chunk.dtype == torch.uint8 else rgb
                picture.add_thumbnail(start + i, np.clip(np.nan_to_num(rgb) + 0.5, 0, 255).astype(np.uint8))
        progress.step(len(chunk))
    audio_m = None
    if audio is not None:
        samples, rate = audio
        samples = np.asarray(samples, dtype=np.float32)
        samples = samples[None] if samples.ndim == 1 else samples
        meter = AudioMeter(rate, samples.shape[0], keep_mono=keep_mono)
        step = int(rate)
        for i in range(0, samples.shape[1], step):
            meter.feed(samples[:, i:i + step])
        audio_m = meter.finish()
        info.audio_seconds = info.decoded_audio_seconds = audio_m.seconds
        info.sample_rate, info.channels = int(rate), samples.shape[0]
        info.layout = {1: "mono", 2: "stereo"}.get(samples.shape[0], f"{samples.shape[0]} channels")
        info.audio_codec = "pcm (in memory)"
    info.decoded_frames = picture.count
    return Measured(info, picture.finish(), audio_m, window, notes=[
        "frames measured as the export writer encodes them (BT.601 limited range); no file, so its colour tags "
        "and declared durations are not checked"])
