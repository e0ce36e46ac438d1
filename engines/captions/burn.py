"""Open (burned-in) captions: each caption drawn onto the frames it spans, chunk by chunk, inside the safe area.

Placement and size follow the BBC online guidelines (§9.2, §10): a landscape picture keeps text inside the central
75 % of its width and 90 % of its height, with lines about 7.5 % of the picture height; a portrait one (9:16) inside
the central 90 % of its width and 75 % of its height, with lines about 4.2 % of the height, which puts the captions
"a little higher" than the bottom edge, in the lower third below the face; a square picture inside 90 x 90 %. Both
boxes lie inside EBU R 95's graphics-safe area (a 5 % inset). The caption block is centred at the bottom of its box;
the font shrinks (never grows) so the widest line of the clip fits the box, one size for the whole clip.

The font ships with the pack (``fonts/DejaVuSans-Bold.ttf``, DejaVu 2.37, unmodified, its licence beside it), so a
render never depends on the machine's fonts. Pillow's built-in scalable font (``ImageFont.load_default(size=...)``,
Pillow >= 10.1) was the first choice, but it has no accented letters, no ñ, no ¿ ¡ and no € or £: Spanish captions
would show empty boxes. DejaVu Sans covers Latin, Greek and Cyrillic. Styles: ``outline`` (white text with a black
outline) or ``box`` (white text on a 75 % opaque black box).

Streaming: `CaptionBurner.frames` wraps a generator of chunks and yields each chunk with the captions drawn; a chunk
with no caption on any of its frames passes through untouched, one with captions is copied once (the caller's frames
are never changed: ComfyUI may hold them in its cache). Only the current caption's bitmap is kept.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

import numpy as np
import torch

from ..common.errors import InputError

STYLES = ("outline", "box")
BOX_OPACITY = 0.75
LINE_SPACING = 1.2          # line pitch as a multiple of the font size
FONT_FILE = Path(__file__).with_name("fonts") / "DejaVuSans-Bold.ttf"


@dataclass(frozen=True)
class SafeBox:
    x0: int
    y0: int
    x1: int
    y1: int
    line_height: int        # target line pitch in pixels

    @property
    def width(self) -> int:
        return self.x1 - self.x0


def safe_box(width: int, height: int) -> SafeBox:
    """Where captions may go on a `width` x `height` picture (module docstring)."""
    if width > height * 1.1:          # landscape (16:9, 4:3 wide)
        fx, fy, line = 0.75, 0.90, 0.075
    elif height > width * 1.1:        # portrait (9:16)
        fx, fy, line = 0.90, 0.75, 0.042
    else:                             # square-ish
        fx, fy, line = 0.90, 0.90, 0.07
    x0, y0 = round(width * (1 - fx) / 2), round(height * (1 - fy) / 2)
    return SafeBox(x0, y0, width - x0, height - y0, max(8, round(height * line)))


@lru_cache(maxsize=8)
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.truetype(str(FONT_FILE), size)
    except OSError as exc:  # the file is missing from a damaged install, or Pillow was built without FreeType
        raise InputError("burn_in", f"the pack's caption font ({FONT_FILE.name}) and a Pillow with FreeType",
                         str(exc), "Reinstall the pack, or update Pillow (python -m pip install -U pillow).") from exc


def font_size(lines: Iterable[str], box: SafeBox, style: str) -> int:
    """The largest size up to the box's line height at which every line (with its outline or box) fits the box."""
    size = max(6, int(box.line_height / LINE_SPACING))
    lines = [line for line in lines if line]
    while size > 6:
        font = _font(size)
        widest = max((font.getlength(line) for line in lines), default=0)
        if widest + 2 * _padding(size, style) <= box.width:
            break
        size = max(6, int(size * min(0.95, box.width / (widest + 2 * _padding(size, style)))))
    return size


def _padding(size: int, style: str) -> int:
    return max(2, size // 10) if style == "outline" else max(4, size // 3)


def render(lines: Sequence[str], size: int, style: str, box: SafeBox) -> tuple:
    """``(rgba uint8 [h, w, 4], x, y)``: the caption bitmap and where its top-left corner goes on the frame."""
    from PIL import Image, ImageDraw

    font = _font(size)
    pad = _padding(size, style)
    pitch = round(size * LINE_SPACING)
    widths = [math.ceil(font.getlength(line)) for line in lines]
    w = min(box.width, max(widths) + 2 * pad)
    h = pitch * len(lines) + 2 * pad
    image = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    for k, (line, lw) in enumerate(zip(lines, widths)):
        x, y = (w - lw) // 2, pad + k * pitch
        if style == "box":
            draw.rectangle((x - pad, y, x + lw + pad, y + pitch), fill=(0, 0, 0, round(255 * BOX_OPACITY)))
            draw.text((x, y + (pitch - size) // 2), line, font=font, fill=(255, 255, 255, 255))
        else:
            draw.text((x, y + (pitch - size) // 2), line, font=font, fill=(255, 255, 255, 255),
                      stroke_width=pad, stroke_fill=(0, 0, 0, 255))
    x = box.x0 + (box.width - w) // 2
    return np.asarray(image), x, box.y1 - h


class CaptionBurner:
    """Draws `cues` (objects with ``start``, ``end``, ``lines``) on frames at `fps`; see the module docstring."""

    def __init__(self, cues: Sequence[Any], fps: float, style: str = "outline"):
        if style not in STYLES:
            raise InputError("burn_style", f"one of {', '.join(STYLES)}", repr(style))
        self.cues, self.fps, self.style = list(cues), float(fps), style
        self._starts = [cue.start for cue in self.cues]
        self.box: Optional[SafeBox] = None
        self.size = 0
        self._bitmap = (None, None)   # (cue index, (alpha, rgb, x, y) as tensors/arrays for the chunk's kind)

    def cue_at(self, frame: int) -> Optional[int]:
        """The caption shown on frame number `frame` (its start time), if any; captions never overlap."""
        t = frame / self.fps + 1e-9
        k = bisect.bisect_right(self._starts, t) - 1
        return k if k >= 0 and t < self.cues[k].end else None

    def frames(self, chunks: Iterable[Any]) -> Iterator[Any]:
        """`chunks` (``[N, H, W, 3|4]``, uint8 or float 0-1, torch or numpy) with the captions drawn."""
        done = 0
        for chunk in chunks:
            n = int(chunk.shape[0]) if getattr(chunk, "ndim", 0) == 4 else 0
            active = [self.cue_at(done + i) for i in range(n)]
            done += n
            if not any(k is not None for k in active):
                yield chunk
                continue
            if self.box is None:
                self._fit(int(chunk.shape[2]), int(chunk.shape[1]))
            out = chunk.clone() if isinstance(chunk, torch.Tensor) else np.array(chunk, copy=True)
            for i, k in enumerate(active):
                if k is not None:
                    self._draw(out, i, k)
            yield out

    def _fit(self, width: int, height: int) -> None:
        self.box = safe_box(width, height)
        self.size = font_size([line for cue in self.cues for line in cue.lines], self.box, self.style)

    def _draw(self, out, i: int, k: int) -> None:
        if self._bitmap[0] != (k, id(type(out)), str(getattr(out, "device", "")), str(out.dtype)):
            rgba, x, y = render(self.cues[k].lines, self.size, self.style, self.box)
            alpha = rgba[..., 3:4].astype(np.float32) / 255.0
            rgb = rgba[..., :3].astype(np.float32) / 255.0
            if isinstance(out, torch.Tensor):
                alpha = torch.from_numpy(alpha).to(out.device)
                rgb = torch.from_numpy(rgb).to(out.device)
            self._bitmap = ((k, id(type(out)), str(getattr(out, "device", "")), str(out.dtype)), (alpha, rgb, x, y))
        alpha, rgb, x, y = self._bitmap[1]
        h, w = alpha.shape[:2]
        y0, x0 = max(y, 0), max(x, 0)
        region = out[i, y0:y0 + h, x0:x0 + w, :3]
        a, c = alpha[:region.shape[0], :region.shape[1]], rgb[:region.shape[0], :region.shape[1]]
        scale = 255.0 if out.dtype in (torch.uint8, np.uint8) else 1.0
        if isinstance(out, torch.Tensor):
            mixed = region.float() * (1 - a) + c * a * scale
            region.copy_(mixed.round().clamp(0, 255) if scale != 1.0 else mixed)
        else:
            mixed = region.astype(np.float32) * (1 - a) + c * a * scale
            region[...] = np.clip(np.round(mixed), 0, 255) if scale != 1.0 else mixed
