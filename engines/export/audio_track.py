"""The soundtrack of an export: checked samples, the length rule of each audio mode, and AAC muxed as video goes.

Audio is small next to video (30 s of 48 kHz stereo float is 11 MB), so the whole track is held; it is encoded in
step with the video (after each chunk, up to the video's current time) so the MP4 interleaves both and nothing is
encoded twice or written to a side file.

Audio modes (durations agree within one video frame in all three):
- match_video: the audio is cut or padded with silence to the video's length.
- match_audio: the video is cut to the audio's length, or extended by repeating its last frame.
- shortest: whichever is shorter sets the length.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

import numpy as np

from ..common.audio import check_audio, resample
from ..common.errors import InputError

# The soundtrack is always AAC at 48 kHz, whatever rate the AUDIO comes at (OmniVoice speaks at 24 kHz, a voice clip
# may be 44.1 kHz): 48 kHz is the broadcast and streaming delivery rate (EBU R128 / the QC node's default), so the
# pack resamples instead of asking the user to wire a resampler. AAC could store the other rates; a delivery should
# not.
DELIVERY_RATE = 48000


@dataclass(frozen=True)
class AudioTrack:
    """`samples` float32 `[channels, samples]` (1 or 2 channels) at `sample_rate` (always `DELIVERY_RATE`)."""

    samples: np.ndarray
    sample_rate: int

    @property
    def length(self) -> int:
        return int(self.samples.shape[1])

    @property
    def seconds(self) -> float:
        return self.length / self.sample_rate

    @classmethod
    def from_comfy(cls, audio: Any, input_name: str = "audio") -> "AudioTrack":
        """From ComfyUI's AUDIO dict. One clip only (batch 1); more than 2 channels are mixed down to stereo."""
        wave, sr = check_audio(audio, input_name)
        if wave.shape[0] != 1:
            raise InputError(input_name, "one clip (waveform batch size 1)", f"a batch of {wave.shape[0]} clips",
                             "Pick one clip before exporting.")
        return cls.from_array(wave[0], sr, input_name)

    @classmethod
    def from_array(cls, samples, sample_rate: int, input_name: str = "audio") -> "AudioTrack":
        import torch

        wave = torch.as_tensor(np.asarray(samples) if not isinstance(samples, torch.Tensor) else samples)
        wave = wave.detach().to("cpu", torch.float32)
        if wave.dim() == 1:
            wave = wave[None]
        if wave.dim() != 2 or wave.shape[1] == 0 or wave.shape[0] == 0:
            raise InputError(input_name, "samples shaped [channels, samples] with at least one sample",
                             f"shape {tuple(wave.shape)}")
        if wave.shape[0] > 2:  # AAC in MP4 could carry 5.1, but players and the preview expect mono/stereo
            wave = torch.stack((wave[0::2].mean(0), wave[1::2].mean(0)))
        sr = int(sample_rate)
        if sr != DELIVERY_RATE:
            wave, sr = resample(wave, sr, DELIVERY_RATE), DELIVERY_RATE
        wave = torch.nan_to_num(wave, nan=0.0).clamp_(-1.0, 1.0)
        return cls(np.ascontiguousarray(wave.numpy()), sr)


def planned_frames(track: Optional[AudioTrack], mode: str, fps: Fraction) -> Optional[int]:
    """The most video frames to encode, or None for "all that arrive".

    match_audio and shortest stop the video once it covers the audio: ceil(audio * fps) frames end less than one
    frame after the last sample.
    """
    if track is None or mode == "match_video":
        return None
    return max(1, math.ceil(track.length * fps / track.sample_rate))


def target_samples(track: AudioTrack, mode: str, frames: int, fps: Fraction) -> int:
    """How many samples the finished file holds, given the number of video frames written."""
    video = round(frames * track.sample_rate / fps)
    if mode == "match_video":
        return int(video)
    if mode == "match_audio":
        return track.length
    return int(min(video, track.length))


class AudioMuxer:
    """Encodes an `AudioTrack` into an AAC stream of an open container, in step with the video."""

    def __init__(self, container, track: AudioTrack, bitrate_kbps: int):
        self.track = track
        layout = "mono" if track.samples.shape[0] == 1 else "stereo"
        self.layout = layout
        self.stream = container.add_stream("aac", rate=track.sample_rate, layout=layout)
        self.stream.bit_rate = int(bitrate_kbps) * 1000
        self.container = container
        self.fed = 0  # samples handed to the encoder so far (silence included)

    def feed_until(self, end: int, limit: Optional[int] = None) -> None:
        """Encode samples up to index `end`; beyond the track (or `limit`) the gap is silence."""
        import av

        limit = self.track.length if limit is None else min(limit, self.track.length)
        step = self.track.sample_rate  # one second per frame handed over: bounded temporaries
        while self.fed < end:
            n = min(step, end - self.fed)
            real = max(0, min(n, limit - self.fed))
            block = np.zeros((self.track.samples.shape[0], n), np.float32)
            if real:
                block[:, :real] = self.track.samples[:, self.fed:self.fed + real]
            frame = av.AudioFrame.from_ndarray(block, format="fltp", layout=self.layout)
            frame.sample_rate = self.track.sample_rate
            frame.pts = self.fed
            frame.time_base = Fraction(1, self.track.sample_rate)
            self.container.mux(self.stream.encode(frame))
            self.fed += n

    def finish(self, total: int) -> None:
        """Bring the stream to exactly `total` samples (real audio, then silence) and flush the encoder."""
        self.feed_until(total, limit=total)
        self.container.mux(self.stream.encode(None))
