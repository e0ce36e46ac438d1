"""Captions laid out by broadcast timed-text rules: which words share a caption, where its lines break, how long it
stays up.

Profiles (`PROFILES`) hold the figures of the guideline they follow:

- ``standard``: the common timed-text limits (Netflix's general requirements and its English/Spanish figures):
  42 characters a line, 2 lines, adult reading speed 20 characters a second in English and 17 in Spanish, each
  caption shown 5/6 s to 7 s, at least 2 frames between two captions;
- ``bbc``: BBC Subtitle Guidelines for 16:9 broadcast: 37 characters a line (Teletext), 2 lines, 160-180 words a
  minute (about 0.3 s a word at least), the same 7 s and 2 frames;
- ``vertical``: BBC's online figures for 9:16: about 25 characters in the 90 % wide region, 3 lines.

Layout, for each speaker turn of the timing: every written word gets a time (a clause's words share its exact speech
span by length, a figure counted as the words it is read as); the words are cut into captions by dynamic programming
over the cut points, each caption having to fit the lines and the maximum duration, with cuts after a sentence end
cheapest, then after a comma, then before a conjunction or preposition, and a cut after an article, a preposition, a
determiner, a pronoun or an auxiliary (the word that binds to the next) almost forbidden; each caption's lines are
cut the same way, never leaving one word alone on a line when another cut exists. Captions then start with their
first word and end with their last, are stretched to the minimum duration where the next caption leaves room, kept
at least the minimum gap apart, and snapped to the frame grid.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

from ..common.errors import InputError
from .timing import CaptionTiming


@dataclass(frozen=True)
class Profile:
    name: str
    max_chars: int                       # characters a line
    max_lines: int
    max_cps: dict                        # language -> adult reading speed, characters a second
    min_seconds: float                   # shortest display of one caption
    max_seconds: float                   # longest display of one caption
    min_gap_frames: int                  # frames between the end of one caption and the start of the next
    min_seconds_per_word: float = 0.0    # BBC's ~0.3 s per word floor (0: none)
    description: str = ""

    def cps(self, language: str) -> float:
        return self.max_cps.get(language, self.max_cps["es"])


PROFILES = {
    "standard": Profile("standard", 42, 2, {"en": 20.0, "es": 17.0}, 5 / 6, 7.0, 2,
                        description="42 chars x 2 lines, 20 cps English / 17 cps Spanish, 5/6-7 s, 2-frame gaps "
                                    "(Netflix timed-text figures)"),
    "bbc": Profile("bbc", 37, 2, {"en": 17.0, "es": 17.0}, 5 / 6, 7.0, 2, min_seconds_per_word=0.3,
                   description="37 chars x 2 lines, about 17 cps (160-180 wpm), at least 0.3 s a word, up to 7 s "
                               "(BBC guidelines, 16:9 broadcast)"),
    "vertical": Profile("vertical", 25, 3, {"en": 17.0, "es": 17.0}, 5 / 6, 7.0, 2, min_seconds_per_word=0.3,
                        description="25 chars x 3 lines, about 17 cps, up to 7 s (BBC online figures for 9:16)"),
}
LANGUAGES = ("es", "en")

# Words that bind to the next one: a line or caption never ends on them if another cut exists (article-noun,
# preposition-object, determiner-noun, subject pronoun-verb, auxiliary/negation/clitic-verb).
_BINDS = {
    "en": set("a an the this that these those my your his her its our their some any no every each of in on at to "
              "for with from by about into onto over after before under between through during without per as "
              "i you he she we they it is are was were be been will would shall should can could may might must "
              "has have had do does did not mr mrs ms dr us$ $ € £".split()),
    "es": set("el la los las un una unos unas lo al del este esta estos estas ese esa esos esas aquel aquella su "
              "sus mi mis tu tus nuestro nuestra nuestros nuestras a ante bajo con contra de desde en entre hacia "
              "hasta para por según sin sobre tras durante mediante yo él ella nosotros ellos ellas se me te le les "
              "nos no ha han he hemos había habían haber sr sra dr dra us$ $ € £".split()),
}
# Words a cut may come before (conjunctions and prepositions start a new phrase).
_STARTS = {
    "en": set("and or but because while although though so which who where when if than of in on at to for with "
              "from by about after before during".split()),
    "es": set("y e o u pero porque aunque mientras que quien donde cuando si ni como de en con para por desde "
              "hasta sobre durante según".split()),
}
_SENTENCE_END = re.compile(r"[.!?…][\"'»”)]*$")
_CLAUSE_END = re.compile(r"[,;:—][\"'»”)]*$")
# How many spoken characters a written character stands for: figures and symbols are read as words.
_SPOKEN_CHARS = {**{d: 4 for d in "0123456789"}, "%": 9, "$": 7, "€": 5, "£": 6, "&": 3, "+": 4, "=": 6, "@": 2}

_CUT_COST = {"sentence": 0.0, "clause": 2.0, "before": 5.0, "plain": 10.0, "binds": 60.0}
_CAPTION_COST = 3.0            # each extra caption: prefer fewer, fuller captions
_CAPTION_CUT = 2.0             # a phrase split across two captions reads worse than across two lines
_WIDOW_COST = 40.0             # one word alone on a line


@dataclass(frozen=True)
class Cue:
    start: float                # seconds
    end: float
    lines: tuple                # the caption's lines, top to bottom
    speaker: str = ""

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def chars(self) -> int:
        return sum(len(line) for line in self.lines)


@dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float
    speaker: str
    turn_start: bool = False    # first word of a speaker's turn (gets the name prefix)


@dataclass(frozen=True)
class LayoutSettings:
    profile: str = "standard"
    language: str = "en"
    fps: float = 25.0
    max_cps: float = 0.0        # 0: the profile's figure for the language
    speaker_names: bool = True  # "Anchor: " before the first caption of each dialogue turn
    names: dict = field(default_factory=dict)  # speaker tag -> name shown (default: the tag, capitalised)

    def check(self) -> Profile:
        if self.profile not in PROFILES:
            raise InputError("profile", f"one of {', '.join(PROFILES)}", repr(self.profile))
        if self.language not in LANGUAGES:
            raise InputError("language", f"a caption language with line-break rules ({', '.join(LANGUAGES)})",
                             repr(self.language), "Set the script's language to es or en.")
        if not 1.0 <= float(self.fps) <= 240.0:
            raise InputError("fps", "the video's frame rate, 1 to 240", str(self.fps))
        if self.max_cps and not 5.0 <= float(self.max_cps) <= 40.0:
            raise InputError("max_cps", "a reading speed of 5 to 40 characters a second, or 0 for the profile's",
                             str(self.max_cps))
        return PROFILES[self.profile]


def spoken_weight(word: str) -> int:
    """About how many characters `word` takes to say (a figure or a symbol counts as the words it is read as)."""
    return sum(_SPOKEN_CHARS.get(ch, 1) for ch in word) + 1


def timed_words(timing: CaptionTiming) -> list:
    """Every written word with its time: the words of a clause's written text share that clause's speech span
    (with the spans of the clauses that continue it) in proportion to `spoken_weight`."""
    rate = float(timing.sample_rate)
    pieces: list = []  # [written, start, end, speaker]
    for span in timing.spans:
        onset, stop = span.voice_start / rate, span.voice_end / rate
        if span.written or not pieces:
            pieces.append([span.written or span.spoken, onset, stop, span.speaker])
        else:
            pieces[-1][2] = max(pieces[-1][2], stop)
    out: list = []
    for k, (text, start, end, speaker) in enumerate(pieces):
        tokens = text.split()
        if not tokens:
            continue
        weights = [spoken_weight(t) for t in tokens]
        total, at = float(sum(weights)), 0.0
        for n, (token, w) in enumerate(zip(tokens, weights)):
            t0 = start + (end - start) * at / total
            at += w
            first = n == 0 and (k == 0 or pieces[k - 1][3] != speaker)
            out.append(Word(token, t0, start + (end - start) * at / total, speaker, first))
    return out


def _lang_key(word: str) -> str:
    return word.lower().strip("¡¿\"'«»“”()[]")


def _cut_kind(words: Sequence[str], i: int, lang: str) -> str:
    """How good a cut after ``words[i]`` is."""
    w = words[i]
    if _lang_key(w) in _BINDS[lang] or w.endswith("$"):
        return "binds"
    if _SENTENCE_END.search(w):
        return "sentence"
    if _CLAUSE_END.search(w):
        return "clause"
    if i + 1 < len(words) and _lang_key(words[i + 1]).strip(",.;:") in _STARTS[lang]:
        return "before"
    return "plain"


def break_lines(words: Sequence[str], max_chars: int, max_lines: int, lang: str) -> Optional[tuple]:
    """The best lines for `words` (one line when it fits), or None if they cannot fit."""
    found = _break_lines(words, max_chars, max_lines, lang)
    return found and found[0]


def _break_lines(words: Sequence[str], max_chars: int, max_lines: int, lang: str) -> Optional[tuple]:
    """``(lines, cost)`` of the best line breaks, or None."""
    n = len(words)
    if any(len(w) > max_chars for w in words):
        return None
    text = " ".join(words)
    if len(text) <= max_chars:
        return (text,), 0.0
    # best[k][j]: cost of the first j words in k lines, with the back-pointer.
    inf = math.inf
    best = [[(inf, -1)] * (n + 1) for _ in range(max_lines + 1)]
    best[0][0] = (0.0, -1)
    for k in range(1, max_lines + 1):
        for j in range(1, n + 1):
            for i in range(j - 1, -1, -1):
                line = " ".join(words[i:j])
                if len(line) > max_chars:
                    break
                prev = best[k - 1][i][0]
                if prev == inf:
                    continue
                cost = prev
                if j < n:
                    cost += _CUT_COST[_cut_kind(words, j - 1, lang)]
                if j - i == 1 and n > 1:
                    cost += _WIDOW_COST
                # Balanced lines read best; a longer bottom line (a pyramid) is the usual preference.
                cost += abs(max_chars - len(line)) / max_chars * (0.5 if j == n else 1.0)
                if cost < best[k][j][0]:
                    best[k][j] = (cost, i)
    k = min(range(1, max_lines + 1), key=lambda k: best[k][n][0])
    cost = best[k][n][0]
    if cost == inf:
        return None
    lines, j = [], n
    while k:
        i = best[k][j][1]
        lines.append(" ".join(words[i:j]))
        j, k = i, k - 1
    return tuple(reversed(lines)), cost


def _chunk(words: Sequence[Word], profile: Profile, lang: str, cps: float, prefix: str, gap: float) -> list:
    """Cut one turn's words into captions (see the module docstring): lists of (lines, first word, last word)."""
    texts = [w.text for w in words]
    if prefix:
        texts = [f"{prefix}{texts[0]}"] + texts[1:]
    n = len(texts)
    for w in texts:
        if len(w) > profile.max_chars:
            raise InputError("captions", f"words of at most {profile.max_chars} characters (the {profile.name} "
                             "profile's line length)", f"{w!r} ({len(w)} characters)",
                             "Shorten or hyphenate the word in the script, or pick a profile with longer lines.")
    inf = math.inf
    best = [(inf, -1, None)] * (n + 1)
    best[0] = (0.0, -1, None)
    for j in range(1, n + 1):
        for i in range(j - 1, -1, -1):
            if best[i][0] == inf:
                continue
            seconds = words[j - 1].end - words[i].start
            if seconds > profile.max_seconds and j - i > 1:
                break
            found = _break_lines(texts[i:j], profile.max_chars, profile.max_lines, lang)
            if found is None:
                break
            lines, line_cost = found
            chars = sum(len(line) for line in lines)
            cut = 0.0 if j == n else _CAPTION_CUT * _CUT_COST[_cut_kind(texts, j - 1, lang)]
            cost = best[i][0] + line_cost + _CAPTION_COST + cut
            cost += len(lines) - 1  # one line when one line will do
            if j - i == 1 and n > 1:
                cost += _WIDOW_COST  # one word alone in a caption
            # A sentence that starts inside a line (not at a caption's or a line's start) is harder to follow.
            cost += sum(1 for line in lines for w in line.split()[:-1] if _SENTENCE_END.search(w))
            room = (words[j].start if j < n else words[-1].end + profile.min_seconds) - words[i].start
            if room < profile.min_seconds + gap + 1e-9:
                cost += 45.0  # cannot stay up the minimum time before the next caption: prefer a fuller one
            shown = max(seconds, profile.min_seconds)
            cost += 10.0 * max(0.0, chars / shown / cps - 1.0)  # over the reading speed
            if cost < best[j][0]:
                best[j] = (cost, i, lines)
    out, j = [], n
    while j:
        _, i, lines = best[j]
        out.append((lines, words[i], words[j - 1]))
        j = i
    return list(reversed(out))


def _turns(words: Sequence[Word]) -> list:
    turns: list = []
    for w in words:
        if w.turn_start or not turns:
            turns.append([])
        turns[-1].append(w)
    return turns


def layout(timing: CaptionTiming, settings: LayoutSettings = LayoutSettings(), asr_words: Sequence = ()) -> list:
    """The captions (`Cue`) for `timing`, by `settings`' profile; see the module docstring. `asr_words`: ASR
    ``(start, end, word)`` times that refine the caption starts (`refine.snap_starts`)."""
    profile = settings.check()
    lang = settings.language
    cps = float(settings.max_cps) or profile.cps(lang)
    words = timed_words(timing)
    if not words:
        raise InputError("caption_timing", "timing with written text to caption", "no words (an empty script)")
    dialogue = len({w.speaker for w in words}) > 1 or any(w.speaker for w in words)
    raw = []
    for turn in _turns(words):
        speaker = turn[0].speaker
        name = settings.names.get(speaker, speaker[:1].upper() + speaker[1:])
        prefix = f"{name}: " if dialogue and settings.speaker_names and speaker else ""
        gap = profile.min_gap_frames / float(settings.fps)
        for lines, first, last in _chunk(turn, profile, lang, cps, prefix, gap):
            raw.append(Cue(first.start, last.end, lines, speaker))
    if asr_words:
        from .refine import snap_starts

        raw = snap_starts(raw, asr_words)
    return retime(raw, profile, settings.fps, timing.duration)


def retime(cues: Sequence[Cue], profile: Profile, fps: float, duration: float) -> list:
    """Minimum/maximum display, gaps and the frame grid (module docstring); captions stay inside the audio."""
    frame = 1.0 / float(fps)
    gap = profile.min_gap_frames * frame
    starts = [math.floor(cue.start / frame + 1e-6) * frame for cue in cues]
    out = []
    for k, cue in enumerate(cues):
        start = starts[k]
        if out and start < out[-1].end + gap - 1e-9:  # only after a neighbour squeezed to one frame
            start = out[-1].end + gap
        floor = max(profile.min_seconds, profile.min_seconds_per_word * len(" ".join(cue.lines).split()))
        end = min(max(cue.end, start + floor), start + profile.max_seconds)
        end = min(math.ceil(end / frame - 1e-6) * frame, duration)
        if k + 1 < len(cues):
            end = min(end, starts[k + 1] - gap)
        if end <= start:  # squeezed by its neighbours: at least one frame
            end = start + frame
        out.append(replace(cue, start=round(start, 6), end=round(end, 6)))
    return out
