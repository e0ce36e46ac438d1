"""Word accuracy of a transcript against the intended text: 1 - WER after normalisation.

Normalisation (so that only the words count): Unicode NFKC, lower case, inline tags removed, punctuation removed
(apostrophes inside words kept), whitespace collapsed; optionally accents removed (``después`` == ``despues``), which
the posts count as a "phonetic" match.

With a language (es, en), both texts are first put in spoken form by the pack's own normaliser: figures, dates,
times, money, percentages, symbols and initialisms written as a newsreader says them. Whisper writes "42,5%" where
the prepared script (Text Prepare's output, which the broadcasts check against) says "cuarenta y dos coma cinco por
ciento"; compared as written, a perfect read scored five errors. The normaliser is idempotent on those rewrites, so
an already prepared text is unchanged and a raw script compares as its prepared form would. Carrier phrases and
category nouns are left out: they add words to the script that the speaker then says, so the transcript has them.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .text import strip_tags


def normalize_words(text: str, strip_accents: bool = False) -> list:
    text = unicodedata.normalize("NFKC", strip_tags(text or "")).lower()
    if strip_accents:
        text = "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")
    text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
    text = "".join(ch if (ch.isalnum() or ch in "' ") else " " for ch in text)
    return text.split()


def word_errors(reference: list, hypothesis: list) -> int:
    """Levenshtein distance over words (substitutions + deletions + insertions)."""
    prev = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, 1):
        cur = [i] + [0] * len(hypothesis)
        for j, hyp_word in enumerate(hypothesis, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ref_word != hyp_word))
        prev = cur
    return prev[-1]


@dataclass(frozen=True)
class Accuracy:
    word_accuracy: float  # 1 - WER, floored at 0
    wer: float
    errors: int
    reference_words: int
    exact: bool


def spoken_form(text: str, language: str) -> str:
    """`text` with figures and symbols in words for `language` (es/en; any other language: unchanged)."""
    from .normalize import NormalizeSettings, normalize

    return normalize(text or "", NormalizeSettings(language=language or "", carrier_phrases=False,
                                                   category_nouns=False))


def word_accuracy(expected: str, transcript: str, strip_accents: bool = False, language: str = "") -> Accuracy:
    """1 - WER of `transcript` against `expected`; with `language`, both compared in spoken form (module docstring)."""
    if language:
        expected, transcript = spoken_form(expected, language), spoken_form(transcript, language)
    ref = normalize_words(expected, strip_accents)
    hyp = normalize_words(transcript, strip_accents)
    errors = word_errors(ref, hyp)
    wer = errors / len(ref) if ref else float(len(hyp) > 0)
    return Accuracy(word_accuracy=max(0.0, 1.0 - wer), wer=wer, errors=errors, reference_words=len(ref),
                    exact=ref == hyp)
