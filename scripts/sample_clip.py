"""The pack's synthetic sample clip: a presenter-like figure talking over a voice-like tone.

The demo workflow and the tests need a small clip with audio on any machine, without shipping media or downloading
any. This draws one: a studio backdrop with a lower-third bar, a suited figure whose head sways, whose eyes blink and
whose mouth opens with the loudness of the soundtrack; the soundtrack is a harmonic "voice" (a ~140 Hz fundamental
with intonation and vibrato, vowel-like formant weighting) in syllables and short pauses. Deterministic: the same
arguments give the same pixels and samples.

    make_sample_clip(Path(input_dir) / "broadcast_sample.mp4")   # 256x448, 24 fps, 4 s, 48 kHz stereo

A test fixture and a demo helper, not an engine: it lives with the scripts that use it (`run_workflow.py --demo`)
and is imported by the tests as `scripts.sample_clip`. From a shell (repository root):
`python scripts/sample_clip.py <ComfyUI input folder>` writes it there.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # also when run as a script
    sys.path.insert(0, str(REPO_ROOT))

from engines.export import AudioTrack, EncodeSettings, write_stream  # noqa: E402

SAMPLE_NAME = "broadcast_sample.mp4"

# Vowel formants (Hz): the "voice" cycles through them one syllable at a time.
_FORMANTS = ((730, 1090), (270, 2290), (530, 1840), (570, 840), (300, 870))


def voice_like(seconds: float, sample_rate: int = 48000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Stereo float32 `[2, T]` speech-like audio and its per-sample loudness envelope `[T]` (0-1)."""
    rng = np.random.default_rng(seed)
    n = int(round(seconds * sample_rate))
    t = np.arange(n) / sample_rate
    syllable = 0.24  # seconds; ~4 syllables per second like conversational speech
    index = (t // syllable).astype(int)
    phase_in_syllable = (t % syllable) / syllable
    pauses = rng.random(index.max() + 1) < 0.15
    envelope = np.sin(np.pi * phase_in_syllable) ** 0.7 * ~pauses[index]
    envelope *= np.clip(t / 0.05, 0, 1) * np.clip((seconds - t) / 0.05, 0, 1)  # no clicks at either end
    f0 = 140 + 25 * np.sin(2 * np.pi * 0.35 * t) + 3 * np.sin(2 * np.pi * 5.5 * t)  # intonation + vibrato
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    formants = np.array(_FORMANTS, dtype=np.float64)[index % len(_FORMANTS)]
    voice = np.zeros(n)
    for k in range(1, 24):
        fk = k * f0
        weight = (np.exp(-((fk - formants[:, 0]) / 120) ** 2) + 0.6 * np.exp(-((fk - formants[:, 1]) / 180) ** 2)
                  + 0.25 / k)
        voice += weight * np.sin(k * phase)
    voice *= envelope
    voice += 0.01 * rng.standard_normal(n) * envelope  # breath
    voice *= 0.5 / max(np.abs(voice).max(), 1e-9)
    stereo = np.stack((voice, 0.9 * voice)).astype(np.float32)
    return stereo, envelope.astype(np.float32)


EDGE_PX = 3.0  # soft edges like a camera's optics at this size; hard synthetic steps are not what 4:2:0 is for


def _paint(img: np.ndarray, alpha: np.ndarray, colour) -> None:
    img += alpha[..., None] * (np.asarray(colour, np.float32) - img)


def _ellipse(px, py, cx, cy, rx, ry) -> np.ndarray:
    d = (np.sqrt(((px - cx) / rx) ** 2 + ((py - cy) / ry) ** 2) - 1.0) * min(rx, ry)
    return np.clip(0.5 - d / EDGE_PX, 0.0, 1.0)


def _band(p, centre, half) -> np.ndarray:
    return np.clip(0.5 + (half - np.abs(p - centre)) / EDGE_PX, 0.0, 1.0)


def presenter_frames(width: int, height: int, fps: float, envelope: np.ndarray, sample_rate: int,
                     count: int, first: int = 0) -> np.ndarray:
    """Frames `first .. first+count-1` as uint8 `[count, height, width, 3]` (mouth driven by `envelope`)."""
    py, px = np.mgrid[0:height, 0:width].astype(np.float32)
    W, H = float(width), float(height)
    u, v = px / W, py / H
    backdrop = np.stack((0.08 + 0.10 * v, 0.16 + 0.18 * v, 0.35 + 0.25 * (1 - u)), axis=-1).astype(np.float32)
    frames = np.empty((count, height, width, 3), np.uint8)
    for i in range(count):
        t = (first + i) / fps
        centre = int(min(len(envelope) - 1, t * sample_rate))
        window = envelope[max(0, centre - sample_rate // 50):centre + sample_rate // 50 + 1]
        mouth = float(window.mean()) if window.size else 0.0
        img = backdrop.copy()
        sway = 0.02 * np.sin(2 * np.pi * 0.4 * t)
        cx, head_y = (0.5 + sway) * W, (0.41 + 0.005 * np.sin(2 * np.pi * 0.9 * t)) * H
        body_x, shoulders = (0.5 + sway * 0.4) * W, 0.58 * H
        # Suit: a trapezoid from the shoulders down, with a white collar and a red tie.
        below = np.clip(0.5 + (py - shoulders) / EDGE_PX, 0.0, 1.0)
        _paint(img, below * _band(px, body_x, 0.20 * W + (py - shoulders) * 0.35 * W / H), (0.12, 0.13, 0.18))
        collar_half = np.maximum(0.06 * W - (py - shoulders) * 0.1 * W / H, 0)
        _paint(img, below * _band(px, body_x, collar_half) * _band(py, shoulders + 0.06 * H, 0.06 * H),
               (0.92, 0.92, 0.90))
        _paint(img, _band(px, body_x, 0.018 * W) * _band(py, shoulders + 0.12 * H, 0.10 * H), (0.62, 0.10, 0.12))
        neck_top, neck_bottom = head_y + 0.08 * H, shoulders + 0.01 * H
        _paint(img, _band(px, (0.5 + sway * 0.6) * W, 0.06 * W)
               * _band(py, (neck_top + neck_bottom) / 2, (neck_bottom - neck_top) / 2), (0.78, 0.57, 0.47))
        # Head (skin), hair cap, eyes that blink every ~3 s, and a mouth that opens with the voice.
        head = _ellipse(px, py, cx, head_y, 0.16 * W, 0.12 * H)
        _paint(img, head, (0.87, 0.64, 0.52))
        _paint(img, head * np.clip(0.5 + (head_y - 0.06 * H - py) / EDGE_PX, 0.0, 1.0), (0.20, 0.13, 0.08))
        blink = 2.0 < (t % 3.0) < 2.12
        for side in (-1, 1):
            eye_h = (0.004 if blink else 0.011) * H
            _paint(img, _ellipse(px, py, cx + side * 0.055 * W, head_y - 0.015 * H, 0.025 * W, eye_h),
                   (0.1, 0.08, 0.08))
        _paint(img, _ellipse(px, py, cx, head_y + 0.055 * H, 0.05 * W, (0.004 + 0.022 * mouth) * H),
               (0.45, 0.12, 0.14))
        # Lower third: a news bar with a moving ticker block.
        _paint(img, _band(py, 0.895 * H, 0.035 * H), (0.72, 0.12, 0.14))
        ticker_x = ((0.5 - 0.15 * t) % 1.0) * W
        _paint(img, _band(px, ticker_x, 0.2 * W) * _band(py, 0.895 * H, 0.01 * H), (0.95, 0.95, 0.95))
        frames[i] = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
    return frames


def make_sample_clip(path: os.PathLike | str, *, width: int = 256, height: int = 448, fps: float = 24.0,
                     seconds: float = 4.0, sample_rate: int = 48000) -> Path:
    """Write the sample clip (H.264 + AAC, libx264 so it is the same on every machine) and return its path."""
    audio, envelope = voice_like(seconds, sample_rate)
    count = int(round(seconds * fps))
    settings = EncodeSettings(encoder="x264", preset="veryfast", quality=18)
    chunks = (presenter_frames(width, height, fps, envelope, sample_rate, min(24, count - start), first=start)
              for start in range(0, count, 24))
    write_stream(path, fps, chunks, audio=AudioTrack.from_array(audio, sample_rate), settings=settings)
    return Path(path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/sample_clip.py <folder>   (writes <folder>/" + SAMPLE_NAME + ")")
    print(make_sample_clip(Path(sys.argv[1]) / SAMPLE_NAME))
