"""Caption timing from the TTS engines: the written text of every clause (engines/omnivoice/written.py) and where
each clause is heard in the joined, mastered audio (joins.join_with_spans, engines/captions/timing.py), through
single voice, instruct, morph, dialogue, long texts cut into clauses, breaths and speed changes, on the tiny
OmniVoice. The oracles are the script itself and the generated clips' own samples."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engines.common.errors import InputError
from engines.omnivoice import dialogue as D
from engines.omnivoice import joins as J
from engines.omnivoice import master as M
from engines.omnivoice import model as ov_model, morph, prompt as ov_prompt, speak as ov_speak
from engines.omnivoice.normalize import NormalizeSettings
from engines.omnivoice.text import JOIN_BREATH, JOIN_ELLIPSIS, JOIN_PAUSE, MAX_WORDS, prepare_text
from tests.fixtures.tiny_omnivoice import install_tiny_omnivoice, reference_voice

SR = 24000
ES = ("El dólar subió un 42,5% hasta US$ 3,2 M. El Sr. García habló con la AFIP el 15/03/2026. ¡Atención! "
      "Hoy es un día importante, porque el índice S&P 500 cayó un 3% y los mercados de Asia, Europa y América "
      "reaccionaron con fuerza durante toda la jornada de ayer.")
EN = ("Mr. Smith paid $3.5B for the company. The CEO said... nothing. Then, after a long pause, the board of "
      "directors met in New York to discuss the 2020-2025 plan and the 1,500,000 shares.")


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("script, language", [(ES, "es"), (EN, "en")])
def test_every_clause_carries_the_script_as_written(script, language):
    prepared = prepare_text(script, language, normalization=NormalizeSettings(), max_words=MAX_WORDS)
    assert len(prepared.written) == len(prepared.clauses)
    # Nothing of the script is lost or repeated, in order; the spoken clauses have no digits left.
    assert _flat(" ".join(w for w in prepared.written if w)) == _flat(script)
    assert not any(re.search(r"\d", c) for c in prepared.clauses)
    assert any(re.search(r"\d", w) for w in prepared.written)


def test_figures_currency_and_acronyms_stay_as_typed():
    prepared = prepare_text(ES, "es", normalization=NormalizeSettings(), max_words=MAX_WORDS)
    pairs = dict(zip(prepared.written, prepared.clauses))
    assert pairs["El dólar subió un 42,5% hasta US$ 3,2 M."] == \
        "El dólar subió un cuarenta y dos coma cinco por ciento hasta tres coma dos millones de dólares."
    assert pairs["El Sr. García habló con la AFIP el 15/03/2026."].startswith("El señor García")
    # The long sentence was cut at its commas for the voice; the written text is cut at the same commas.
    assert "porque el índice S&P 500 cayó un 3% y los mercados de Asia," in prepared.written
    en = prepare_text(EN, "en", normalization=NormalizeSettings(), max_words=MAX_WORDS)
    assert "The CEO said... nothing." in en.written and "The C-E-O said, nothing." in en.clauses


def test_a_sentence_whose_normalisation_reads_across_its_end_is_kept_whole():
    # "Sr." ends a written sentence (". " follows it) but the normalisation reads it with the next words.
    prepared = prepare_text("Habló el Sr. García López ayer. Luego se fue.", "es", normalization=NormalizeSettings())
    assert _flat(" ".join(w for w in prepared.written if w)) == "Habló el Sr. García López ayer. Luego se fue."
    assert prepared.written[0].startswith("Habló el Sr. García")


def test_plain_text_without_normalisation_maps_one_to_one():
    prepared = prepare_text("Good evening and welcome. We begin with the markets today.", "en")
    assert prepared.written == prepared.clauses


def _exact_regions(out, clips, spans):
    """Outside the crossfades (where neighbouring spans overlap, or a clip fades into a breath's silence) the joined
    audio is each clip, sample for sample."""
    fade = int((max(J.CROSSFADE_MS.values()) + 2 * J.SEARCH_MS) * SR / 1000)
    for i, (clip, (start, end)) in enumerate(zip(clips, spans)):
        lo = max(start, spans[i - 1][1] if i else 0)
        hi = min(end - fade, spans[i + 1][0]) if i + 1 < len(spans) else end
        assert hi - lo > 0.5 * clip.size
        np.testing.assert_array_equal(out[lo:hi], np.asarray(clip, np.float32)[lo - start:hi - start])


@pytest.mark.parametrize("kind", [JOIN_PAUSE, JOIN_ELLIPSIS, JOIN_BREATH])
def test_join_spans_place_every_clip_to_the_sample(kind):
    rng = np.random.default_rng(1)
    clips = [np.concatenate([np.zeros(n0), rng.uniform(-0.5, 0.5, SR // 2), np.zeros(n1)])
             for n0, n1 in ((0, 120), (30, 0), (0, 0))]  # no quiet: a breath join adds silence
    out, spans = J.join_with_spans(clips, [kind, kind], SR)
    assert np.array_equal(out, J.join_clauses(clips, [kind, kind], SR))
    assert spans[0][0] == 0 and spans[-1][1] == out.size
    _exact_regions(out, clips, spans)
    if kind == JOIN_BREATH:  # the added silence sits before the clip's span, not inside it
        assert spans[1][0] - spans[0][1] > 0.1 * SR


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    return ov_model.load_omnivoice(install_tiny_omnivoice(tmp_path_factory.mktemp("models")), precision="auto")


@pytest.fixture(scope="module")
def voices(loaded):
    a, _ = ov_prompt.build_prompt(loaded, reference_voice(2.0, seed=0), "This is the anchor speaking.")
    b, _ = ov_prompt.build_prompt(loaded, reference_voice(2.5, seed=5), "And this is the correspondent.")
    return a, b


def _recorded(monkeypatch, module):
    seen = []
    real = module.generate_clips

    def record(*args, **kwargs):
        clips = real(*args, **kwargs)
        seen.append(clips)
        return clips
    monkeypatch.setattr(module, "generate_clips", record)
    return seen


@pytest.mark.parametrize("speed, instruct, voice", [(1.0, "", "a"), (2.0, "", "a"), (0.8, "female", None),
                                                    (1.0, "", "morph")])
def test_speak_timing_matches_the_joined_audio(loaded, voices, monkeypatch, speed, instruct, voice):
    prompt = {"a": voices[0], None: None, "morph": morph.blend_prompts(loaded, *voices, 0.5)}[voice]
    prepared = prepare_text(EN, "en", normalization=NormalizeSettings(), max_words=MAX_WORDS, max_batch=2)
    assert JOIN_BREATH in prepared.joins  # the long sentence is cut with a breath
    seen = _recorded(monkeypatch, ov_speak)
    result = ov_speak.speak(loaded, prepared, prompt, ov_speak.SpeakSettings(num_step=2, speed=speed, seed=1,
                                                                             instruct=instruct))
    timing = result.timing
    assert timing.length == result.samples.size and timing.sample_rate == SR and timing.language == "en"
    spans = [(s.start, s.end) for s in timing.spans]
    _exact_regions(result.samples, seen[0], spans)
    assert [s.written for s in timing.spans] == list(prepared.written)
    for s in timing.spans:
        assert s.start <= s.voice_start < s.voice_end <= s.end
    # Mastering keeps every sample where it was: the same timing holds for the mastered track.
    mastered, _ = M.master(result.samples, SR)
    timing.check_audio(mastered.shape[-1], SR)
    timing.check_audio(round(mastered.shape[-1] * 2), 2 * SR)  # a resampled copy of the same length in time
    with pytest.raises(InputError, match="audio"):
        timing.check_audio(mastered.shape[-1] - 240, SR)


def test_dialogue_timing_marks_each_speaker_and_matches_the_track(loaded, voices, monkeypatch):
    cast = {"anchor": voices[0], "correspondent": voices[1]}
    turns = D.parse_script("Anchor: Good evening, the euro is at $1.08 today.\n"
                           "Correspondent: Thank you. Stocks closed 2% higher.\nAnchor: Back to you soon.", cast)
    seen = _recorded(monkeypatch, D)
    result = D.speak_dialogue(loaded, turns, cast, "en", ov_speak.SpeakSettings(num_step=2, speed=2.0, seed=1),
                              {"normalization": NormalizeSettings()}, level_match=False)
    timing = result.timing
    assert timing.length == result.samples.size
    assert [s.speaker for s in timing.spans][0] == "anchor" and "correspondent" in {s.speaker for s in timing.spans}
    assert "Good evening, the euro is at $1.08 today." in [s.written for s in timing.spans]
    _exact_regions(result.samples, seen[0], [(s.start, s.end) for s in timing.spans])
    # Each turn's clauses lie inside that turn's span of the track.
    for speaker, begin, end, _ in result.turns:
        own = [s for s in timing.spans if s.speaker == speaker and begin * SR - 1 <= s.start < end * SR]
        assert own and all(s.end <= end * SR + 1 for s in own)
