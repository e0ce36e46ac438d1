"""The QC sheet shown in the node: verdict, a contact strip, loudness over time and the problems on a timeline.

Drawn with Pillow (ComfyUI's own image dependency) into a uint8 RGB array:
- a banner: PASS (green) or FAIL (red) with the failed checks' names;
- up to six evenly spaced frames, with their times;
- momentary (thin) and short-term (thick) loudness in LUFS against time, the target and its tolerance shaded,
  the true-peak position marked;
- one lane per check that found something, its stretches drawn in red (skipped checks are not drawn);
- a table: every check's state (pass, fail, skip, inconclusive), measured value, limit and standard.
"""
from __future__ import annotations

import numpy as np

from . import loudness

WIDTH = 768
GREEN, RED, GREY, DARK = (46, 160, 67), (200, 40, 40), (150, 150, 150), (28, 28, 30)


def render(measured, checks, verdict: str, failed: list, target_lufs: float, tolerance: float) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    seconds = max(measured.info.video_seconds, 1e-3)
    lanes = [c for c in checks if c.events]
    strip_h = 0
    thumbs = measured.picture.thumbnails
    if thumbs:
        strip_h = min(160, max(t.shape[0] for _, t in thumbs)) + 14
    plot_h, lane_h = 170, 16
    row_h = 12
    height = 28 + strip_h + plot_h + 24 + lane_h * max(len(lanes), 1) + 8 + row_h * (len(checks) + 1) + 6
    img = Image.new("RGB", (WIDTH, height), DARK)
    draw = ImageDraw.Draw(img)
    banner = GREEN if verdict == "pass" else RED
    draw.rectangle([0, 0, WIDTH, 24], fill=banner)
    title = "QC PASS" if verdict == "pass" else "QC FAIL: " + ", ".join(failed)
    draw.text((8, 6), title[:120], fill=(255, 255, 255), font=font)
    y = 28
    if thumbs:
        x = 8
        for index, rgb in thumbs:
            tile = Image.fromarray(rgb)
            if tile.height > strip_h - 14:
                tile = tile.resize((max(1, tile.width * (strip_h - 14) // tile.height), strip_h - 14))
            if x + tile.width > WIDTH - 8:
                break
            img.paste(tile, (x, y))
            draw.text((x + 2, y + tile.height), f"{index / measured.info.fps:.1f} s", fill=GREY, font=font)
            x += tile.width + 6
        y += strip_h
    left, right = 56, WIDTH - 10
    top, bottom = y + 6, y + plot_h

    def tx(t):
        return left + (right - left) * min(max(t / seconds, 0.0), 1.0)

    lo_db, hi_db = min(target_lufs - 20, -50.0), max(target_lufs + 8, -5.0)

    def ly(v):
        return bottom - (bottom - top) * (min(max(v, lo_db), hi_db) - lo_db) / (hi_db - lo_db)

    draw.rectangle([left, top, right, bottom], outline=GREY)
    draw.rectangle([left + 1, ly(target_lufs + tolerance), right - 1, ly(target_lufs - tolerance)], fill=(40, 70, 45))
    draw.line([left, ly(target_lufs), right, ly(target_lufs)], fill=GREEN)
    for v in range(int(np.ceil(lo_db / 10) * 10), int(hi_db) + 1, 10):
        draw.text((4, ly(v) - 5), f"{v} LUFS", fill=GREY, font=font)
    audio = measured.audio
    if audio is not None and audio.subblock_power.size:
        for series, width, colour, offset in ((loudness.momentary(audio.subblock_power), 1, (120, 160, 230), 0.4),
                                              (loudness.short_term(audio.subblock_power), 2, (240, 200, 80), 3.0)):
            if series.size < 2:
                continue
            pts = [(tx(offset + 0.1 * i), ly(v if np.isfinite(v) else lo_db)) for i, v in enumerate(series)]
            draw.line(pts, fill=colour, width=width)
        draw.line([tx(audio.true_peak_s), top, tx(audio.true_peak_s), bottom], fill=(230, 120, 60))
        draw.text((left + 4, top + 2), "momentary / short-term loudness; orange: true peak", fill=GREY, font=font)
    else:
        draw.text((left + 4, top + 2), "no audio", fill=RED, font=font)
    y = bottom + 4
    for s in range(0, int(seconds) + 1, max(1, int(seconds // 8) or 1)):
        draw.text((tx(s) - 6, y), f"{s}s", fill=GREY, font=font)
    y += 20
    if not lanes:
        draw.text((left, y), "no problems located in time" + (" (see the report)" if failed else ""),
                  fill=GREEN if not failed else GREY, font=font)
    for check in lanes:
        draw.text((4, y + 2), check.name[:9], fill=GREY, font=font)
        draw.rectangle([left, y + 3, right, y + lane_h - 3], outline=(60, 60, 60))
        colour = RED if check.status == "fail" else GREY
        for a, b in check.events:
            draw.rectangle([tx(a), y + 3, max(tx(b), tx(a) + 2), y + lane_h - 3], fill=colour)
        y += lane_h
    y = max(y, bottom + 24 + lane_h) + 8
    colours = {"pass": GREEN, "fail": RED, "inconclusive": (230, 170, 60)}
    draw.text((4, y), f"{'state':13}{'check':20}{'value':>10}  limit; standard", fill=GREY, font=font)
    for check in checks:
        y += row_h
        value = "-" if check.value is None or not np.isfinite(check.value) else f"{float(check.value):.2f}"
        line = f"{check.status:13}{check.name:20}{value:>10}  {check.limit}; {check.standard}"
        draw.text((4, y), line[:125], fill=colours.get(check.status, GREY), font=font)
    return np.asarray(img, dtype=np.uint8)
