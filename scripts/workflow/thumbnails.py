"""Template thumbnails made from what each graph really makes, with the template's title drawn on.

`scripts/workflow/editor.py thumbnails` runs each shipped workflow the way the suite does (tests/workflow_cases.py:
the case's `prepare` puts its tiny random models and synthetic media on the server, its overrides are applied to the
API twin, the prompt is queued), then draws the picture from the run's own output files:
- a graph that exports a video: its middle frame (the export's MP4, decoded with PyAV);
- a graph that saves images and no video (core SAM3's masks): the first garment mask it saved;
- a graph that makes speech (tts_master, tts_dialogue): the waveform of the first mastered track (Audio Master's
  preview), with its integrated loudness measured by the pack's meter (engines/omnivoice/master.measure_lufs);
- a graph the test server cannot run (wardrobe_vace_prompt: the 11 GB text encoder): a card saying what it makes,
  the prompt it encodes and the folder it writes.
Each picture carries the template's title (a band at the bottom, the pack's DejaVu Sans Bold from engines/captions)
and, on a run's picture, a corner tag saying it comes from the test run's tiny random models. The JPEG comment
records what it was made from: the API twin's hash, the title and the source (tests/unit/test_workflow_layout.py
fails when the API twin or the title changed since).
"""
from __future__ import annotations

import hashlib
import json
from io import BytesIO
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from scripts.workflow import layout

REPO_ROOT = Path(__file__).resolve().parents[2]
FONT = REPO_ROOT / "engines" / "captions" / "fonts" / "DejaVuSans-Bold.ttf"
SIZE = (480, 300)              # the card shows it about 270 px wide: sharp at twice that density
BAND = 64                      # the title band at the bottom
QUALITY = 80
VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".webm")


def api_hash(stem: str) -> str:
    return hashlib.sha256(layout.api_path(stem).read_bytes()).hexdigest()[:16]


def stamp(stem: str, title: str, source: str) -> str:
    """The JPEG comment: what the picture was made from (read back by the freshness test)."""
    return json.dumps({"api": api_hash(stem), "title": title, "source": source}, ensure_ascii=False)


def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT), size)


def _fit_text(draw: ImageDraw.ImageDraw, text: str, width: int, start: int, smallest: int = 14):
    """The largest font (from `start` down) in which `text` fits `width` on one line, or wrapped on two."""
    for size in range(start, smallest - 1, -1):
        font = _font(size)
        if draw.textlength(text, font=font) <= width:
            return font, [text]
        words = text.split()
        for cut in range(len(words) - 1, 0, -1):
            lines = [" ".join(words[:cut]), " ".join(words[cut:])]
            if all(draw.textlength(line, font=font) <= width for line in lines):
                if size * 2 + 6 <= BAND - 8:
                    return font, lines
                break
    return _font(smallest), [text]


def cover(picture: Image.Image) -> Image.Image:
    """`picture` scaled and centre-cropped to SIZE (the card crops nothing of it then)."""
    picture = picture.convert("RGB")
    scale = max(SIZE[0] / picture.width, SIZE[1] / picture.height)
    resized = picture.resize((max(SIZE[0], round(picture.width * scale)), max(SIZE[1], round(picture.height * scale))),
                             Image.LANCZOS)
    left, top = (resized.width - SIZE[0]) // 2, (resized.height - SIZE[1]) // 2
    return resized.crop((left, top, left + SIZE[0], top + SIZE[1]))


def titled(picture: Image.Image, title: str, tag: str = "") -> Image.Image:
    """`picture` (SIZE) with `title` in a dark band at the bottom and `tag` small in the top-left corner."""
    out = picture.convert("RGBA")
    overlay = Image.new("RGBA", out.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    draw.rectangle((0, SIZE[1] - BAND, SIZE[0], SIZE[1]), fill=(10, 12, 18, 215))
    font, lines = _fit_text(draw, title, SIZE[0] - 24, 24)
    line_h = font.size + 4
    y = SIZE[1] - BAND + (BAND - line_h * len(lines)) // 2
    for line in lines:
        draw.text((12, y), line, font=font, fill=(255, 255, 255, 255))
        y += line_h
    if tag:
        small = _font(12)
        w = draw.textlength(tag, font=small)
        draw.rectangle((0, 0, w + 12, 20), fill=(10, 12, 18, 190))
        draw.text((6, 3), tag, font=small, fill=(225, 225, 225, 255))
    return Image.alpha_composite(out, overlay).convert("RGB")


def middle_frame(video: Path) -> Image.Image:
    """The middle frame of `video` (the frames decoded in order, only the chosen one kept)."""
    import av

    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        count = stream.frames or sum(1 for _ in container.decode(stream))
    with av.open(str(video)) as container:
        for i, frame in enumerate(container.decode(container.streams.video[0])):
            if i >= count // 2:
                return frame.to_image()
    raise ValueError(f"{video}: no video frame")


def waveform(audio: Path) -> tuple[Image.Image, float]:
    """A picture of the mastered speech in `audio` (min/max per column) and its integrated loudness in LUFS."""
    import soundfile

    from engines.omnivoice.master import measure_lufs

    samples, rate = soundfile.read(str(audio), dtype="float32", always_2d=True)
    mono = samples.mean(axis=1)
    lufs = float(measure_lufs(mono, rate))
    img = Image.new("RGB", SIZE, (18, 24, 38))
    draw = ImageDraw.Draw(img)
    top, height = 34, SIZE[1] - BAND - 44
    mid = top + height / 2
    draw.line((0, mid, SIZE[0], mid), fill=(60, 70, 96))
    columns = np.array_split(mono, SIZE[0])
    for x, col in enumerate(columns):
        if col.size:
            lo, hi = float(col.min()), float(col.max())
            draw.line((x, mid - hi * height / 2, x, mid - lo * height / 2), fill=(90, 200, 255))
    label = f"{len(mono) / rate:.1f} s mastered speech, {lufs:.1f} LUFS integrated"
    draw.text((SIZE[0] - draw.textlength(label, font=_font(13)) - 10, SIZE[1] - BAND - 20), label, font=_font(13),
              fill=(230, 230, 230))
    return img, lufs


def card(lines: list[str]) -> Image.Image:
    """A plain picture of what a graph makes, for one the test server cannot run."""
    img = Image.new("RGB", SIZE, (24, 30, 44))
    draw = ImageDraw.Draw(img)
    y = 24
    for i, line in enumerate(lines):
        font = _font(18 if i == 0 else 14)
        for part in _wrap(draw, line, font, SIZE[0] - 40):
            draw.text((20, y), part, font=font, fill=(240, 240, 240) if i == 0 else (190, 205, 225))
            y += font.size + 6
        y += 6
    return img


def _wrap(draw, text: str, font, width: int) -> list[str]:
    lines, current = [], ""
    for word in text.split():
        trial = f"{current} {word}".strip()
        if current and draw.textlength(trial, font=font) > width:
            lines.append(current)
            current = word
        else:
            current = trial
    return lines + ([current] if current else [])


def _files(server, entry: dict, key: str) -> list[tuple[str, Path]]:
    """(class type, path) of every file the run's outputs list under `key`, in node-id order."""
    prompt = entry["prompt"][2]
    out = []
    for node_id in sorted(entry.get("outputs", {}), key=lambda k: (len(k), k)):
        for item in entry["outputs"][node_id].get(key, []) or []:
            if not isinstance(item, dict) or "filename" not in item:
                continue
            root = {"output": server.output_dir, "temp": server.temp_dir}.get(item.get("type", "output"))
            if root is not None:
                out.append((prompt[node_id]["class_type"], root / item.get("subfolder", "") / item["filename"]))
    return out


def from_run(server, entry: dict) -> tuple[Image.Image, str]:
    """The picture of a finished run and what it was made from."""
    files = _files(server, entry, "images")
    videos = [(c, p) for c, p in files if p.suffix.lower() in VIDEO_SUFFIXES]
    if videos:
        kind, path = next(((c, p) for c, p in videos if c == "BroadcastExportVideo"), videos[0])
        return cover(middle_frame(path)), f"middle frame of {kind}'s {path.suffix[1:].upper()}"
    saved = [(c, p) for c, p in files if c == "SaveImage"]
    if saved:
        kind, path = saved[0]
        with Image.open(path) as img:
            return cover(img), f"first image {kind} wrote ({path.name.rsplit('_', 1)[0]})"
    audio = [(c, p) for c, p in _files(server, entry, "audio") if c == "BroadcastAudioMaster"]
    if audio:
        picture, lufs = waveform(audio[0][1])
        return picture, f"waveform of BroadcastAudioMaster's mastered speech ({lufs:.1f} LUFS)"
    raise ValueError("the run wrote no video, image or mastered audio to draw")


def save(picture: Image.Image, out: Path, comment: str) -> int:
    """Write the JPEG (optimised, with `comment`); returns its size in bytes."""
    buf = BytesIO()
    picture.save(buf, "JPEG", quality=QUALITY, optimize=True, progressive=True, comment=comment.encode())
    out.write_bytes(buf.getvalue())
    return len(buf.getvalue())
