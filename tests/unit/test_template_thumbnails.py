"""The pieces of scripts/workflow/thumbnails.py that need no server: the frame a video's picture is taken from, the
title band leaving the picture above it alone, the waveform's loudness figure and the size/comment of the file."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from scripts.workflow import thumbnails as thumbs


def _numbered_video(path, frames: int, fps: int = 10):
    """An MP4 whose frame i is a flat grey of level 20 * i (so the decoded frame says which one it is)."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"crf": "0"}
        for i in range(frames):
            img = np.full((48, 64, 3), 20 * i, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.mark.parametrize("frames", [1, 7, 10])
def test_a_videos_picture_is_its_middle_frame(tmp_path, frames):
    path = tmp_path / "clip.mp4"
    _numbered_video(path, frames)
    level = float(np.asarray(thumbs.middle_frame(path).convert("L")).mean())
    assert abs(level - 20 * (frames // 2)) < 3, f"{frames} frames: got level {level}, frame {frames // 2} expected"


def test_the_title_band_and_tag_leave_the_picture_above_alone():
    rng = np.random.default_rng(1)
    picture = Image.fromarray(rng.integers(0, 255, (thumbs.SIZE[1], thumbs.SIZE[0], 3), dtype=np.uint8))
    out = np.asarray(thumbs.titled(picture, "Broadcast — MuseTalk lip-sync", "suite test run"))
    before = np.asarray(picture)
    untouched = before.copy()
    untouched[:22, :140] = out[:22, :140]                      # the tag's corner
    untouched[thumbs.SIZE[1] - thumbs.BAND:] = out[thumbs.SIZE[1] - thumbs.BAND:]  # the band
    assert np.array_equal(out, untouched), "pixels outside the band and the tag changed"
    band = out[thumbs.SIZE[1] - thumbs.BAND:].astype(int)
    # The band darkens the picture (a near-black at 215/255 over it: what shows through is 40/255 of it, plus the
    # black's own ~11) and carries white text.
    assert np.median(band) < before[thumbs.SIZE[1] - thumbs.BAND:].mean() * 40 / 255 + 16
    assert (band.min(axis=2) > 240).sum() > 200, "no white title text in the band"


def test_the_waveforms_loudness_is_the_signals(tmp_path):
    """A full-scale 1 kHz sine reads -3.01 LUFS integrated (ITU-R BS.1770's K-weighting is +0.69 dB at 1 kHz,
    offset by the -0.691 constant: 10 log10(0.5) for its mean square); at -20 dBFS, -23.01."""
    import soundfile

    rate = 48000
    t = np.arange(rate * 5) / rate
    for gain_db, expected in ((0.0, -3.01), (-20.0, -23.01)):
        path = tmp_path / f"sine{gain_db}.flac"
        soundfile.write(str(path), (10 ** (gain_db / 20) * np.sin(2 * np.pi * 1000 * t)).astype(np.float32), rate)
        picture, lufs = thumbs.waveform(path)
        assert picture.size == thumbs.SIZE
        assert abs(lufs - expected) < 0.1, f"{gain_db} dBFS sine: {lufs:.2f} LUFS"


def test_the_file_is_small_and_says_what_it_was_made_from(tmp_path):
    picture = thumbs.titled(thumbs.card(["Makes something", "Prompt: a long prompt " * 4]), "A title")
    out = tmp_path / "t.jpg"
    size = thumbs.save(picture, out, thumbs.stamp("demo_export", "A title", "a card"))
    with Image.open(out) as img:
        made_from = json.loads(img.info["comment"].decode())
        assert img.size == thumbs.SIZE
    assert size == out.stat().st_size <= 60 * 1024
    assert made_from == {"api": thumbs.api_hash("demo_export"), "title": "A title", "source": "a card"}
