"""OmniVoice engine on the tiny random model: loader, voice prompts and their cache, speak (engines/omnivoice/)."""
from __future__ import annotations

import json
import shutil
import socket
import time

import numpy as np
import pytest
import torch

from engines.common.cache import ContentCache
from engines.common.errors import InputError, ModelFilesMissing
from engines.omnivoice import model as ov_model, prompt as ov_prompt, speak as ov_speak
from engines.omnivoice.text import prepare_text
from tests.fixtures.tiny_omnivoice import install_tiny_omnivoice, reference_voice

REF_TEXT = "This is a short synthetic reference."


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return install_tiny_omnivoice(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def no_network():
    """Any connection attempt away from this machine fails the test that made it."""
    real = socket.socket.connect
    attempts = []

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if host not in ("127.0.0.1", "::1", "localhost") and not str(host).startswith("/"):
            attempts.append(address)
            raise OSError(f"network access attempted: {address}")
        return real(self, address)

    socket.socket.connect = guarded
    yield attempts
    socket.socket.connect = real


@pytest.fixture(scope="module")
def loaded(folder, no_network):
    return ov_model.load_omnivoice(folder, precision="auto")


def test_loader_reads_the_local_folder_with_an_fp32_decoder(loaded, no_network):
    assert loaded.sample_rate == 24000 and loaded.frame_rate == 25 and loaded.num_codebooks == 8
    assert loaded.backbone_dtype == torch.float32  # auto on the CPU
    assert all(p.dtype == torch.float32 for p in loaded.model.audio_tokenizer.parameters())
    assert no_network == []


def test_bf16_backbone_keeps_the_decoder_fp32(folder):
    bf = ov_model.load_omnivoice(folder, precision="bf16")
    assert next(bf.model.llm.parameters()).dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in bf.model.audio_tokenizer.parameters())


def test_loader_refuses_incomplete_or_foreign_folders(folder, tmp_path):
    broken = tmp_path / "no_tokenizer"
    shutil.copytree(folder, broken)
    shutil.rmtree(broken / "audio_tokenizer")  # upstream would silently download a tokenizer here
    with pytest.raises(ModelFilesMissing, match="audio_tokenizer/model.safetensors"):
        ov_model.load_omnivoice(broken)
    foreign = tmp_path / "foreign"
    shutil.copytree(folder, foreign)
    cfg = json.loads((foreign / "config.json").read_text())
    (foreign / "config.json").write_text(json.dumps({**cfg, "model_type": "qwen3"}))
    with pytest.raises(InputError, match="model_type 'omnivoice'"):
        ov_model.load_omnivoice(foreign)
    with pytest.raises(InputError, match="precision"):
        ov_model.load_omnivoice(folder, precision="fp16", device=torch.device("cpu"))


def test_prompt_is_built_once_then_read_from_the_cache(loaded, tmp_path):
    cache = ContentCache(tmp_path / "cache")
    ref = reference_voice(2.0)
    t0 = time.perf_counter()
    cold, hit = ov_prompt.build_prompt(loaded, ref, REF_TEXT, cache=cache)
    cold_s = time.perf_counter() - t0
    assert not hit and cold.tokens.shape == (8, 50) and cold.tokens.dtype == torch.int64
    assert cold.ref_text == REF_TEXT
    t0 = time.perf_counter()
    warm, hit = ov_prompt.build_prompt(loaded, ref, REF_TEXT, cache=cache)
    assert hit and torch.equal(warm.tokens, cold.tokens) and warm.ref_rms == cold.ref_rms
    assert time.perf_counter() - t0 < cold_s
    other, hit = ov_prompt.build_prompt(loaded, ref, REF_TEXT + " Again.", cache=cache)
    assert not hit  # a different transcript is a different prompt
    assert len(list((tmp_path / "cache" / ov_prompt.CACHE_NAMESPACE).iterdir())) == 2


@pytest.mark.parametrize("samples, text, message", [
    (reference_voice(0.5), REF_TEXT, "at least 1 s"),
    (np.zeros(48000, np.float32), REF_TEXT, "silence"),
    (np.where(np.arange(48000) == 5, np.nan, reference_voice(2.0)).astype(np.float32), REF_TEXT, "NaN"),
    (reference_voice(2.0), "  ", "reference_text"),
])
def test_bad_references_are_refused_and_nothing_is_cached(loaded, tmp_path, samples, text, message):
    cache = ContentCache(tmp_path / "cache")
    with pytest.raises(InputError, match=message):
        ov_prompt.build_prompt(loaded, samples, text, cache=cache)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*"))


def test_saved_prompt_round_trips_and_foreign_files_are_refused(loaded, tmp_path):
    prompt, _ = ov_prompt.build_prompt(loaded, reference_voice(2.0), REF_TEXT)
    path = ov_prompt.save_prompt(prompt, tmp_path / "voices" / "anchor.safetensors")
    assert [p.name for p in path.parent.iterdir()] == ["anchor.safetensors"]  # no temporary left behind
    back = ov_prompt.load_prompt(path)
    assert torch.equal(back.tokens, prompt.tokens) and back.ref_text == prompt.ref_text
    assert back.ref_rms == pytest.approx(prompt.ref_rms) and back.fingerprint == loaded.fingerprint
    from safetensors.torch import save_file

    save_file({"weights": torch.zeros(3)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(InputError, match="saved_voice"):
        ov_prompt.load_prompt(tmp_path / "other.safetensors")
    stranger = ov_prompt.VoicePrompt(tokens=prompt.tokens, ref_text="x", ref_rms=0.1, fingerprint="0" * 32)
    with pytest.raises(InputError, match="another OmniVoice tokenizer"):
        ov_prompt.check_compatible(stranger, loaded)


def test_presets_map_onto_real_generation_fields():
    from dataclasses import fields

    from omnivoice import OmniVoiceGenerationConfig

    known = {f.name for f in fields(OmniVoiceGenerationConfig)}
    posts = ov_speak.SpeakSettings.from_preset("posts")
    assert (posts.num_step, posts.t_shift, posts.layer_penalty_factor) == (10, 0.9, 0.05)
    upstream = ov_speak.SpeakSettings.from_preset("upstream").generation_kwargs()
    assert set(upstream) <= known
    defaults = OmniVoiceGenerationConfig()
    for name, value in upstream.items():
        if name != "postprocess_output":
            assert getattr(defaults, name) == value, name
    with pytest.raises(InputError, match="preset"):
        ov_speak.SpeakSettings.from_preset("fast")


def test_speak_batches_clauses_joins_them_and_is_reproducible(loaded, no_network):
    prompt, _ = ov_prompt.build_prompt(loaded, reference_voice(2.0), REF_TEXT)
    prepared = prepare_text("Good evening and welcome. We begin with the markets... They closed higher today. "
                            "Stay with us for more.", "en", max_batch=2)
    assert len(prepared.sub_batches) == 2
    settings = ov_speak.SpeakSettings(num_step=4, speed=2.0, seed=3)
    first = ov_speak.speak(loaded, prepared, prompt, settings)
    again = ov_speak.speak(loaded, prepared, prompt, settings)
    other = ov_speak.speak(loaded, prepared, prompt, ov_speak.SpeakSettings(num_step=4, speed=2.0, seed=4))
    assert first.sample_rate == 24000 and first.samples.dtype == np.float32
    assert np.array_equal(first.samples, again.samples) and not np.array_equal(first.samples, other.samples)
    assert len(first.clause_seconds) == len(prepared.clauses)
    total = sum(first.clause_seconds) * 24000
    assert total - 24000 * 0.1 < first.samples.size < total  # joined with short overlaps, nothing dropped
    assert np.isfinite(first.samples).all()
    assert no_network == []


def test_cancel_between_sub_batches_stops_speak(loaded):
    from engines.common.progress import Progress

    prompt, _ = ov_prompt.build_prompt(loaded, reference_voice(2.0), REF_TEXT)
    prepared = prepare_text("Good evening and welcome. We begin with the markets today. Stay with us for more.", "en",
                            max_batch=1)
    calls = []

    def cancel():
        calls.append(1)
        raise InterruptedError("cancelled by the user")

    with pytest.raises(InterruptedError):
        ov_speak.speak(loaded, prepared, prompt, ov_speak.SpeakSettings(num_step=2), Progress(check_cancel=cancel))
    assert len(calls) == 1  # stopped after the first of three sub-batches


@pytest.mark.parametrize("clip, message", [(np.zeros(0, np.float32), "trim_silence"),
                                           (np.full(2400, np.nan, np.float32), "precision")])
def test_empty_or_nan_clips_are_reported_with_the_setting_to_change(loaded, monkeypatch, clip, message):
    prompt, _ = ov_prompt.build_prompt(loaded, reference_voice(2.0), REF_TEXT)
    monkeypatch.setattr(loaded.model, "generate", lambda text, **_: [clip for _ in text])
    with pytest.raises(InputError, match=message):
        ov_speak.speak(loaded, prepare_text("Good evening and welcome.", "en"), prompt, ov_speak.SpeakSettings())


def test_voice_prompt_loads_a_saved_one_or_builds_transcribes_and_saves(loaded, tmp_path):
    ref = reference_voice(2.0)
    saved = tmp_path / "voices" / "anchor.safetensors"
    heard = []
    built = ov_prompt.voice_prompt(loaded, reference=ref, transcribe=lambda s: heard.append(len(s)) or REF_TEXT,
                                   save_path=saved)
    assert heard == [len(ref)] and built.ref_text == REF_TEXT and saved.is_file()
    back = ov_prompt.voice_prompt(loaded, saved_path=saved, reference=None)
    assert torch.equal(back.tokens, built.tokens)
    with pytest.raises(InputError, match="saved_voice.*'missing' \\(not found\\)"):
        ov_prompt.voice_prompt(loaded, saved_path=tmp_path / "voices" / "missing.safetensors")
    with pytest.raises(InputError, match="reference_audio"):
        ov_prompt.voice_prompt(loaded)
    with pytest.raises(InputError, match="reference_text"):  # no transcript and no Whisper to make one
        ov_prompt.voice_prompt(loaded, reference=ref, ref_text=" ")
    with pytest.raises(InputError, match="whisper_model: .*an empty transcript") as refused:  # Whisper heard nothing
        ov_prompt.voice_prompt(loaded, reference=ref, transcribe=lambda s: " \n", save_path=tmp_path / "v" / "x.sft")
    assert "reference_text" in str(refused.value) and not (tmp_path / "v").exists()
