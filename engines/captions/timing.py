"""When each piece of the script is heard in the final audio: what the TTS nodes hand to the caption node.

The TTS engines know every clause they generated and where its clip landed after the joins (crossfades at zero
crossings, breaths before long-clause cuts, turns of a dialogue): `ClauseSpan` records that to the sample, with the
written text it reads. Speed changes are inside the clips (OmniVoice generates at the asked rate), and Audio Master
changes no sample positions (its filters are zero phase, its gains sample-wise), so the same sample numbers hold in
the mastered track; `CaptionTiming.check_audio` refuses audio of another length (a different take, a trimmed file)
rather than caption it wrongly. Times are kept as sample numbers at the TTS rate and turned into seconds only when
cues are made, so no rounding accumulates across a long script.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..common.errors import InputError


@dataclass(frozen=True)
class ClauseSpan:
    start: int          # output sample where the clause's clip begins (its leading quiet included)
    end: int            # one past its last sample still in the output
    voice_start: int    # first sample of the clause above the quiet level (speech onset)
    voice_end: int      # one past its last sample above it
    written: str        # the script's own text this clause reads; "" continues the previous clause's text
    spoken: str         # the words the voice read
    speaker: str = ""   # dialogue: the speaker's tag


@dataclass(frozen=True)
class CaptionTiming:
    sample_rate: int
    length: int         # samples of the audio these times belong to
    language: str       # the script's language code (es, en, ...)
    spans: tuple        # ClauseSpan, in speaking order

    @property
    def duration(self) -> float:
        return self.length / self.sample_rate

    def check_audio(self, samples: int, sample_rate: int, input_name: str = "audio") -> None:
        """Refuse audio whose length differs from the timed audio by more than one sample (at the lower rate)."""
        if sample_rate <= 0 or samples <= 0:
            raise InputError(input_name, "the speech the caption timing was made from", "empty audio")
        tolerance = 1.0 / min(sample_rate, self.sample_rate)
        if abs(samples / sample_rate - self.duration) > tolerance + 1e-9:
            raise InputError(input_name, f"the speech the caption timing was made from ({self.duration:.3f} s)",
                             f"{samples / sample_rate:.3f} s of audio",
                             "Connect the audio of the same TTS node (through Audio Master, which keeps its "
                             "length), not another take or a trimmed file.")

    def shifted(self, offset: int, limit: int) -> tuple:
        """These spans moved `offset` samples later, ends cut at `limit` (how a take sits inside a longer track)."""
        return tuple(replace(s, start=s.start + offset, end=min(s.end + offset, limit),
                             voice_start=s.voice_start + offset, voice_end=min(s.voice_end + offset, limit))
                     for s in self.spans)


def timing(spans: Sequence[ClauseSpan], sample_rate: int, length: int, language: str) -> CaptionTiming:
    """A checked `CaptionTiming`: spans inside the audio, in order."""
    spans = tuple(spans)
    for a, b in zip(spans, spans[1:]):
        if b.start < a.start:
            raise ValueError("clause spans out of order")
    if spans and (spans[0].start < 0 or spans[-1].end > length):
        raise ValueError("clause spans outside the audio")
    return CaptionTiming(sample_rate=int(sample_rate), length=int(length), language=language, spans=spans)
