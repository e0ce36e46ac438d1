"""Voice design (instruct + cadence presets), voice morph and dialogue on the tiny random OmniVoice
(engines/omnivoice/speak.py, morph.py, dialogue.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engines.common.errors import InputError
from engines.omnivoice import dialogue as D
from engines.omnivoice import master as M
from engines.omnivoice import model as ov_model, morph, prompt as ov_prompt, speak as ov_speak
from engines.omnivoice.text import JOIN_ELLIPSIS, prepare_text
from tests.fixtures.speech import voiced_speech
from tests.fixtures.tiny_omnivoice import install_tiny_omnivoice, reference_voice

FAST = ov_speak.SpeakSettings(num_step=4, speed=2.0, seed=1)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    loaded = ov_model.load_omnivoice(install_tiny_omnivoice(tmp_path_factory.mktemp("models")), precision="auto")
    # A trained residual quantiser re-encodes its own latents (project_in undoes project_out); a random one maps
    # every latent to the code nearest zero, so a blend could not move. Give the tiny one that property.
    with torch.no_grad():
        for stage in loaded.model.audio_tokenizer.quantizer.quantizers:
            inverse = torch.linalg.pinv(stage.project_out.weight)
            stage.project_in.weight.copy_(inverse)
            stage.project_in.bias.copy_(-inverse @ stage.project_out.bias)
    return loaded


@pytest.fixture(scope="module")
def voices(loaded):
    a, _ = ov_prompt.build_prompt(loaded, reference_voice(2.0, seed=0), "This is the anchor speaking.")
    b, _ = ov_prompt.build_prompt(loaded, voiced_speech(3.0, seed=3).astype(np.float32),
                                  "And this is the correspondent.")
    return a, b


# voice design ----------------------------------------------------------------------------------------------------
def test_cadence_presets_map_onto_instruct_items():
    assert ov_speak.resolve_instruct("", "breaking_urgent") == "young adult, moderate pitch"
    assert ov_speak.resolve_instruct("female", "narrative_slow") == "middle-aged, low pitch, female"
    assert ov_speak.resolve_instruct("Young Adult, male", "casual_banter") == "young adult, male"  # counted once
    assert ov_speak.resolve_instruct("", "none") is None and ov_speak.resolve_instruct("  ", "none") is None
    with pytest.raises(InputError, match="instruct") as err:
        ov_speak.resolve_instruct("femail", "none")
    assert "female" in str(err.value)  # upstream's suggestion is passed on
    with pytest.raises(InputError, match="instruct"):
        ov_speak.resolve_instruct("elderly", "breaking_urgent")  # two ages
    with pytest.raises(InputError, match="cadence"):
        ov_speak.resolve_instruct("", "shouting")


def test_voice_design_speaks_without_a_reference_and_instruct_reaches_the_model(loaded, voices, monkeypatch):
    prepared = prepare_text("Good evening and welcome to the news.", "en")
    designed = ov_speak.SpeakSettings(num_step=4, seed=2, instruct="female", cadence="narrative_slow")
    first = ov_speak.speak(loaded, prepared, None, designed)
    again = ov_speak.speak(loaded, prepared, None, designed)
    assert first.samples.size > 0 and np.array_equal(first.samples, again.samples)
    plain = ov_speak.speak(loaded, prepared, None, ov_speak.SpeakSettings(num_step=4, seed=2))
    assert not np.array_equal(first.samples, plain.samples)  # the instruct changes the model's input

    seen = []
    real = loaded.model.generate
    monkeypatch.setattr(loaded.model, "generate", lambda **kw: seen.append(kw) or real(**kw))
    ov_speak.speak(loaded, prepared, voices[0], ov_speak.SpeakSettings(num_step=2, cadence="commercial_hook"))
    assert seen[0]["instruct"] == "young adult, high pitch" and seen[0]["voice_clone_prompt"] is not None


# voice morph -----------------------------------------------------------------------------------------------------
def test_morph_endpoints_are_the_parents_and_the_weight_moves_the_blend(loaded, voices):
    a, b = voices
    assert morph.blend_prompts(loaded, a, b, 1.0) is a and morph.blend_prompts(loaded, a, b, 0.0) is b
    blends = {w: morph.blend_prompts(loaded, a, b, w) for w in (0.2, 0.5, 0.8)}
    for w, blend in blends.items():
        assert blend.tokens.shape == a.tokens.shape and blend.tokens.dtype == torch.int64  # A's length
        assert blend.ref_text == a.ref_text and blend.fingerprint == loaded.fingerprint
        assert blend.ref_rms == pytest.approx(w * a.ref_rms + (1 - w) * b.ref_rms)
        assert 0 <= int(blend.tokens.min()) and int(blend.tokens.max()) < 1024
    to_a = [morph.latent_distance(loaded, blends[w], a) for w in (0.2, 0.5, 0.8)]
    to_b = [morph.latent_distance(loaded, blends[w], b) for w in (0.2, 0.5, 0.8)]
    assert to_a[0] > to_a[1] > to_a[2] and to_b[0] < to_b[1] < to_b[2]  # more weight on A: closer to A
    assert not torch.equal(blends[0.5].tokens, a.tokens)
    again = morph.blend_prompts(loaded, a, b, 0.5)
    assert torch.equal(again.tokens, blends[0.5].tokens) and again.key == blends[0.5].key


def test_a_morph_is_saved_and_spoken_like_any_voice(loaded, voices, tmp_path):
    blend = morph.blend_prompts(loaded, *voices, 0.7)
    path = ov_prompt.save_prompt(blend, tmp_path / "duo.safetensors")
    back = ov_prompt.load_prompt(path)
    assert torch.equal(back.tokens, blend.tokens) and back.ref_text == blend.ref_text
    out = ov_speak.speak(loaded, prepare_text("The blended voice reads the news.", "en"), back, FAST)
    assert out.samples.size > 0 and np.isfinite(out.samples).all()


def test_morph_refuses_bad_weights_and_foreign_voices(loaded, voices):
    a, b = voices
    with pytest.raises(InputError, match="weight"):
        morph.blend_prompts(loaded, a, b, 1.5)
    foreign = ov_prompt.VoicePrompt(tokens=b.tokens, ref_text=b.ref_text, ref_rms=b.ref_rms, fingerprint="other")
    with pytest.raises(InputError, match="voice_b"):
        morph.blend_prompts(loaded, a, foreign, 0.5)


# dialogue --------------------------------------------------------------------------------------------------------
SCRIPT = """Anchor: Good evening and welcome to the news!... We start with the markets.
[correspondent] Thank you. Stocks closed higher today across the region.
and the currency held steady all afternoon.
ANCHOR: Thank you for that report from the city."""


def test_script_and_cast_parsing():
    cast = D.parse_cast("anchor = ruby\nCorrespondent = atlas  \n# the guest is not on tonight\n")
    assert cast == {"anchor": "ruby", "correspondent": "atlas"}
    turns = D.parse_script(SCRIPT, cast)
    assert [t.speaker for t in turns] == ["anchor", "correspondent", "anchor"]
    assert turns[1].text == "Thank you. Stocks closed higher today across the region. and the currency held " \
                            "steady all afternoon."
    assert D.parse_script("Anchor: one.\nAnchor: two.", cast) == [D.Turn("anchor", "one. two.")]
    assert D.parse_script("Anchor: Time: nine o'clock.", cast)[0].text == "Time: nine o'clock."  # not a tag
    with pytest.raises(InputError, match="guest"):
        D.parse_script("[guest] Hello there everyone.", cast)
    with pytest.raises(InputError, match="speaker tag"):
        D.parse_script("No tag on this line.", cast)
    with pytest.raises(InputError, match="speakers"):
        D.parse_cast("anchor ruby")


def test_dialogue_reads_each_turn_in_its_voice_with_the_single_voice_joins(loaded, voices, monkeypatch):
    cast = {"anchor": voices[0], "correspondent": voices[1]}
    turns = D.parse_script(SCRIPT, cast)
    seen = []
    real = loaded.model.generate
    monkeypatch.setattr(loaded.model, "generate", lambda **kw: seen.append(kw) or real(**kw))
    result = D.speak_dialogue(loaded, turns, cast, "en", FAST, level_match=False)
    monkeypatch.undo()
    # Every clause went to the model with its speaker's codes.
    by_text = {}
    for call in seen:
        prompts = call["voice_clone_prompt"] if isinstance(call["voice_clone_prompt"], list) else \
            [call["voice_clone_prompt"]] * len(call["text"])
        for text, vp in zip(call["text"], prompts):
            by_text[text] = vp.ref_text
    assert by_text["Good evening and welcome to the news!"] == voices[0].ref_text
    assert by_text["Thank you. Stocks closed higher today across the region."] == voices[1].ref_text
    assert [s for s, *_ in result.turns] == ["anchor", "correspondent", "anchor"]
    starts = [t[1] for t in result.turns]
    assert starts[0] == 0.0 and starts == sorted(starts) and result.turns[-1][2] == pytest.approx(
        result.samples.size / 24000, abs=1e-3)
    assert prepare_text(turns[0].text, "en").joins == (JOIN_ELLIPSIS,)  # the turn keeps its ellipsis join

    # A one-turn dialogue is exactly the single-voice path.
    single = D.speak_dialogue(loaded, turns[:1], cast, "en", FAST, level_match=False)
    alone = ov_speak.speak(loaded, prepare_text(turns[0].text, "en"), voices[0], FAST)
    assert np.array_equal(single.samples, alone.samples)
    again = D.speak_dialogue(loaded, turns, cast, "en", FAST, level_match=False)
    assert np.array_equal(again.samples, result.samples)


def test_dialogue_levels_match_between_speakers_and_the_track_masters_on_target(loaded, voices):
    cast = {"anchor": voices[0], "correspondent": voices[1]}
    turns = [D.Turn("anchor", "Good evening and welcome to the evening news from the studio."),
             D.Turn("correspondent", "Thank you, the markets closed higher today across the whole region.")]
    matched = D.speak_dialogue(loaded, turns, cast, "en", FAST, level_match=True)
    sr = matched.sample_rate

    def turn_lufs(result, k):
        _, start, end, _ = result.turns[k]
        return M.measure_lufs(result.samples[int(start * sr) + 2400:int(end * sr) - 2400][None].astype(float), sr)

    assert abs(turn_lufs(matched, 0) - turn_lufs(matched, 1)) < 1.0
    track, report = M.master(matched.samples, sr, M.MasterSettings(target_lufs=-16.0))
    assert report.target_reached and abs(report.output_lufs + 16.0) <= 0.3 and report.output_true_peak_db <= -1.0
