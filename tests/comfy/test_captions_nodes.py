"""Captions through the real ComfyUI server with the tiny OmniVoice: Text Prepare -> OmniVoice Speak -> Audio
Master -> Broadcast Captions -> Export Video. The MP4's soft track and the SRT / WebVTT sidecars are read back by
FFmpeg's own decoders (through PyAV) and must carry the same cues, showing the script as written; the headless
runner lists the caption files with the video; bad inputs fail with the input named."""
from __future__ import annotations

import av
import numpy as np
import pytest
import soundfile as sf

from engines.qc import THRESHOLDS
from scripts.batch.jobs import output_items
from scripts.run_workflow import output_files
from tests.fixtures.tiny_omnivoice import install_tiny_omnivoice

SCRIPT = "El dólar subió un 42,5% hasta US$ 3,2 M. La bolsa cerró con ganancias del 1,8% en el día."
EXPORT = {"fps": 25.0, "filename_prefix": "captions/clip", "encoder": "x264", "preset": "auto", "tune": "auto",
          "rate_control": "cq", "quality": 30, "bitrate_kbps": 8000, "gop_seconds": 1.0, "bit_depth": "8",
          "faststart": True, "audio_mode": "match_audio", "audio_bitrate_kbps": 96}


@pytest.fixture(scope="module")
def tiny(comfy):
    install_tiny_omnivoice(comfy.models_dir)
    return comfy


def _graph(burn_in=False, language="auto", caption_audio=("4", 0)):
    return {
        "1": {"class_type": "BroadcastOmniVoiceLoader",
              "inputs": {"model_name": "omnivoice", "precision": "auto", "warmup": "none"}},
        "2": {"class_type": "BroadcastTextPrepare",
              "inputs": {"text": SCRIPT, "language": "es", "voseo": False, "min_words": 3, "max_sub_batch": 4}},
        "3": {"class_type": "BroadcastOmniVoiceSpeak",
              "inputs": {"omnivoice_model": ["1", 0], "clauses": ["2", 0], "text": "", "language": "es",
                         "preset": "custom", "steps": 2, "guidance": 2.0, "t_shift": 0.9, "layer_penalty": 0.05,
                         "speed": 2.0, "seed": 3, "trim_silence": True}},
        "4": {"class_type": "BroadcastAudioMaster",
              "inputs": {"audio": ["3", 0], "lowpass": True, "lowpass_hz": 9600.0, "deess": True,
                         "deess_threshold": 0.045, "deess_max_db": 7.0, "terminal_s": True, "loudness": True,
                         "target_lufs": -16.0, "limit": True, "ceiling_dbtp": -1.0}},
        "5": {"class_type": "BroadcastCaptions",
              "inputs": {"caption_timing": ["3", 2], "audio": list(caption_audio), "profile": "standard",
                         "language": language, "max_cps": 0.0, "fps": 25.0, "speaker_names": True,
                         "sidecars": True, "soft_track": True, "burn_in": burn_in, "burn_style": "outline"}},
        "6": {"class_type": "EmptyImage", "inputs": {"width": 160, "height": 96, "batch_size": 400, "color": 0}},
        "7": {"class_type": "BroadcastExportVideo",
              "inputs": {**EXPORT, "images": ["6", 0], "audio": ["4", 0], "captions": ["5", 0]}},
        "9": {"class_type": "BroadcastQC",
              "inputs": {"fps": 25.0, "expected_text": "", "whisper_model": "(none)", "language": "",
                         "loudness_preset": "streaming -14 LUFS", "channel_layout": "mono_or_stereo",
                         **{t.name: t.default for t in THRESHOLDS}, "video": ["7", 0], "captions": ["5", 0]}},
    }


def _cues(path):
    out = []
    with av.open(str(path)) as container:
        stream = container.streams.subtitles[0]
        for packet in container.demux(stream):
            if packet.size <= 2:
                continue
            for sub in packet.decode():
                a = float(packet.pts * packet.time_base)
                out.append((round(a, 3), round(a + float(packet.duration * packet.time_base), 3),
                            sub.dialogue.decode()))
        return out, stream.metadata.get("language")


def test_caption_node_is_listed_with_tooltips(tiny):
    info = tiny.object_info()
    node = info["BroadcastCaptions"]
    assert node["output"] == ["BROADCAST_CAPTIONS", "STRING"] and node["category"] == "Broadcast/captions"
    for name, spec in node["input"]["required"].items():
        assert spec[1].get("tooltip"), name
    assert "42" in node["input"]["required"]["profile"][1]["tooltip"]  # the figures are in the tooltip
    assert info["BroadcastOmniVoiceSpeak"]["output"][2] == "BROADCAST_CAPTION_TIMING"
    assert info["BroadcastExportVideo"]["input"]["optional"]["captions"][0] == "BROADCAST_CAPTIONS"


@pytest.mark.parametrize("burn_in", [False, True])
def test_speech_to_mp4_with_soft_track_and_sidecars(tiny, burn_in):
    history = tiny.run(_graph(burn_in=burn_in), timeout=600)
    export = history["outputs"]["7"]
    names = [item["filename"] for item in export["captions"]]
    assert len(names) == 2 and names[0].endswith(".es.srt") and names[1].endswith(".es.vtt")
    files = output_files(history, {"output": str(tiny.output_dir), "temp": str(tiny.temp_dir)}, "")
    video = files[-1]
    assert video.endswith(".mp4") and all(any(f.endswith(n) for f in files) for n in names)
    assert set(names) <= {i["filename"] for i in output_items(history)}  # the batch runner copies them too
    muxed, language = _cues(video)
    srt, _ = _cues(tiny.output_dir / "captions" / names[0])
    vtt, _ = _cues(tiny.output_dir / "captions" / names[1])
    assert language == "spa" and muxed and muxed == srt == vtt
    shown = " ".join(text.replace("\n", " ") for *_, text in muxed)
    assert "42,5%" in shown and "US$ 3,2 M." in shown and "1,8%" in shown  # as written, not as spoken
    assert history["outputs"]["5"]["text"][0].startswith("1\n")  # the SRT preview
    (verdict,) = history["outputs"]["9"]["broadcast_qc"]  # Broadcast QC read the same files back
    checks = verdict["report"]["checks"]
    assert checks["caption_tracks"]["status"] == "pass", checks["caption_tracks"]
    assert checks["caption_lines"]["status"] == "pass" and checks["caption_speech"]["status"] != "skip"
    if burn_in:
        with av.open(video) as container:
            lit = max(frame.to_ndarray(format="rgb24").max() for frame in container.decode(video=0))
        assert lit > 200  # white text on the black frames


def test_whisper_word_times_refine_the_captions(tiny):
    import json

    from tests.fixtures.tiny_whisper import install_tiny_whisper

    folder = install_tiny_whisper(tiny.models_dir, "whisper-aligned")
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "alignment_heads": [[0, 0]]}))
    graph = _graph()
    graph["5"]["inputs"]["whisper_model"] = "whisper-aligned"
    history = tiny.run(graph, timeout=600)
    names = [item["filename"] for item in history["outputs"]["7"]["captions"]]
    muxed, _ = _cues(tiny.output_dir / "captions" / names[0].replace(".es.srt", ".mp4"))
    assert muxed and muxed == _cues(tiny.output_dir / "captions" / names[0])[0]
    (verdict,) = history["outputs"]["9"]["broadcast_qc"]
    assert verdict["report"]["checks"]["caption_tracks"]["status"] == "pass"


def test_bad_caption_inputs_name_the_input(tiny):
    sf.write(tiny.input_dir / "captions_other.wav", np.zeros(24000, np.float32), 24000)
    graph = _graph(caption_audio=("8", 0))
    graph["8"] = {"class_type": "LoadAudio", "inputs": {"audio": "captions_other.wav"}}
    error = tiny.run_error(graph)
    assert error["node_type"] == "BroadcastCaptions"
    assert "audio" in error["exception_message"] and "caption timing" in error["exception_message"]
    french = _graph()
    french["2"]["inputs"].update(text="Bonsoir à tous, voici les nouvelles du jour.", language="fr")
    error = tiny.run_error(french)
    assert error["node_type"] == "BroadcastCaptions" and "language" in error["exception_message"]
