"""Caption layout by the broadcast profiles (engines/captions/layout.py) and the SRT / WebVTT writers, read back by
FFmpeg's own SubRip and WebVTT demuxers and decoders (through PyAV), not by the pack's code.

Oracles: the profiles' figures as the guidelines state them (42 / 37 / 25 characters a line, 2 or 3 lines, 5/6 s to
7 s, 2 frames between captions), the script itself (every word shown once, in order), and the guidelines' rules
that a line never ends on an article and never holds one word alone."""
from __future__ import annotations

import av
import pytest

from engines.captions import layout as L
from engines.captions.srt import srt_text
from engines.captions.timing import ClauseSpan, timing
from engines.captions.webvtt import webvtt_text
from engines.common.errors import InputError

SR = 24000
ARTICLES = {"en": {"a", "an", "the"}, "es": {"el", "la", "los", "las", "un", "una", "unos", "unas"}}
LONG = {
    "en": ("The central bank raised its main interest rate by a quarter of a point on Thursday, the third rise this "
           "year, and said that inflation in the services sector was still far too high for comfort. Markets had "
           "expected the move. The pound rose against the dollar and the euro after the announcement, while "
           "government bond yields fell slightly across the board."),
    "es": ("El banco central subió su tipo de interés principal un cuarto de punto el jueves, la tercera subida del "
           "año, y dijo que la inflación de los servicios seguía siendo demasiado alta para estar tranquilos. Los "
           "mercados esperaban la decisión. La libra subió frente al dólar y al euro tras el anuncio, mientras el "
           "rendimiento de los bonos del Estado bajaba ligeramente en todos los plazos."),
}
SHORT = {"en": "Good evening.", "es": "Buenas noches."}


def speech_timing(sentences, language, cps=14.0, pause=0.4, speakers=None):
    """Timing of speech read at `cps` characters a second, one clause per sentence, `pause` s between them."""
    spans, t = [], 0.3
    for k, text in enumerate(sentences):
        seconds = len(text) / cps
        a, b = int(t * SR), int((t + seconds) * SR)
        spans.append(ClauseSpan(a - 2400, b + 2400, a, b, text, text.lower(), (speakers or [""] * 99)[k]))
        t += seconds + pause
    return timing(spans, SR, int((t + 0.3) * SR), language)


def split_sentences(text):
    import re
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


def check_rules(cues, profile, language, text, fps=25.0):
    frame = 1.0 / fps
    assert " ".join(" ".join(c.lines) for c in cues).split() == text.split()
    for k, c in enumerate(cues):
        assert 1 <= len(c.lines) <= profile.max_lines
        assert all(len(line) <= profile.max_chars for line in c.lines), c.lines
        assert c.end - c.start <= profile.max_seconds + 1e-6
        if len(c.lines) > 1:
            assert all(len(line.split()) > 1 for line in c.lines), c.lines  # no word alone on a line
        for line in c.lines[:-1]:
            assert line.split()[-1].lower() not in ARTICLES[language], c.lines  # article kept with its noun
        if len(" ".join(c.lines)) <= profile.max_chars:
            assert len(c.lines) == 1  # one line when one will do
        if k:
            assert c.start - cues[k - 1].end >= 2 * frame - 1e-6  # at least two frames apart
        assert abs(c.start * fps - round(c.start * fps)) < 1e-6  # on the frame grid


@pytest.mark.parametrize("language", ["en", "es"])
@pytest.mark.parametrize("profile", ["standard", "bbc", "vertical"])
def test_long_sentences_follow_the_profile(language, profile):
    text = LONG[language]
    cues = L.layout(speech_timing(split_sentences(text), language), L.LayoutSettings(profile, language))
    prof = L.PROFILES[profile]
    check_rules(cues, prof, language, text)
    assert len(cues) >= 4
    # Read at 14 cps, every caption stays under the reading-speed limit and at least 5/6 s on screen.
    for c in cues:
        assert c.chars / (c.end - c.start) <= prof.cps(language) + 1e-6
        assert c.end - c.start >= prof.min_seconds - 1e-6


@pytest.mark.parametrize("language", ["en", "es"])
def test_a_short_sentence_is_one_line_shown_for_the_minimum_time(language):
    cues = L.layout(speech_timing([SHORT[language]], language, cps=20), L.LayoutSettings("standard", language))
    assert len(cues) == 1 and cues[0].lines == (SHORT[language],)
    assert cues[0].end - cues[0].start >= 5 / 6 - 1e-6


def test_profile_figures_match_the_guidelines():
    assert (L.PROFILES["standard"].max_chars, L.PROFILES["standard"].max_lines) == (42, 2)
    assert L.PROFILES["standard"].cps("en") == 20 and L.PROFILES["standard"].cps("es") == 17
    assert L.PROFILES["bbc"].max_chars == 37 and L.PROFILES["vertical"].max_lines == 3
    for p in L.PROFILES.values():
        assert p.min_seconds == pytest.approx(5 / 6) and p.max_seconds == 7 and p.min_gap_frames == 2


def test_line_breaks_keep_articles_and_prepositions_with_what_follows():
    lines = L.break_lines("La inflación de los servicios seguía siendo demasiado alta para todos".split(), 42, 2,
                          "es")
    assert len(lines) == 2 and not lines[0].endswith((" los", " de", " la"))
    lines = L.break_lines("Markets had expected the move of the central bank on Thursday".split(), 42, 2, "en")
    assert len(lines) == 2 and lines[0].split()[-1] not in ("the", "of", "on")


def test_dialogue_captions_name_the_speaker_once_per_turn():
    timing_ = speech_timing(["Good evening, here is the news.", "Thank you, it was a calm day.",
                             "Back to you soon."], "en", speakers=["anchor", "correspondent", "anchor"])
    cues = L.layout(timing_, L.LayoutSettings("standard", "en"))
    assert [c.text.split(":")[0] for c in cues] == ["Anchor", "Correspondent", "Anchor"]
    plain = L.layout(timing_, L.LayoutSettings("standard", "en", speaker_names=False))
    assert not any(":" in c.text for c in plain)


def test_bad_input_is_refused_with_the_input_named():
    with pytest.raises(InputError, match="language"):
        L.layout(speech_timing(["Bonjour à tous."], "fr"), L.LayoutSettings("standard", "fr"))
    with pytest.raises(InputError, match="profile"):
        L.LayoutSettings("cinema", "en").check()
    with pytest.raises(InputError, match="cannot|characters"):
        L.layout(speech_timing(["Pneumonoultramicroscopicsilicovolcanoconiosis-related illness rose."], "en"),
                 L.LayoutSettings("vertical", "en"))
    with pytest.raises(InputError, match="caption_timing"):
        L.layout(timing([], SR, SR, "en"), L.LayoutSettings("standard", "en"))


def _ffmpeg_cues(path):
    """(start, end, text) of every cue as FFmpeg's demuxer and decoder read the file."""
    out = []
    with av.open(str(path)) as container:
        stream = container.streams.subtitles[0]
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            for sub in packet.decode():
                start = float(packet.pts * packet.time_base)
                out.append((round(start, 3), round(start + float(packet.duration * packet.time_base), 3),
                            sub.dialogue.decode()))
    return out


def test_srt_and_webvtt_read_back_by_ffmpeg_give_the_same_cues(tmp_path):
    text = LONG["es"] + " Subió un 42,5% hasta US$ 3,2 M & más <todo>."
    cues = L.layout(speech_timing(split_sentences(text), "es"), L.LayoutSettings("standard", "es"))
    (tmp_path / "a.srt").write_text(srt_text(cues), encoding="utf-8")
    (tmp_path / "a.vtt").write_text(webvtt_text(cues, "es"), encoding="utf-8")
    expected = [(round(c.start, 3), round(c.end, 3), c.text) for c in cues]
    assert _ffmpeg_cues(tmp_path / "a.vtt") == expected
    srt = _ffmpeg_cues(tmp_path / "a.srt")
    assert [(a, b) for a, b, _ in srt] == [(a, b) for a, b, _ in expected]
    # WebVTT's character references came back as & < >; SubRip has no escapes, so < > are written as ‹ ›.
    assert [t for *_, t in srt] == [t.replace("<", "‹").replace(">", "›") for *_, t in expected]


def test_asr_word_onsets_move_caption_starts_to_their_first_word():
    from engines.captions.refine import snap_starts

    text = LONG["en"]
    timing_ = speech_timing(split_sentences(text), "en")
    plain = L.layout(timing_, L.LayoutSettings("standard", "en", fps=25))
    # Word onsets 0.2 s after each TTS-estimated start (as if the estimate led the word), plus unrelated far ones.
    words = [(c.start + 0.2, c.start + 0.5, "w") for c in plain] + [(c.start - 0.9, c.start - 0.8, "x") for c in plain]
    refined = L.layout(timing_, L.LayoutSettings("standard", "en", fps=25), words)
    for before, after in zip(plain, refined):
        assert after.start == pytest.approx(before.start + 0.2, abs=1 / 25 + 1e-6)  # on the frame of the onset
        assert after.lines == before.lines
    check_rules(refined, L.PROFILES["standard"], "en", text)
    # Nothing close enough: the TTS time stays.
    assert snap_starts(plain, [(c.start + 0.6, c.start + 0.9, "w") for c in plain]) == plain
