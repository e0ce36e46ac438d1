"""SubRip (.srt) text: numbered blocks, ``HH:MM:SS,mmm --> HH:MM:SS,mmm`` (comma before the milliseconds, fields
zero-padded), the caption's lines, a blank line between blocks. SRT has no official specification; this is the
form every player and Subtitle Edit read. SRT has no escapes and players read ``<...>`` as formatting tags (FFmpeg
drops unknown ones), so angle brackets of the script are written as the single guillemets ``‹ ›``."""
from __future__ import annotations

from typing import Sequence


def timestamp(seconds: float, separator: str = ",") -> str:
    """``HH:MM:SS,mmm`` of `seconds` (rounded to the millisecond)."""
    ms = max(0, int(round(seconds * 1000)))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{separator}{ms:03d}"


def plain(text: str) -> str:
    """`text` without characters SubRip readers take as markup."""
    return text.replace("<", "‹").replace(">", "›")


def srt_text(cues: Sequence) -> str:
    blocks = [f"{n}\n{timestamp(c.start)} --> {timestamp(c.end)}\n{plain(c.text)}\n" for n, c in enumerate(cues, 1)]
    return "\n".join(blocks)
