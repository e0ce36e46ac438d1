"""Dialogue: a script with speaker tags read by several voices into one track.

Script format, one turn per tagged line::

    Anchor: Buenas noches. Comenzamos con la economía.
    [correspondent] Gracias. Desde el centro de la ciudad...
    la jornada fue tranquila.          <- an untagged line continues the previous speaker's turn

Each turn is prepared with the single-voice rules (`text.prepare_text`: normalisation, ellipses, splitting, short
fragments merged, long clauses cut with a breath), so clauses inside a turn are joined exactly as the single-voice
path joins them; turns are joined like sentences (`JOIN_PAUSE`). Clauses of all speakers are generated together in
sub-batches of at most ``max_batch`` grouped by length, one voice prompt per item, as the posts batch dialogue (one
speaker per row). With `level_match`, every speaker's turns are brought to the same integrated loudness before the
join, so the mastering stage that follows does not leave one voice louder than the other.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

import numpy as np

from ..common.errors import InputError
from ..common.progress import ensure
from . import master
from ..captions.timing import CaptionTiming, timing
from .joins import join_with_spans
from .speak import SpeakSettings, clause_spans, generate_clips
from .text import JOIN_PAUSE, MAX_SUB_BATCH, PreparedText, prepare_text, sub_batches

_TAG = re.compile(r"^\s*(?:\[(?P<bracket>[^\]\n]{1,40})\]|(?P<colon>[A-Za-zÀ-ÿ][\w .'-]{0,39}?)\s*:)\s*(?P<text>.*)$")
_SPEAKER = re.compile(r"^\s*(?P<tag>[^=\n]{1,40}?)\s*=\s*(?P<voice>[^=\n]+?)\s*$")


@dataclass(frozen=True)
class Turn:
    speaker: str   # the tag as the cast names it (lower case)
    text: str


@dataclass
class DialogueResult:
    samples: np.ndarray      # float32 [T]
    sample_rate: int
    turns: list              # (speaker, start second, end second, clause count)
    wall_seconds: float
    timing: CaptionTiming = None  # every clause where it is heard, with its speaker and written text


def parse_cast(text: str, input_name: str = "speakers") -> dict:
    """``tag = voice`` lines -> ``{tag (lower case): voice name}``."""
    cast = {}
    for number, line in enumerate((text or "").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _SPEAKER.match(line)
        if not m:
            raise InputError(input_name, "one 'tag = saved voice' line per speaker", f"line {number}: {line!r}",
                             "Example: 'anchor = valentina'.")
        cast[m.group("tag").strip().lower()] = m.group("voice").strip()
    if not cast:
        raise InputError(input_name, "at least one 'tag = saved voice' line", "nothing")
    return cast


def parse_script(script: str, speakers, input_name: str = "script") -> list:
    """Turns of the script, each for a tag in `speakers`; untagged lines continue the previous turn."""
    known = {s.lower() for s in speakers}
    turns: list = []
    for number, line in enumerate((script or "").splitlines(), 1):
        if not line.strip():
            continue
        m = _TAG.match(line)
        tag = (m.group("bracket") or m.group("colon")).strip().lower() if m else None
        if m and tag in known:
            text = m.group("text").strip()
            if turns and turns[-1].speaker == tag:  # the same speaker again: one turn
                turns[-1] = Turn(tag, f"{turns[-1].text} {text}".strip())
            else:
                turns.append(Turn(tag, text))
            continue
        if m and m.group("bracket"):
            raise InputError(input_name, f"speaker tags from the cast ({', '.join(sorted(known))})",
                             f"[{tag}] on line {number}", "Add it to the speakers list or fix the tag.")
        if not turns:
            raise InputError(input_name, "a script whose first line starts with a speaker tag ('Anchor: ...' or "
                             "'[anchor] ...')", f"line {number}: {line.strip()[:60]!r}",
                             f"Speakers in the cast: {', '.join(sorted(known))}.")
        turns[-1] = Turn(turns[-1].speaker, f"{turns[-1].text} {line.strip()}".strip())
    turns = [t for t in turns if t.text]
    if not turns:
        raise InputError(input_name, "at least one tagged line with words", "an empty script")
    return turns


def speak_dialogue(loaded, turns: list, voices: dict, language: str, settings: SpeakSettings = SpeakSettings(),
                   prepare: dict = None, max_batch: int = MAX_SUB_BATCH, level_match: bool = True,
                   progress=None) -> DialogueResult:
    """Read `turns` with ``voices[speaker]`` (voice prompts) into one track; see the module docstring."""
    progress = ensure(progress)
    prepared: list[PreparedText] = [prepare_text(t.text, language, **(prepare or {})) for t in turns]
    clauses, prompts, owner = [], [], []
    for k, (turn, prep) in enumerate(zip(turns, prepared)):
        for clause in prep.clauses:
            clauses.append(clause)
            prompts.append(voices[turn.speaker])
            owner.append(k)
    t0 = time.perf_counter()
    clips = generate_clips(loaded, clauses, prompts, prepared[0].language, sub_batches(clauses, int(max_batch)),
                           settings, progress)
    wall = time.perf_counter() - t0
    sr = loaded.sample_rate
    takes, placed = [], []
    for k, prep in enumerate(prepared):
        own = [clips[i] for i in range(len(clips)) if owner[i] == k]
        take, spans = join_with_spans(own, prep.joins, sr)
        takes.append(take.astype(np.float64))
        placed.append(timing(clause_spans(own, spans, prep.clauses, prep.written, turns[k].speaker), sr,
                             take.size, prep.language))
    if level_match:
        takes = _match_levels(takes, turns, sr)
    samples, spans, heard = takes[0], [], []
    for k, take in enumerate(takes):
        offset = 0
        if k:
            samples, ((_, kept), (offset, _)) = join_with_spans([samples, take], [JOIN_PAUSE], sr)
            samples = samples.astype(np.float64)
            heard = [replace(s, end=min(s.end, kept), voice_end=min(s.voice_end, kept)) for s in heard]
        heard.extend(placed[k].shifted(offset, samples.size))
        begin = (samples.size - take.size) / sr  # the join keeps all of the new take after its seam
        spans.append((turns[k].speaker, round(begin, 3), round(samples.size / sr, 3), len(prepared[k].clauses)))
    return DialogueResult(samples=samples.astype(np.float32), sample_rate=sr, turns=spans, wall_seconds=wall,
                          timing=timing(heard, sr, samples.size, prepared[0].language))


def _match_levels(takes: list, turns: list, sr: int) -> list:
    """Scale each speaker so that the loudness of all their turns together equals the loudest speaker's median."""
    per_speaker = {}
    for take, turn in zip(takes, turns):
        per_speaker.setdefault(turn.speaker, []).append(take)
    loudness = {}
    for speaker, own in per_speaker.items():
        joined = np.concatenate(own)[None]
        if joined.shape[-1] < int(0.4 * sr) + 1:
            continue  # too short to measure: left as generated
        value = master.measure_lufs(joined, sr)
        if np.isfinite(value):
            loudness[speaker] = value
    if len(loudness) < 2:
        return takes
    reference = float(np.median(list(loudness.values())))
    return [take * master.dsp.from_db(reference - loudness[turn.speaker]) if turn.speaker in loudness else take
            for take, turn in zip(takes, turns)]

