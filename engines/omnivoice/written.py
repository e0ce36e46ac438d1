"""Which words of the script, as written, each spoken clause reads: what captions show.

Text preparation turns "Subió un 42,5% hasta US$ 3,2 M." into the words a newsreader says, then cuts and merges the
result into clauses. Captions must show the script as written (digits, currency, acronyms), so every clause gets the
written text it was made from:

1. the written script (tags removed) is cut into sentences, as slices that add up to the whole text;
2. each sentence is made speakable on its own (the same normalisation as the whole text). Where a rule reads across a
   sentence boundary ("Sr. García", whose dot ends a written sentence), a sentence's words differ from that stretch
   of the whole text's words; the diverging sentence is then merged with its neighbour and the check repeated, so
   every group of written sentences owns exactly the spoken words it produced;
3. the finished clauses are walked word by word (letters and digits only, punctuation ignored) against those groups:
   a clause gets the written text of every group whose first word it reads. A group spread over several clauses (a
   long sentence cut at a comma) is cut at the matching punctuation of the written text when both sides have the
   same breaks; otherwise the later clauses continue the first one's text ("" below).

The result, ``written[i]`` for ``clauses[i]``, is "" for a clause that continues the written text of the clause
before it (its caption is timed with both).
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'»”)]*\s+|\n+")
_WORD = re.compile(r"[^\W_]+")
_BREAK = re.compile(r"[.!?…,;:—][\"'»”)]*(?=\s)|\s—")


def words(text: str) -> list:
    """The words of `text`, lower case, punctuation dropped (how written and spoken text are compared)."""
    return [w.lower() for w in _WORD.findall(text)]


def sentences(text: str) -> list:
    """`text` cut after sentence ends and at line breaks, as slices whose concatenation is `text`."""
    units, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        if m.end() > start and text[start:m.end()].strip():
            units.append(text[start:m.end()])
            start = m.end()
    if text[start:].strip() or not units:
        units.append(text[start:])
    else:
        units[-1] += text[start:]
    return units


def group_sentences(units: Sequence[str], speakable: Callable[[str], str]) -> tuple[list, list]:
    """Merge written sentences until each group's own spoken words are its stretch of the whole text's words.

    Returns ``(groups, spoken words of each group)``; the groups' texts add up to ``"".join(units)``.
    """
    whole = words(speakable("".join(units)))
    groups = list(units)
    memo: dict = {}
    while True:
        per = [memo.setdefault(g, words(speakable(g))) for g in groups]
        at, k = 0, 0
        for k, own in enumerate(per):
            if whole[at:at + len(own)] != own:
                break
            at += len(own)
        else:
            if at == len(whole):
                return groups, per
            k = len(groups) - 1
        if len(groups) == 1:  # the whole text is its own group: its words are `whole` by construction
            return groups, [whole]
        j = k if k + 1 < len(groups) else k - 1
        groups[j:j + 2] = [groups[j] + groups[j + 1]]


def _breaks(text: str) -> list:
    """For each break (sentence end, comma, colon, dash) in `text`: how many words come before it and where it ends."""
    return [(len(words(text[:m.start() + 1])), m.end()) for m in _BREAK.finditer(text)]


def _cut_written(written: str, spoken: str, word_cuts: Sequence[int]) -> list:
    """`written` cut where `spoken` is cut after ``word_cuts`` words, at the matching breaks; None if they differ."""
    spoken_breaks, written_breaks = _breaks(spoken), _breaks(written)
    if len(spoken_breaks) != len(written_breaks):
        return None
    pieces, start = [], 0
    for cut in word_cuts:
        index = next((n for n, (count, _) in enumerate(spoken_breaks) if count == cut), None)
        if index is None:
            return None
        end = written_breaks[index][1]
        pieces.append(written[start:end].strip())
        start = end
    pieces.append(written[start:].strip())
    return pieces if all(pieces) else None


def written_sources(text: str, speakable: Callable[[str], str], clauses: Sequence[str]) -> tuple:
    """The written text of each clause (see the module docstring); `speakable` is the preparation's text rewrite."""
    groups, group_words = group_sentences(sentences(text), speakable)
    owner = [g for g, own in enumerate(group_words) for _ in own]  # group of each spoken word, in order
    clause_words = [len(words(c)) for c in clauses]
    written = [""] * len(clauses)
    if sum(clause_words) != len(owner):  # cannot happen with text.prepare_text; stay truthful if it ever does
        return (" ".join(text.split()),) + ("",) * (len(clauses) - 1) if clauses else ()
    first_word = [sum(clause_words[:i]) for i in range(len(clauses))]
    span_of = {}  # group -> clause indices reading its words
    for i, (start, count) in enumerate(zip(first_word, clause_words)):
        for g in sorted(set(owner[start:start + count])):
            span_of.setdefault(g, []).append(i)
    group_start = {g: owner.index(g) for g in span_of}
    for g, readers in span_of.items():
        text_g = " ".join(groups[g].split())
        if len(readers) == 1:
            pieces = [text_g]
        else:
            cuts = [first_word[i] - group_start[g] for i in readers[1:]]
            pieces = _cut_written(text_g, speakable(groups[g]), cuts) or [text_g] + [""] * (len(readers) - 1)
        for i, piece in zip(readers, pieces):
            if piece:
                written[i] = f"{written[i]} {piece}".strip()
    return tuple(written)
