"""A soft subtitle track muxed into the MP4 in the export's single pass: MPEG-4 timed text (``mov_text``, the
``tx3g`` sample entry every MP4 player reads), with its language in the track header.

PyAV (>= 14) encodes text subtitles through FFmpeg's own mov_text encoder (`SubtitleCodecContext.encode_subtitle`,
fed the ASS event FFmpeg's subtitle encoders take); the encoder needs an ASS header to open, the muxer a millisecond
time base. Cues are encoded as the video passes their end (like the AAC track) so the file interleaves; the MP4
muxer fills the gaps between cues with empty samples itself. The language is an ISO 639-2 code (``spa``, ``eng``):
MP4's ``mdhd`` box stores three letters and no region.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ..common.errors import InputError

TIME_BASE = Fraction(1, 1000)
# FFmpeg's default ASS header (ff_ass_subtitle_header_default): the mov_text encoder reads its style.
ASS_HEADER = ("[Script Info]\nScriptType: v4.00+\nPlayResX: 384\nPlayResY: 288\nScaledBorderAndShadow: yes\n\n"
              "[V4+ Styles]\nFormat: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, "
              "BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, "
              "Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\nStyle: Default,Arial,16,&Hffffff,&Hffffff,"
              "&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,0\n\n[Events]\nFormat: Layer, Start, End, Style, Name, "
              "MarginL, MarginR, MarginV, Effect, Text\n").encode()
_ISO639_2 = re.compile(r"^[a-z]{3}$")


@dataclass(frozen=True)
class SubtitleTrack:
    """`cues`: ``(start s, end s, text)`` in time order, text lines separated by ``\\n``; `language` ISO 639-2."""

    cues: tuple
    language: str

    def check(self) -> "SubtitleTrack":
        if not _ISO639_2.match(self.language or ""):
            raise InputError("captions", "a three-letter ISO 639-2 language for the subtitle track (spa, eng)",
                             repr(self.language))
        for (a, b, _), (c, _, _) in zip(self.cues, self.cues[1:]):
            if c < b:
                raise InputError("captions", "captions that do not overlap in time", f"one at {c:.3f} s before "
                                 f"the previous one ends at {b:.3f} s")
        return self


def _ass_text(text: str) -> str:
    """A cue's text as an ASS event's text: lines joined by \\N, braces (ASS override blocks) left out."""
    return text.replace("{", "(").replace("}", ")").replace("\n", "\\N")


class SubtitleMuxer:
    """Adds the mov_text stream to an open container (before `start_encoding`) and muxes cues as video passes."""

    def __init__(self, container, track: SubtitleTrack):
        self.track = track.check()
        stream = container.add_stream("mov_text")
        stream.codec_context.subtitle_header = ASS_HEADER
        stream.time_base = TIME_BASE
        stream.metadata["language"] = track.language
        self.container, self.stream = container, stream
        self.next = 0    # the first cue not muxed yet
        self.muxed = 0   # cues written (a cue cut to nothing at the end is not)

    def feed_until(self, seconds: float, cut: bool = False) -> None:
        """Mux every cue that has ended by `seconds` (the video's time so far: the video may still end before a
        later cue does); with `cut` (`seconds` is the end of the video), every cue that starts before it, ended
        there at the latest."""
        from av.subtitles.subtitle import SubtitleSet

        cues = self.track.cues
        while self.next < len(cues) and cues[self.next][0] < seconds and (cut or cues[self.next][1] <= seconds):
            start, end, text = cues[self.next]
            a, b = int(round(start * 1000)), int(round((min(end, seconds) if cut else end) * 1000))
            self.next += 1
            if b <= a:
                continue
            event = SubtitleSet.create(f"{self.next - 1},0,Default,,0,0,0,,{_ass_text(text)}".encode(), 0, b - a,
                                       pts=a * 1000)  # AVSubtitle.pts counts microseconds (AV_TIME_BASE)
            packet = self.stream.codec_context.encode_subtitle(event)
            packet.stream = self.stream
            packet.time_base = TIME_BASE
            packet.pts = packet.dts = a
            packet.duration = b - a
            self.container.mux(packet)
            self.muxed += 1

    def finish(self, video_seconds: float) -> int:
        """Mux the cues left, cut at the end of the video; return how many cues the track holds."""
        self.feed_until(video_seconds, cut=True)
        return self.muxed
