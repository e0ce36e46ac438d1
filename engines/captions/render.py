"""The caption node's one engine call and what Export Video does with its result.

`plan_captions` checks the timing against the final audio, lays the captions out by a profile and returns a
`CaptionPlan`: the cues plus the outputs asked for. Export Video hands the plan its frame chunks (burned-in
captions, streaming), its soft track (`SubtitleTrack`, muxed in the export's single pass) and, once the MP4 is in
place, the video's path (the SRT and WebVTT sidecars, ``<video>.<lang>.srt`` / ``.vtt`` beside it, each written
under a temporary name and renamed, so no half-written file is ever seen).
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from ..common.errors import InputError
from ..export.subtitle_track import SubtitleTrack
from .burn import STYLES, CaptionBurner
from .layout import LayoutSettings, layout
from .srt import srt_text
from .timing import CaptionTiming
from .webvtt import webvtt_text

# ISO 639-1 (what the script's language is given as) -> ISO 639-2 (what an MP4 track header stores).
ISO639_2 = {"es": "spa", "en": "eng"}


@dataclass(frozen=True)
class CaptionPlan:
    cues: tuple              # layout.Cue, in time order
    language: str            # ISO 639-1 (es, en)
    sidecars: bool = True    # SRT + WebVTT beside the MP4
    soft_track: bool = True  # mov_text track inside the MP4
    burn_in: bool = False    # drawn onto the frames
    burn_style: str = "outline"
    profile: str = "standard"  # the layout profile (its limits are what caption QC checks)
    max_cps: float = 0.0     # the reading-speed limit asked for (0: the profile's)
    fps: float = 25.0        # the frame grid the captions were timed on

    def soft_subtitles(self) -> Optional[SubtitleTrack]:
        if not self.soft_track:
            return None
        return SubtitleTrack(tuple((c.start, c.end, c.text) for c in self.cues), ISO639_2[self.language])

    def frames(self, chunks: Iterable[Any], fps: float) -> Iterable[Any]:
        return CaptionBurner(self.cues, fps, self.burn_style).frames(chunks) if self.burn_in else chunks

    def sidecar_names(self, video_name: str) -> list:
        stem = Path(video_name).stem
        return [f"{stem}.{self.language}.srt", f"{stem}.{self.language}.vtt"] if self.sidecars else []

    def write_sidecars(self, video_path: os.PathLike | str) -> list:
        """Write the SRT and WebVTT files beside `video_path`; return their paths."""
        video = Path(video_path)
        texts = (srt_text(self.cues), webvtt_text(self.cues, self.language))
        written = []
        for name, text in zip(self.sidecar_names(video.name), texts):
            path = video.with_name(name)
            tmp = path.with_name(f".{name}.{uuid.uuid4().hex[:8]}.partial")
            try:
                tmp.write_text(text, encoding="utf-8", newline="\n")
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            written.append(path)
        return written


def plan_captions(timing: CaptionTiming, settings: LayoutSettings, *, audio_samples: Optional[int] = None,
                  audio_rate: Optional[int] = None, sidecars: bool = True, soft_track: bool = True,
                  burn_in: bool = False, burn_style: str = "outline",
                  words: Optional[Callable[[], Sequence]] = None) -> CaptionPlan:
    """Lay out `timing` by `settings` after checking it belongs to the given audio; see the module docstring.
    `words`, when given, returns ASR word times (``(start, end, word)``, `refine.whisper_words`) that refine the
    caption starts; it is called only once everything else has been checked."""
    if not isinstance(timing, CaptionTiming):
        raise InputError("caption_timing", "the caption_timing output of an OmniVoice Speak or Dialogue node",
                         type(timing).__name__)
    if audio_samples is not None:
        timing.check_audio(int(audio_samples), int(audio_rate))
    if burn_style not in STYLES:
        raise InputError("burn_style", f"one of {', '.join(STYLES)}", repr(burn_style))
    if not (sidecars or soft_track or burn_in):
        raise InputError("outputs", "at least one of sidecars, soft_track or burn_in", "all off")
    if soft_track:
        from av.subtitles.codeccontext import SubtitleCodecContext

        if not hasattr(SubtitleCodecContext, "encode_subtitle"):
            raise InputError("soft_track", "a PyAV that encodes subtitles (SubtitleCodecContext.encode_subtitle)",
                             "an older PyAV", "Update it (python -m pip install -U av), or turn soft_track off "
                             "and keep the sidecar files.")
    settings.check()
    cues = tuple(layout(timing, settings, words() if words is not None else ()))
    return CaptionPlan(cues, settings.language, bool(sidecars), bool(soft_track), bool(burn_in), burn_style,
                       settings.profile, float(settings.max_cps), float(settings.fps))
