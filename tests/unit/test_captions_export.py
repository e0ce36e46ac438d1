"""Captions in the export: the mov_text soft track muxed in the single pass and read back by FFmpeg's mov_text
decoder (through PyAV), the SRT / WebVTT sidecars read back by FFmpeg's demuxers, and burned-in captions found in
the decoded frames inside the safe area the BBC guidelines and EBU R 95 give, on 9:16 and 16:9 pictures."""
from __future__ import annotations

import av
import numpy as np
import pytest
import torch

from engines.captions import burn as B
from engines.captions.layout import LayoutSettings
from engines.captions.render import plan_captions
from engines.captions.timing import ClauseSpan, timing
from engines.common.errors import InputError
from engines.export import split_frames, write_stream

SR = 24000
SCRIPT = ["El dólar subió un 42,5% hasta US$ 3,2 M.", "La bolsa cerró con ganancias del 1,8% en el día."]


def speech_timing(sentences, language="es", cps=14.0):
    spans, t = [], 0.2
    for text in sentences:
        a, b = int(t * SR), int((t + len(text) / cps) * SR)
        spans.append(ClauseSpan(a, b, a, b, text, text))
        t += len(text) / cps + 0.6
    return timing(spans, SR, int(t * SR), language)


def ffmpeg_cues(path, stream_type="subtitles"):
    out = []
    with av.open(str(path)) as container:
        stream = getattr(container.streams, stream_type)[0]
        language = stream.metadata.get("language")
        for packet in container.demux(stream):
            if packet.size <= 2:  # the MP4 muxer's empty samples between cues
                continue
            for sub in packet.decode():
                a = float(packet.pts * packet.time_base)
                out.append((round(a, 3), round(a + float(packet.duration * packet.time_base), 3),
                            sub.dialogue.decode()))
    return out, language


def test_soft_track_and_sidecars_carry_the_same_cues(tmp_path):
    t = speech_timing(SCRIPT)
    plan = plan_captions(t, LayoutSettings("standard", "es", fps=25), audio_samples=t.length, audio_rate=SR)
    frames = np.zeros((int(t.duration * 25) + 1, 64, 96, 3), np.uint8)
    result = write_stream(tmp_path / "clip.mp4", 25, plan.frames(split_frames(frames, 16), 25),
                          subtitles=plan.soft_subtitles())
    sidecars = plan.write_sidecars(result.path)
    assert [p.name for p in sidecars] == ["clip.es.srt", "clip.es.vtt"]
    expected = [(round(c.start, 3), round(c.end, 3), c.text) for c in plan.cues]
    assert any("42,5% hasta US$ 3,2 M." in text for *_, text in expected)  # the script as written
    muxed, language = ffmpeg_cues(result.path)
    assert language == "spa" and muxed == expected
    assert ffmpeg_cues(sidecars[0])[0] == expected and ffmpeg_cues(sidecars[1])[0] == expected
    assert "mov_text spa" in result.summary()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.es.srt", "clip.es.vtt", "clip.mp4"]


def test_bad_caption_inputs_are_refused(tmp_path):
    t = speech_timing(SCRIPT)
    with pytest.raises(InputError, match="audio"):
        plan_captions(t, LayoutSettings("standard", "es"), audio_samples=t.length // 2, audio_rate=SR)
    with pytest.raises(InputError, match="outputs"):
        plan_captions(t, LayoutSettings("standard", "es"), sidecars=False, soft_track=False)
    with pytest.raises(InputError, match="burn_style"):
        plan_captions(t, LayoutSettings("standard", "es"), burn_style="shadow")
    with pytest.raises(InputError, match="caption_timing"):
        plan_captions("Hola.", LayoutSettings("standard", "es"))
    with pytest.raises(InputError, match="language"):
        plan_captions(speech_timing(SCRIPT, "de"), LayoutSettings("standard", "de"))


def safe_area(width, height):
    """The region captions may touch: BBC online §10 (16:9: central 75 % wide x 90 % high; 9:16: 90 % x 75 %)."""
    fx, fy = (0.75, 0.90) if width > height else (0.90, 0.75)
    return (width * (1 - fx) / 2, height * (1 - fy) / 2, width * (1 + fx) / 2, height * (1 + fy) / 2)


@pytest.mark.parametrize("width, height", [(1080, 1920), (1920, 1080)])
@pytest.mark.parametrize("style", ["outline", "box"])
def test_burned_captions_sit_inside_the_safe_area_and_only_while_shown(tmp_path, width, height, style):
    t = speech_timing(SCRIPT)
    fps = 2
    plan = plan_captions(t, LayoutSettings("standard", "es", fps=fps), soft_track=False, sidecars=False,
                         burn_in=True, burn_style=style)
    n = int(t.duration * fps) + 1
    # Grey (the outline is darker, the text lighter); float frames (half precision, as a GPU renderer may send)
    # and uint8 frames (a renderer's own).
    source = torch.full((n, height, width, 3), 0.25, dtype=torch.float16) if style == "outline" else \
        torch.full((n, height, width, 3), 64, dtype=torch.uint8)
    before = source.clone()
    result = write_stream(tmp_path / "burn.mp4", fps, plan.frames(split_frames(source, 4), fps))
    assert torch.equal(source, before)  # the caller's frames are not drawn on
    x0, y0, x1, y1 = safe_area(width, height)
    shown = lambda i: any(c.start <= i / fps + 1e-9 < c.end for c in plan.cues)  # noqa: E731
    with av.open(str(result.path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            rgb = frame.to_ndarray(format="rgb24").astype(np.int16)
            changed = np.abs(rgb - 64).max(axis=2) > 24
            if not shown(i):
                assert not changed.any(), i
                continue
            ys, xs = np.nonzero(changed)
            assert ys.size > 0.002 * width * height  # text is there
            assert xs.min() >= x0 - 2 and xs.max() <= x1 + 2 and ys.min() >= y0 - 2 and ys.max() <= y1 + 2
            assert (rgb[changed].max(axis=1) > 200).any()  # white letters
            assert ys.max() > 0.6 * height  # in the lower part of the picture


def test_caption_size_follows_the_guidelines():
    # BBC §9.2: lines 3.9-4.5 % of the height for 9:16, 7-8 % for 16:9.
    assert 0.039 <= B.safe_box(1080, 1920).line_height / 1920 <= 0.045
    assert 0.07 <= B.safe_box(1920, 1080).line_height / 1080 <= 0.08
    # A 42-character line fits the 9:16 box by shrinking the font, never by overflowing it.
    box = B.safe_box(1080, 1920)
    line = "x" * 21 + " " + "M" * 20
    size = B.font_size([line], box, "outline")
    rgba, x, y = B.render((line,), size, "outline", box)
    assert x >= box.x0 and x + rgba.shape[1] <= box.x1 and y + rgba.shape[0] <= box.y1


def test_the_caption_font_draws_every_spanish_and_english_character():
    # A glyph the font lacks is drawn as the same .notdef box as a private-use code point.
    font = B._font(40)
    missing = bytes(font.getmask("\ue000"))
    for ch in "áéíóúüñÁÉÍÓÚÜÑ¿¡€£$%&«»“”—–…°ºª":
        assert bytes(font.getmask(ch)) != missing, ch
