"""OmniVoice nodes through the real ComfyUI server, offline, with the tiny random model.

loader -> voice prompt (reference from the input folder + transcript, saved under a name) -> text prepare -> speak
-> master, then the saved voice reused by name; bad references fail with the input named and nothing saved.
"""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from tests.fixtures.tiny_omnivoice import install_tiny_omnivoice, reference_voice

REF_TEXT = "This is a short synthetic reference."
SCRIPT = ("Con el sistema Click... lo instalás vos mismo. [sfx:click] ¡Transformá tu espacio en minutos!... "
          "Antes... [sfx:whoosh_transition] ¡y después!")


@pytest.fixture(scope="module")
def tiny(comfy):
    install_tiny_omnivoice(comfy.models_dir)
    sf.write(comfy.input_dir / "ov_reference.wav", reference_voice(2.0), 24000, subtype="FLOAT")
    sf.write(comfy.input_dir / "ov_short.wav", reference_voice(0.5), 24000, subtype="FLOAT")
    return comfy


def _audio_file(comfy, history, node_id):
    entry = history["outputs"][node_id]["audio"][0]
    base = {"temp": comfy.temp_dir, "output": comfy.output_dir}[entry["type"]]
    found = sorted(base.rglob(entry["filename"]))  # ComfyUI puts temp files in a "temp" folder of its own
    assert found, f"{entry['filename']} not found under {base}"
    return found[0]


def _graph(reference="ov_reference.wav", save_as="", saved_voice="(build from reference)"):
    return {
        "1": {"class_type": "BroadcastOmniVoiceLoader",
              "inputs": {"model_name": "omnivoice", "precision": "auto", "warmup": "none"}},
        "2": {"class_type": "LoadAudio", "inputs": {"audio": reference}},
        "3": {"class_type": "BroadcastVoicePrompt",
              "inputs": {"omnivoice_model": ["1", 0], "saved_voice": saved_voice, "reference_audio": ["2", 0],
                         "reference_text": REF_TEXT, "whisper_model": "(none)", "reference_language": "",
                         "trim_silence": True, "save_as": save_as}},
        "4": {"class_type": "BroadcastTextPrepare",
              "inputs": {"text": SCRIPT, "language": "es", "voseo": True, "min_words": 3, "max_sub_batch": 4}},
        "5": {"class_type": "BroadcastOmniVoiceSpeak",
              "inputs": {"omnivoice_model": ["1", 0], "voice_prompt": ["3", 0], "clauses": ["4", 0], "text": "",
                         "language": "en", "preset": "custom", "steps": 4, "guidance": 2.0, "t_shift": 0.9,
                         "layer_penalty": 0.05, "speed": 1.5, "seed": 7, "trim_silence": True}},
        "6": {"class_type": "BroadcastAudioMaster",
              "inputs": {"audio": ["5", 0], "lowpass": True, "lowpass_hz": 9600.0, "deess": True,
                         "deess_threshold": 0.045, "deess_max_db": 7.0, "terminal_s": True, "loudness": True,
                         "target_lufs": -14.0, "limit": True, "ceiling_dbtp": -1.0}},
        "7": {"class_type": "PreviewAudio", "inputs": {"audio": ["6", 0]}},
        "8": {"class_type": "PreviewAudio", "inputs": {"audio": ["6", 1]}},
    }


def test_nodes_are_listed_with_tooltips(tiny):
    info = tiny.object_info()
    for node in ("BroadcastOmniVoiceLoader", "BroadcastVoicePrompt", "BroadcastTextPrepare",
                 "BroadcastOmniVoiceSpeak", "BroadcastAudioMaster", "BroadcastSpeechVerify"):
        assert node in info, f"{node} is not registered"
        for name, spec in info[node]["input"].get("required", {}).items():
            assert spec[1].get("tooltip"), f"{node}.{name} has no tooltip"
    assert "omnivoice" in info["BroadcastOmniVoiceLoader"]["input"]["required"]["model_name"][1]["options"]


def test_reference_to_mastered_speech_and_saved_voice(tiny):
    history = tiny.run(_graph(save_as="anchor es"), timeout=600)
    mastered, rate = sf.read(_audio_file(tiny, history, "7"), always_2d=True)
    lipsync, rate16 = sf.read(_audio_file(tiny, history, "8"), always_2d=True)
    assert rate == 24000 and rate16 == 16000
    assert lipsync.shape[1] == 1
    assert abs(lipsync.shape[0] / 16000 - mastered.shape[0] / 24000) < 0.01
    assert mastered.shape[0] > 24000  # three clauses of speech, joined
    assert np.isfinite(mastered).all() and np.abs(mastered).max() <= 10 ** (-1 / 20) + 1e-3
    saved = tiny.models_dir / "omnivoice_voices" / "anchor es.safetensors"
    assert saved.is_file()
    assert any((tiny.models_dir / "broadcast_cache" / "omnivoice_prompt").iterdir())

    # The saved voice is offered by name and replaces the reference entirely (here: no reference connected).
    info = tiny.object_info()
    assert "anchor es" in info["BroadcastVoicePrompt"]["input"]["required"]["saved_voice"][1]["options"]
    graph = _graph(saved_voice="anchor es")
    del graph["3"]["inputs"]["reference_audio"], graph["2"]
    graph["5"]["inputs"].update(clauses=None, text="Good evening and welcome to the broadcast.", language="English")
    del graph["5"]["inputs"]["clauses"], graph["4"]
    history = tiny.run(graph, timeout=600)
    again, rate = sf.read(_audio_file(tiny, history, "7"))
    assert rate == 24000 and again.shape[0] > 0


def test_short_reference_is_refused_and_nothing_saved(tiny):
    error = tiny.run_error(_graph(reference="ov_short.wav", save_as="too short"))
    assert error["node_type"] == "BroadcastVoicePrompt"
    assert "reference_audio" in error["exception_message"] and "at least 1 s" in error["exception_message"]
    assert not (tiny.models_dir / "omnivoice_voices" / "too short.safetensors").exists()


def test_unknown_language_and_empty_transcript_are_refused(tiny):
    graph = _graph()
    graph["4"]["inputs"]["language"] = "klingonese"
    error = tiny.run_error(graph)
    assert error["node_type"] == "BroadcastTextPrepare" and "language" in error["exception_message"]
    graph = _graph()
    graph["3"]["inputs"]["reference_text"] = "   "
    error = tiny.run_error(graph)
    assert error["node_type"] == "BroadcastVoicePrompt" and "reference_text" in error["exception_message"]


def test_whisper_transcribes_the_reference_and_verifies_speech(tiny):
    """Empty reference_text + a local Whisper: the transcript comes from models/whisper, never from the hub."""
    from tests.fixtures.tiny_whisper import install_tiny_whisper

    install_tiny_whisper(tiny.models_dir)
    graph = _graph()
    graph["3"]["inputs"].update(reference_text="", whisper_model="whisper-tiny-random", reference_language="en")
    graph["5"]["inputs"]["steps"] = 2
    graph["9"] = {"class_type": "BroadcastSpeechVerify",
                  "inputs": {"audio": ["6", 0], "expected_text": SCRIPT, "whisper_model": "whisper-tiny-random",
                             "language": "es", "ignore_accents": True}}
    graph["10"] = {"class_type": "PreviewAny", "inputs": {"source": ["3", 1]}}
    history = tiny.run(graph, timeout=600)
    report = history["outputs"]["9"]["text"][0]
    assert report.startswith("word accuracy ") and "errors over 16 words" in report
    transcript = history["outputs"]["10"]["text"][0]
    assert transcript.strip()  # the random Whisper's bytes, used as the prompt's transcript

    graph["9"]["inputs"]["expected_text"] = "  "
    error = tiny.run_error(graph)
    assert error["node_type"] == "BroadcastSpeechVerify" and "expected_text" in error["exception_message"]


def test_out_of_range_settings_are_rejected_before_running(tiny):
    graph = _graph()
    graph["5"]["inputs"]["t_shift"] = 5.0  # max 2.0
    status, body = tiny.request("POST", "/prompt", {"prompt": graph})
    assert status == 400 and "5" in body.get("node_errors", {}), body


def test_mastering_lands_on_the_target_for_speech_that_needs_heavy_limiting(comfy):
    import json

    import pyloudnorm

    from tests.fixtures.speech import voiced_speech

    sf.write(comfy.input_dir / "ov_loud_speech.wav", voiced_speech(6.0).astype(np.float32), 24000, subtype="FLOAT")
    graph = {"1": {"class_type": "LoadAudio", "inputs": {"audio": "ov_loud_speech.wav"}},
             "2": {"class_type": "BroadcastAudioMaster",
                   "inputs": {"audio": ["1", 0], "lowpass": True, "lowpass_hz": 9600.0, "deess": True,
                              "deess_threshold": 0.045, "deess_max_db": 7.0, "terminal_s": True, "loudness": True,
                              "target_lufs": -14.0, "limit": True, "ceiling_dbtp": -1.0}},
             "3": {"class_type": "PreviewAny", "inputs": {"source": ["2", 2]}}}
    history = comfy.run(graph, timeout=300)
    entry = history["outputs"]["2"]
    mastered, rate = sf.read(_audio_file(comfy, history, "2"), always_2d=True)
    measured = pyloudnorm.Meter(rate).integrated_loudness(mastered)
    assert abs(measured - (-14.0)) <= 0.3  # the preview is FLAC: what a listener gets, measured from outside
    summary = entry["text"][0]
    assert "LUFS (target -14.0)" in summary and "not reachable" not in summary
    assert "dBTP (ceiling -1.0, limited at -1.5 for the codec)" in summary  # 0.5 dB codec headroom by default
    report = json.loads(history["outputs"]["3"]["text"][0])
    assert abs(report["output_lufs"] + 14.0) <= 0.3 and report["output_true_peak_db"] <= -1.0
    assert report["limiter_passes"] >= 2 and report["target_reached"]


def test_text_prepare_normalises_figures_before_splitting(comfy):
    script = ("¡Atención! La inflación fue de 42,5%. El BCRA compró US$ 3,2 M el 15/03/2026 a las 14:30 hs. "
              "Apple cayó en Wall Street. ¿Tienes la lluvia del CEO?")
    graph = {"1": {"class_type": "BroadcastTextPrepare",
                   "inputs": {"text": script, "language": "es", "voseo": True, "min_words": 3, "max_sub_batch": 4,
                              "yeismo": True, "dollar_sign": "pesos", "glossary": "BCRA = Banco Central"}},
             "2": {"class_type": "PreviewAny", "inputs": {"source": ["1", 1]}}}
    history = comfy.run(graph, timeout=120)
    assert history["outputs"]["2"]["text"][0].split("\n") == [
        "¡Atención, por favor!", "La inflación fue de cuarenta y dos coma cinco por ciento.",
        "El Banco Central compró tres coma dos mishones de dólares el quince de marzo de dos mil veintiséis a las "
        "catorce y treinta horas.", "La empresa Apple cashó en el distrito de Wall Street.",
        "¿Tenés la shuvia del C-E-O?"]
    # An API prompt written before these inputs existed still runs, with normalisation on (they are optional).
    del graph["1"]["inputs"]["yeismo"], graph["1"]["inputs"]["dollar_sign"], graph["1"]["inputs"]["glossary"]
    history = comfy.run(graph, timeout=120)
    assert "El B-C-R-A compró" in history["outputs"]["2"]["text"][0]
    graph["1"]["inputs"]["glossary"] = "BCRA el Banco Central"
    error = comfy.run_error(graph)
    assert error["node_type"] == "BroadcastTextPrepare" and "glossary" in error["exception_message"]


def _voice_graph(reference, text, save_as):
    return {"1": {"class_type": "BroadcastOmniVoiceLoader",
                  "inputs": {"model_name": "omnivoice", "precision": "auto", "warmup": "none"}},
            "2": {"class_type": "LoadAudio", "inputs": {"audio": reference}},
            "3": {"class_type": "BroadcastVoicePrompt",
                  "inputs": {"omnivoice_model": ["1", 0], "saved_voice": "(build from reference)",
                             "reference_audio": ["2", 0], "reference_text": text, "whisper_model": "(none)",
                             "reference_language": "", "trim_silence": True, "save_as": save_as}}}


def test_voice_design_morph_and_dialogue(tiny):
    import json

    from tests.fixtures.speech import voiced_speech

    sf.write(tiny.input_dir / "ov_correspondent.wav", voiced_speech(3.0, seed=3).astype(np.float32), 24000,
             subtype="FLOAT")
    graph = _voice_graph("ov_reference.wav", REF_TEXT, "dlg anchor")
    graph.update({
        "4": {"class_type": "LoadAudio", "inputs": {"audio": "ov_correspondent.wav"}},
        "5": {"class_type": "BroadcastVoicePrompt",
              "inputs": {**graph["3"]["inputs"], "reference_audio": ["4", 0],
                         "reference_text": "And this is the correspondent.", "save_as": "dlg corr"}},
        "6": {"class_type": "BroadcastVoiceMorph",
              "inputs": {"omnivoice_model": ["1", 0], "voice_a": ["3", 0], "voice_b": ["5", 0], "weight": 0.7,
                         "save_as": "dlg duo"}},
        "7": {"class_type": "BroadcastOmniVoiceSpeak",
              "inputs": {"omnivoice_model": ["1", 0], "voice_prompt": ["6", 0], "text": "The blended voice reads.",
                         "language": "en", "preset": "custom", "steps": 4, "guidance": 2.0, "t_shift": 0.1,
                         "layer_penalty": 5.0, "speed": 2.0, "seed": 1, "trim_silence": True,
                         "cadence": "breaking_urgent", "instruct": ""}},
        "8": {"class_type": "PreviewAudio", "inputs": {"audio": ["7", 0]}},
        "9": {"class_type": "PreviewAny", "inputs": {"source": ["7", 1]}},
    })
    # Voice design: no voice prompt connected.
    graph["10"] = {"class_type": "BroadcastOmniVoiceSpeak",
                   "inputs": {k: v for k, v in graph["7"]["inputs"].items() if k != "voice_prompt"}}
    graph["10"]["inputs"].update(instruct="female, low pitch", cadence="none", text="A designed voice reads.")
    graph["11"] = {"class_type": "PreviewAudio", "inputs": {"audio": ["10", 0]}}
    history = tiny.run(graph, timeout=600)
    voices = tiny.models_dir / "omnivoice_voices"
    assert all((voices / f"{n}.safetensors").is_file() for n in ("dlg anchor", "dlg corr", "dlg duo"))
    assert "instruct 'young adult, moderate pitch'" in history["outputs"]["9"]["text"][0]
    for node in ("8", "11"):
        audio, rate = sf.read(_audio_file(tiny, history, node))
        assert rate == 24000 and audio.size > 0 and np.isfinite(audio).all()

    dialogue = {"1": graph["1"],
                "2": {"class_type": "BroadcastOmniVoiceDialogue",
                      "inputs": {"omnivoice_model": ["1", 0],
                                 "script": "Anchor: Good evening and welcome to the news.\n"
                                           "[correspondent] Thank you, the markets closed higher today.\n"
                                           "Anchor: Thank you for that report.",
                                 "speakers": "anchor = dlg anchor\ncorrespondent = dlg duo", "language": "en",
                                 "preset": "posts", "speed": 2.0, "seed": 0, "cadence": "none",
                                 "normalize": True, "voseo": False, "yeismo": False, "level_match": True,
                                 "max_sub_batch": 4, "trim_silence": True}},
                "3": {"class_type": "BroadcastAudioMaster",
                      "inputs": {"audio": ["2", 0], "lowpass": True, "lowpass_hz": 9600.0, "deess": True,
                                 "deess_threshold": 0.045, "deess_max_db": 7.0, "terminal_s": True,
                                 "loudness": True, "target_lufs": -16.0, "limit": True, "ceiling_dbtp": -1.0}},
                "4": {"class_type": "PreviewAny", "inputs": {"source": ["2", 1]}},
                "5": {"class_type": "PreviewAny", "inputs": {"source": ["3", 2]}}}
    history = tiny.run(dialogue, timeout=600)
    turns = json.loads(history["outputs"]["4"]["text"][0])
    assert [t["speaker"] for t in turns] == ["anchor", "correspondent", "anchor"]
    audio, rate = sf.read(_audio_file(tiny, history, "2"))          # the dialogue's own player
    assert rate == 24000 and audio.size > 0
    report = json.loads(history["outputs"]["5"]["text"][0])
    assert report["target_reached"] and report["output_true_peak_db"] <= -1.0

    dialogue["2"]["inputs"]["speakers"] = "anchor = dlg anchor\ncorrespondent = nobody"
    error = tiny.run_error(dialogue)
    assert error["node_type"] == "BroadcastOmniVoiceDialogue" and "speakers" in error["exception_message"]
    graph = {"1": graph["1"]}
    graph["2"] = {"class_type": "BroadcastOmniVoiceSpeak",
                  "inputs": {"omnivoice_model": ["1", 0], "text": "Hello there, everyone.", "language": "en",
                             "preset": "upstream", "steps": 4, "guidance": 2.0, "t_shift": 0.1,
                             "layer_penalty": 5.0, "speed": 1.0, "seed": 0, "trim_silence": True,
                             "cadence": "breaking_urgent", "instruct": "elderly"}}
    graph["3"] = {"class_type": "PreviewAudio", "inputs": {"audio": ["2", 0]}}
    error = tiny.run_error(graph)
    assert error["node_type"] == "BroadcastOmniVoiceSpeak" and "instruct" in error["exception_message"]
