"""The streaming video writer: frames in, chunk by chunk; one finished .mp4 out, or nothing at all.

Guarantees:
- one pass: video (H.264/HEVC) and AAC audio are encoded and muxed together into one container; no silent
  intermediate file, no second encode;
- streaming: each chunk is converted in bounded pieces and encoded before the next is asked for, so memory does not
  grow with the clip's length (a renderer can feed frames as it makes them);
- atomic: the file is written under a temporary name in the destination folder and renamed on success; any
  exception, including KeyboardInterrupt and ComfyUI's interrupt, deletes it;
- honest: the result says which encoder ran (and why, if it was a fallback), whether the size was padded to even,
  and how the audio mode changed either track's length.

    with VideoWriter(path, fps=24, audio=AudioTrack.from_comfy(audio)) as writer:
        for chunk in chunks:            # [N, H, W, 3] uint8 or float, CPU or GPU
            writer.write(chunk)
    print(writer.result.summary())
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from ..common.errors import InputError
from ..common.progress import Progress, ensure
from . import settings as encode_settings
from .audio_track import AudioMuxer, AudioTrack, planned_frames, target_samples
from .encoders import Probe, choose_encoder, warn_fallback
from .frames import DeviceYUV, HostRGB, check_chunk, is_on_gpu, yuv_format
from .subtitle_track import SubtitleMuxer, SubtitleTrack


X265_MIN_SIZE = 64
# x265 reorders at most 16 B-frames; a decode time further than that (plus the I/P anchor) behind its
# presentation time is not a real one.
X265_MAX_REORDER_FRAMES = 18


@dataclass(frozen=True)
class ExportResult:
    """What was written, and every way it differs from what was asked."""

    path: Path
    encoder: str
    fallback: Optional[str]
    width: int
    height: int
    source_width: int
    source_height: int
    frames: int
    frames_dropped: int
    frames_repeated: int
    fps: float
    pix_fmt: str
    audio_mode: Optional[str]
    audio_seconds: Optional[float]
    audio_source_seconds: Optional[float]
    subtitles: Optional[str] = None  # the soft subtitle track: "mov_text <language>, <cues> cues"

    @property
    def padded(self) -> bool:
        return (self.width, self.height) != (self.source_width, self.source_height)

    @property
    def video_seconds(self) -> float:
        return self.frames / self.fps

    def summary(self) -> str:
        parts = [f"{self.path.name}: {self.frames} frames {self.width}x{self.height} at {self.fps:g} fps "
                 f"({self.video_seconds:.2f} s), {self.encoder} {self.pix_fmt}, {encode_settings.COLOUR_DESCRIPTION}"]
        if self.fallback:
            parts.append(self.fallback)
        if self.padded:
            parts.append(f"padded from {self.source_width}x{self.source_height} to even {self.width}x{self.height}")
        if self.audio_seconds is not None:
            parts.append(f"AAC audio {self.audio_seconds:.2f} s ({self.audio_mode}; source "
                         f"{self.audio_source_seconds:.2f} s)")
        if self.frames_dropped:
            parts.append(f"{self.frames_dropped} frames after the end of the audio dropped")
        if self.frames_repeated:
            parts.append(f"last frame repeated {self.frames_repeated} times to cover the audio")
        if self.subtitles:
            parts.append(f"subtitles {self.subtitles}")
        return "; ".join(parts)


class VideoWriter:
    """Context manager that encodes chunks of frames (plus optional audio) into one MP4.

    Args:
        path: the final file (.mp4). Its folder is created; an existing file is replaced on success.
        fps: frames per second (float; NTSC rates such as 29.97 become exact 30000/1001).
        settings: encoder choices (`EncodeSettings`), checked here.
        audio: optional `AudioTrack`, muxed as AAC in the same pass.
        audio_mode: "match_video", "match_audio" or "shortest" (see `audio_track`).
        progress: optional `Progress`; stepped once per encoded frame group, raises on cancel.
        metadata: optional container tags (values that are not strings are stored as JSON).
        probe: encoder probe override (tests inject a failing one to force the fallback).
        conversion: "auto" (GPU frames converted to YUV on their device, CPU frames by swscale), "swscale", or
            "device" (the torch converter even for CPU frames).
        subtitles: optional `SubtitleTrack`, muxed as a mov_text track in the same pass.
    """

    def __init__(self, path: os.PathLike | str, fps: float, *,
                 settings: Optional[encode_settings.EncodeSettings] = None,
                 audio: Optional[AudioTrack] = None, audio_mode: str = "match_video",
                 progress: Optional[Progress] = None, metadata: Optional[Mapping[str, Any]] = None,
                 probe: Optional[Probe] = None, conversion: str = "auto",
                 subtitles: Optional[SubtitleTrack] = None):
        self.path = Path(path)
        self.rate = encode_settings.frame_rate(fps)
        self.settings = (settings or encode_settings.EncodeSettings()).check()
        if audio_mode not in encode_settings.AUDIO_MODES:
            raise InputError("audio_mode", f"one of {', '.join(encode_settings.AUDIO_MODES)}", repr(audio_mode))
        if conversion not in ("auto", "swscale", "device"):
            raise InputError("conversion", "auto, swscale or device", repr(conversion))
        self.audio = audio
        self.subtitles = subtitles.check() if subtitles is not None else None
        self._subtitle_mux: Optional[SubtitleMuxer] = None
        self.audio_mode = audio_mode
        self.progress = ensure(progress)
        self.metadata = dict(metadata or {})
        self.probe = probe
        self.conversion = conversion
        self.max_frames = planned_frames(audio, audio_mode, self.rate)
        self.tmp = self.path.parent / f".{self.path.stem}.{uuid.uuid4().hex[:8]}.partial{self.path.suffix or '.mp4'}"
        self.result: Optional[ExportResult] = None
        self._container = None
        self._stream = None
        self._audio_mux: Optional[AudioMuxer] = None
        self._converter = None
        self._size: Optional[tuple[int, int]] = None
        self._codec = None
        self._fallback: Optional[str] = None
        self._frames = 0
        self._dropped = 0
        self._last = None  # last frame as handed to PyAV, kept to extend the video in match_audio mode
        self._reformatter = None
        self._host_format = None
        self._closed = False

    # -- context manager -------------------------------------------------------------------------------------------
    def __enter__(self) -> "VideoWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    # -- public ----------------------------------------------------------------------------------------------------
    def write(self, frames: Any) -> None:
        """Encode a chunk `[N, H, W, 3|4]` (or one `[H, W, 3|4]` frame); uint8 0-255 or float 0-1, CPU or GPU."""
        if self._closed:
            raise RuntimeError("VideoWriter.write() after close()")
        chunk = check_chunk(frames)
        n = int(chunk.shape[0])
        if n == 0:
            return
        h, w = int(chunk.shape[1]), int(chunk.shape[2])
        self.progress.check()
        try:
            if self._container is None:
                self._open(w, h, gpu=is_on_gpu(chunk))
            elif (w, h) != self._size:
                raise InputError("images", f"every frame {self._size[0]}x{self._size[1]} like the first",
                                 f"a chunk of {w}x{h}")
            if self.max_frames is not None:
                room = max(0, self.max_frames - self._frames)
                self._dropped += max(0, n - room)
                chunk = chunk[:room]
            done_before = self._frames
            for frame in self._converter.frames(chunk) if chunk.shape[0] else ():
                self._encode(frame)
                if (self._frames - done_before) % 8 == 0:  # a renderer's big chunk stays cancellable
                    self.progress.check()
            if self._last is not None and self.audio is not None and self.audio_mode == "match_audio":
                self._last = self._last.copy()  # own it: it may be a view of the caller's frames or a scratch buffer
            self._feed_audio()
            self._feed_subtitles()
            self.progress.step(self._frames - done_before)
        except BaseException:
            self.abort()
            raise

    def close(self) -> ExportResult:
        """Finish the streams, write the index, rename the file into place; return the result."""
        if self._closed:
            if self.result is None:
                raise RuntimeError("VideoWriter was aborted")
            return self.result
        try:
            if self._container is None:
                raise InputError("images", "at least one frame", "an empty batch (0 frames)",
                                 "Connect a node that outputs frames.")
            repeated = 0
            if self.audio is not None and self.audio_mode == "match_audio":
                while self._frames < self.max_frames:  # extend the last frame over the rest of the audio
                    self._encode(self._last)
                    repeated += 1
                    if repeated % 24 == 0:  # keep interleaving the audio, and stay cancellable
                        self._feed_audio()
                        self.progress.check()
            self._mux_video(self._stream.encode(None))
            audio_seconds = None
            if self._audio_mux is not None:
                total = target_samples(self.audio, self.audio_mode, self._frames, self.rate)
                self._audio_mux.finish(total)
                audio_seconds = total / self.audio.sample_rate
            subtitles = None
            if self._subtitle_mux is not None:
                cues = self._subtitle_mux.finish(self._frames / float(self.rate))
                subtitles = f"mov_text {self.subtitles.language}, {cues} cues"
            self._container.close()
            self._container = None
            self._converter.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.abort()
            raise
        self._closed = True
        w, h = self._size
        self.result = ExportResult(
            path=self.path, encoder=self._codec, fallback=self._fallback,
            width=w + w % 2, height=h + h % 2, source_width=w, source_height=h,
            frames=self._frames, frames_dropped=self._dropped, frames_repeated=repeated,
            fps=float(self.rate), pix_fmt=self._stream.codec_context.pix_fmt,
            audio_mode=self.audio_mode if self.audio is not None else None, audio_seconds=audio_seconds,
            audio_source_seconds=self.audio.seconds if self.audio is not None else None, subtitles=subtitles)
        self._last = None
        return self.result

    def abort(self) -> None:
        """Stop and delete the partial file. Safe to call more than once."""
        self._closed = True
        if self._converter is not None:
            self._converter.close()
        container, self._container = self._container, None
        if container is not None:
            try:
                container.close()
            except Exception:  # the file is deleted next; a failing trailer write does not matter
                pass
        try:
            self.tmp.unlink()
        except FileNotFoundError:
            pass
        self._last = None

    # -- internals -------------------------------------------------------------------------------------------------
    def _open(self, width: int, height: int, gpu: bool) -> None:
        from .reader import quiet_ffmpeg_logs

        quiet_ffmpeg_logs()  # a threaded codec freed while FFmpeg logs through Python deadlocks (reader.py)
        device_route = self.conversion == "device" or (self.conversion == "auto" and gpu)
        bit_depth = self.settings.bit_depth
        self._converter = DeviceYUV(bit_depth) if device_route else HostRGB(bit_depth)
        host_format = yuv_format(bit_depth) if device_route else None
        choice = choose_encoder(self.settings.encoder, bit_depth, self.probe)
        requested = encode_settings.ENCODERS.get(self.settings.encoder,
                                                 "h264_nvenc" if bit_depth == 8 else "hevc_nvenc")
        if choice.skipped_reason:
            self._fallback = warn_fallback(requested, choice.codec, choice.skipped_reason)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._start(choice.codec, width, height, host_format)
        except InputError:
            raise
        except Exception as exc:
            if choice.fallback is None:
                raise
            # NVENC passed the probe but refused this stream (size, bit depth, sessions): use software instead.
            self.abort()
            self._closed = False
            self._fallback = warn_fallback(choice.codec, choice.fallback, f"{type(exc).__name__}: {exc}",
                                           probed=False)
            self._start(choice.fallback, width, height, host_format)
        self._size = (width, height)

    def _start(self, codec: str, width: int, height: int, host_format: Optional[str]) -> None:
        import av

        if codec == "libx265" and min(width, height) < X265_MIN_SIZE:
            # The libx265 bundled with PyAV corrupts the heap on frames smaller than one 64x64 CTU (seen as
            # "free(): invalid next size" at exit); refuse instead of crashing ComfyUI later.
            raise InputError("images", f"frames at least {X265_MIN_SIZE}x{X265_MIN_SIZE} for x265/HEVC",
                             f"{width}x{height}", "Use encoder x264 for frames this small.")

        plan = encode_settings.codec_plan(codec, self.settings, self.rate, host_format)
        # use_metadata_tags keeps free-form keys (ComfyUI's "prompt"/"workflow", so the file loads back as a workflow).
        flags = ("+faststart" if self.settings.faststart else "") + ("+use_metadata_tags" if self.metadata else "")
        container = av.open(str(self.tmp), "w", format="mp4", options={"movflags": flags} if flags else {})
        self._container = container
        for key, value in self.metadata.items():
            container.metadata[key] = value if isinstance(value, str) else json.dumps(value)
        stream = container.add_stream(codec, rate=self.rate)
        stream.width, stream.height = width + width % 2, height + height % 2
        stream.pix_fmt = plan.pix_fmt
        ctx = stream.codec_context
        ctx.gop_size = plan.gop
        ctx.thread_type = "AUTO"  # frame + slice threads, as the ffmpeg CLI does: ~8% faster than PyAV's default
        ctx.colorspace = encode_settings.COLORSPACE_SMPTE170M
        ctx.color_range = encode_settings.COLOR_RANGE_MPEG
        ctx.color_primaries = encode_settings.COLOR_PRIMARIES_BT709
        ctx.color_trc = encode_settings.COLOR_TRC_BT709
        stream.options = plan.options
        self._stream = stream
        if self.audio is not None:
            self._audio_mux = AudioMuxer(container, self.audio, self.settings.audio_bitrate_kbps)
        if self.subtitles is not None:
            self._subtitle_mux = SubtitleMuxer(container, self.subtitles)
        container.start_encoding()  # opens the encoders now, so a refusing NVENC is caught before any frame
        self._codec = codec
        self._host_format = host_format or self._converter.format

    def _encode(self, array) -> None:
        import av
        from av.video.reformatter import ColorRange, Colorspace, Interpolation, VideoReformatter

        frame = av.VideoFrame.from_ndarray(array, format=self._host_format)
        if self._host_format.startswith("rgb"):
            # swscale (threaded; one context reused for the whole clip) does RGB -> YUV with the documented matrix
            # and range. AREA makes chroma the mean of each 2x2 block like the GPU converter (+1.5 dB over the
            # default bilinear on the sample clip, same speed).
            if self._reformatter is None:
                self._reformatter = VideoReformatter()
            frame = self._reformatter.reformat(frame, format=self._stream.codec_context.pix_fmt,
                                               dst_colorspace=Colorspace.ITU601, dst_color_range=ColorRange.MPEG,
                                               interpolation=Interpolation.AREA, threads=0)
        frame.colorspace = encode_settings.COLORSPACE_SMPTE170M
        frame.color_range = encode_settings.COLOR_RANGE_MPEG
        frame.pts = self._frames
        self._mux_video(self._stream.encode(frame))
        self._frames += 1
        self._last = array

    def _mux_video(self, packets) -> None:
        if self._codec == "libx265":
            for packet in packets:
                # The libx265 bundled with PyAV leaves the decode time uninitialised when the stream ends inside
                # its first lookahead window (a clip of a few frames): a wild DTS makes the MP4 muxer refuse the
                # packet ("Not yet implemented in FFmpeg"), seen in about one short clip in seven. Nothing was
                # reordered then, so decode order is presentation order.
                if packet.pts is not None and packet.dts is not None:
                    behind = float((packet.pts - packet.dts) * packet.time_base * self.rate)
                    if not 0 <= behind <= X265_MAX_REORDER_FRAMES:
                        packet.dts = packet.pts
        self._container.mux(packets)

    def _feed_audio(self) -> None:
        if self._audio_mux is None:
            return
        video_samples = int(self._frames * self.audio.sample_rate / self.rate)
        self._audio_mux.feed_until(min(video_samples, self.audio.length))

    def _feed_subtitles(self) -> None:
        if self._subtitle_mux is not None:
            self._subtitle_mux.feed_until(self._frames / float(self.rate))


def split_frames(frames: Any, size: int) -> Iterator[Any]:
    """`frames` ``[N, ...]`` as views of at most `size` frames each (a batch held whole, fed as chunks)."""
    for start in range(0, int(frames.shape[0]), max(1, int(size))):
        yield frames[start:start + size]


def write_stream(path: os.PathLike | str, fps: float, chunks: Iterable[Any], *, audio: Optional[AudioTrack] = None,
                 settings: Optional[encode_settings.EncodeSettings] = None, audio_mode: str = "match_video",
                 progress: Optional[Progress] = None, metadata: Optional[Mapping[str, Any]] = None,
                 subtitles: Optional[SubtitleTrack] = None, **writer_options: Any) -> ExportResult:
    """The one way the pack writes a clip: encode every chunk `chunks` yields (``[N, H, W, 3|4]``, uint8 or float,
    CPU or GPU) with `audio`, in one pass, into `path`; return what was written.

    A renderer passes its generator of frame chunks, so no more than one chunk exists at a time; a node holding a
    whole batch passes ``split_frames(images, n)``. Anything raised while a chunk is made or encoded (a cancel
    included) deletes the partial file. `subtitles` (a `SubtitleTrack`) is muxed as a soft track in the same pass.
    `writer_options` go to `VideoWriter` (``probe``, ``conversion``).
    """
    with VideoWriter(path, fps, settings=settings, audio=audio, audio_mode=audio_mode, progress=progress,
                     metadata=metadata, subtitles=subtitles, **writer_options) as writer:
        for chunk in chunks:
            writer.write(chunk)
    return writer.result
