"""WebVTT (.vtt) text: the ``WEBVTT`` signature, a ``Language:`` header, then cues ``HH:MM:SS.mmm --> HH:MM:SS.mmm``
(a period before the milliseconds) with their lines. A cue's text never holds ``-->`` and ``&`` ``<`` ``>`` are
written as character references, as the format requires."""
from __future__ import annotations

from typing import Sequence

from .srt import timestamp


def _escape(line: str) -> str:
    return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def webvtt_text(cues: Sequence, language: str) -> str:
    blocks = [f"WEBVTT\nLanguage: {language}\n"]
    for n, c in enumerate(cues, 1):
        lines = "\n".join(_escape(line) for line in c.lines)
        blocks.append(f"{n}\n{timestamp(c.start, '.')} --> {timestamp(c.end, '.')}\n{lines}\n")
    return "\n".join(blocks)
