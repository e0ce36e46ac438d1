"""Text preparation for OmniVoice: the clause rules the broadcast posts settled on after their splitter bugs.

Order of operations (each rule is a pure function below, tested on the posts' fixture sentences):

1. strip inline production tags (``[sfx:click]``, ``[tone:quote|skeptical] ... [/tone]``, ``[texture:fry]``): the
   words inside a tone span stay, the markers go. OmniVoice's own tags without a colon (``[laughter]``, CMU phonemes
   ``[B EY1 S]``) are kept;
2. optional broadcast normalisation (`normalize.py`: figures, currency, dates, acronyms, brands, quotes, symbols,
   salutations) and the Rioplatense voseo and yeísmo switches, Spanish only;
3. ellipses: after ``. ! ?`` an ellipsis only marks the clause boundary (joined later with a 25 ms crossfade); at the
   end of the text it becomes ``.``; anywhere else (mid-sentence) it becomes ``", "``. The old splitter turned them
   into full stops and chopped speech into one-word fragments;
4. split after ``. ! ?`` followed by a space, and at line breaks; never on ``¡ ¿``, which open a sentence;
5. a clause of fewer than 3 words merges with its neighbour (the next one, or the previous one at the end): a lone
   word makes OmniVoice buzz or truncate;
6. U8 clause length: a clause of more than `MAX_WORDS` (16) words is cut at the comma (or ``;`` ``:`` ``—``, else
   a conjunction) nearest its middle, recursively, each part keeping at least `MIN_WORDS`; such a cut is joined with
   a breath (at least 150 ms of pause, the posts' comma micro-breath);
7. sub-batches of at most 4 clauses, grouped by length so a batch pads as little as possible.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from ..common.errors import InputError
from .languages import is_spanish, resolve_language
from .normalize import VOSEO, NormalizeSettings, apply_voseo, apply_yeismo, normalize  # noqa: F401 (re-exported)
from .written import written_sources

JOIN_PAUSE = "pause"        # an ordinary sentence boundary
JOIN_ELLIPSIS = "ellipsis"  # a boundary the writer marked with "...": joined with a longer (25 ms) crossfade
JOIN_BREATH = "breath"      # a long clause cut at a comma: joined with a micro-breath pause

MIN_WORDS = 3
MAX_WORDS = 16
MAX_SUB_BATCH = 4

_TAG = re.compile(r"\[/?[A-Za-z_][\w-]*:[^\]\n]*\]|\[/[A-Za-z_][\w-]*\]")
_ELLIPSIS_AFTER_STOP = re.compile(r"([.!?][\"'»”)]*)\s*\.{3,}")
_ELLIPSIS_AT_END = re.compile(r"\s*\.{3,}(?=[\"'»”)]*\s*$)")
_ELLIPSIS_MID = re.compile(r"\s*\.{3,}\s*")
_MARK = "\u0000"  # boundary sentinel: "this sentence ended with an ellipsis"
_BOUNDARY = re.compile(r"(?<=[.!?])([\"'»”)]*)(\u0000?)\s+|(\u0000)\s*")

@dataclass(frozen=True)
class PreparedText:
    """Clauses ready for OmniVoice, with how each pair is joined and the batches they are generated in.

    ``joins[i]`` is the join between ``clauses[i]`` and ``clauses[i + 1]``; ``sub_batches`` lists clause indices,
    each batch at most `MAX_SUB_BATCH` long, together covering every clause once. ``written[i]`` is the script's own
    text (digits, currency, acronyms as typed) that ``clauses[i]`` reads, "" where it continues the clause before
    (`written.written_sources`); captions show it.
    """

    clauses: tuple
    joins: tuple
    language: str
    sub_batches: tuple
    written: tuple = ()

    @property
    def text(self) -> str:
        return " ".join(self.clauses)


def strip_tags(text: str) -> str:
    """Remove ``[name:...]`` and ``[/name]`` markers, keep the words between them, tidy the spaces left behind."""
    text = _TAG.sub(" ", text)
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r" +([,.!?;:])", r"\1", text).strip()


def rewrite_ellipses(text: str) -> str:
    """Apply rule 3; boundaries that followed an ellipsis carry the `_MARK` sentinel for `split_clauses`."""
    text = text.replace("…", "...")
    text = _ELLIPSIS_AFTER_STOP.sub(lambda m: m.group(1) + _MARK, text)
    text = _ELLIPSIS_AT_END.sub(".", text)
    text = _ELLIPSIS_MID.sub(", ", text)
    text = re.sub(r",\s*,", ",", text)
    return re.sub(r",\s*([.!?])", r"\1", text)


def split_clauses(text: str) -> tuple[list, list]:
    """Rule 4 on one paragraph at a time: ``(clauses, joins)`` with ``len(joins) == len(clauses) - 1``."""
    clauses, joins = [], []
    for paragraph in re.split(r"\s*\n\s*", text):
        if not paragraph.strip():
            continue
        if clauses:
            joins.append(JOIN_PAUSE)
        start = 0
        for m in _BOUNDARY.finditer(paragraph):
            piece = (paragraph[start:m.start()] + (m.group(1) or "")).strip()
            start = m.end()
            if piece:
                clauses.append(piece)
                joins.append(JOIN_ELLIPSIS if (m.group(2) or m.group(3)) else JOIN_PAUSE)
        tail = paragraph[start:].replace(_MARK, "").strip()
        if tail:
            clauses.append(tail)
        elif clauses and len(joins) == len(clauses):
            joins.pop()  # the paragraph ended on a boundary: no join after its last clause
    return [c.replace(_MARK, "") for c in clauses], joins


def word_count(clause: str) -> int:
    return sum(1 for w in clause.split() if any(ch.isalnum() for ch in w))


def merge_short(clauses: list, joins: list, min_words: int = MIN_WORDS) -> tuple[list, list]:
    """Rule 5: merge every clause of fewer than `min_words` words into its next (or, last, its previous) clause."""
    clauses, joins = list(clauses), list(joins)
    i = 0
    while len(clauses) > 1 and i < len(clauses):
        if word_count(clauses[i]) >= min_words:
            i += 1
            continue
        j = i if i + 1 < len(clauses) else i - 1  # merge clauses[j] and clauses[j + 1]
        clauses[j:j + 2] = [f"{clauses[j]} {clauses[j + 1]}"]
        del joins[j]
        i = j
    return clauses, joins


_SOFT_BREAKS = re.compile(r"[,;:—]\s+|\s+—")
# Not "y"/"and": spelled-out figures are full of them ("cuarenta y dos", "one dollar and fifty cents").
_CONJUNCTIONS = {"es": ("pero", "aunque", "porque", "mientras", "donde", "cuando"),
                 "en": ("but", "although", "because", "while", "which", "where", "when")}


def split_long(clauses: list, joins: list, language: str, max_words: int = MAX_WORDS,
               min_words: int = MIN_WORDS) -> tuple[list, list]:
    """U8: cut clauses longer than `max_words` at the soft break nearest their middle (see the module docstring)."""
    out_c, out_j = [], []
    for k, clause in enumerate(clauses):
        parts = _cut(clause, language, max_words, min_words)
        for p, part in enumerate(parts):
            if p:
                out_j.append(JOIN_BREATH)
            out_c.append(part)
        if k < len(joins):
            out_j.append(joins[k])
    return out_c, out_j


def _cut(clause: str, language: str, max_words: int, min_words: int) -> list:
    if word_count(clause) <= max_words:
        return [clause]
    lang = "es" if is_spanish(language) else "en"
    words = clause.split()
    cuts = []  # (character offset where the second part starts, is a punctuation break)
    for m in _SOFT_BREAKS.finditer(clause):
        cuts.append((m.end() if clause[m.start()] != " " else m.start() + 1, True))
    if not cuts:
        pos = 0
        for w in words:
            pos = clause.index(w, pos)
            if pos and w.lower().strip("¡¿") in _CONJUNCTIONS.get(lang, ()):
                cuts.append((pos, False))
            pos += len(w)
    middle = word_count(clause) / 2
    best = None
    for at, _ in cuts:
        left, right = clause[:at].rstrip(), clause[at:].lstrip()
        if word_count(left) < min_words or word_count(right) < min_words:
            continue
        score = abs(word_count(left) - middle)
        if best is None or score < best[0]:
            best = (score, left, right)
    if best is None:
        return [clause]  # no place to breathe: kept whole rather than cut mid-phrase
    _, left, right = best
    if left.endswith("—") or left.endswith(":"):
        left = left[:-1].rstrip() + ","
    return _cut(left, language, max_words, min_words) + _cut(right, language, max_words, min_words)


def sub_batches(clauses: list, max_batch: int = MAX_SUB_BATCH) -> tuple:
    """Rule 6: clause indices in batches of at most `max_batch`, shortest first, so each batch pads little."""
    order = sorted(range(len(clauses)), key=lambda k: (len(clauses[k]), k))
    return tuple(tuple(order[k:k + max_batch]) for k in range(0, len(order), max_batch))


def prepare_text(text: str, language: str, voseo: bool = False, min_words: int = MIN_WORDS,
                 max_batch: int = MAX_SUB_BATCH, normalization: Optional[NormalizeSettings] = None,
                 yeismo: bool = False, max_words: int = 0) -> PreparedText:
    """Run rules 1-7 on `text`; raise `InputError` for empty text, an unknown language or voseo/yeísmo outside
    Spanish. `normalization` None skips the broadcast normalisation; `max_words` 0 keeps long clauses whole."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("text", "some text to speak", "an empty text")
    code = resolve_language(language)
    if voseo and not is_spanish(code):
        raise InputError("voseo", "voseo only with Spanish text (language 'es')", f"language '{language}'",
                         "Turn voseo off or set the language to es.")
    if yeismo and not is_spanish(code):
        raise InputError("yeismo", "yeísmo only with Spanish text (language 'es')", f"language '{language}'",
                         "Turn yeismo off or set the language to es.")
    if max_words and not int(max_words) >= 2 * int(min_words):
        raise InputError("max_words", f"at least twice min_words ({2 * int(min_words)}), or 0 to keep clauses "
                         "whole", str(max_words))
    if not 1 <= int(max_batch) <= 64:
        raise InputError("max_sub_batch", "a batch size between 1 and 64", str(max_batch))
    written = strip_tags(text)

    def speakable(part: str) -> str:
        if normalization is not None:
            part = normalize(part, replace(normalization, language=code, voseo=voseo, yeismo=yeismo))
        else:
            part = apply_voseo(part) if voseo else part
            part = apply_yeismo(part) if yeismo else part
        return rewrite_ellipses(part)

    clauses, joins = _drop_wordless(*split_clauses(speakable(written)))
    if not clauses:
        raise InputError("text", "text with words to speak once tags are removed", repr(text[:80]))
    clauses, joins = merge_short(clauses, joins, min_words)
    if max_words:
        clauses, joins = split_long(clauses, joins, code, int(max_words), min_words)
    return PreparedText(clauses=tuple(clauses), joins=tuple(joins), language=code,
                        sub_batches=sub_batches(clauses, int(max_batch)),
                        written=written_sources(written, speakable, clauses))


def _drop_wordless(clauses: list, joins: list) -> tuple[list, list]:
    """Clauses that are only punctuation ("!") left by tag stripping are folded into the clause before them."""
    out_c, out_j = [], []
    for k, clause in enumerate(clauses):
        if word_count(clause) == 0 and out_c:
            out_c[-1] = out_c[-1] + clause
            continue
        if word_count(clause) == 0:
            continue
        if out_c:
            out_j.append(joins[k - 1])
        out_c.append(clause)
    return out_c, out_j
