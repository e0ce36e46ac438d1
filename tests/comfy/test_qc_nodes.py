"""Broadcast QC through a real ComfyUI: export -> QC, the verdict in /history (the batch runner's contract), the
sheet preview, a failing clip reported without blocking the export, frames + audio input, Whisper, a VIDEO made from
tensors, bad input, and the real batch runner reading the verdicts into its ledger."""
import json

import pytest

from engines.qc import THRESHOLDS
from tests.fixtures.qc_clips import talking_clip

EXPORT = {
    "fps": ["1", 2], "filename_prefix": "qc/clip", "encoder": "x264", "preset": "veryfast", "tune": "auto",
    "rate_control": "cq", "quality": 20, "bitrate_kbps": 8000, "gop_seconds": 1.0, "bit_depth": "8",
    "faststart": True, "audio_mode": "match_video", "audio_bitrate_kbps": 192,
}
QC = {"fps": 25.0, "expected_text": "", "whisper_model": "(none)", "language": "", "loudness_preset":
      "streaming", "channel_layout": "mono_or_stereo", **{t.name: t.default for t in THRESHOLDS}}


@pytest.fixture(scope="module")
def clips(comfy):
    names = {}
    for name, fault in (("qc_clean.mp4", None), ("qc_low.mp4", "low_2lu")):
        path = comfy.input_dir / name
        if not path.exists():
            talking_clip(path, seconds=4.0, fault=fault)
        names[fault or "clean"] = name
    return names


def export_then_qc(video, **qc):
    return {
        "1": {"class_type": "BroadcastLoadVideo",
              "inputs": {"video": video, "frame_cap": 0, "skip_first_frames": 0, "target_fps": 0.0}},
        "2": {"class_type": "BroadcastExportVideo", "inputs": {**EXPORT, "images": ["1", 0], "audio": ["1", 1]}},
        "3": {"class_type": "BroadcastQC", "inputs": {**QC, "video": ["2", 0], **qc}},
    }


def test_node_is_listed_with_standards_in_its_tooltips(comfy):
    info = comfy.object_info()["BroadcastQC"]
    assert info["output_node"] is True
    assert info["output"] == ["BOOLEAN", "STRING", "STRING", "STRING", "IMAGE"]
    assert info["input"]["optional"]["video"][0] == "VIDEO"
    required = info["input"]["required"]
    assert "BS.1770" in required["max_true_peak_dbtp"][1]["tooltip"]
    assert "R103" in required["luma_max_percent"][1]["tooltip"]
    assert "R37" in required["max_audio_late_ms"][1]["tooltip"]
    profile = required["loudness_preset"]
    assert {"EBU R128", "ATSC A/85", "streaming", "podcast", "custom"} <= set(profile[0] if isinstance(profile[0], list)
                                                                              else profile[1]["options"])
    assert "-24 LKFS" in profile[1]["tooltip"] and "-2 dBTP" in profile[1]["tooltip"]


def test_clean_export_passes_and_the_verdict_is_in_history(comfy, clips):
    entry = comfy.run(export_then_qc(clips["clean"]))
    qc = entry["outputs"]["3"]
    (verdict,) = qc["broadcast_qc"]
    assert verdict["verdict"] == "pass" and verdict["failed"] == [], qc["text"][0]
    assert set(verdict["report"]["checks"]) >= {"integrated_loudness", "true_peak", "loudness_range", "luma_levels",
                                                "colour_tags", "frozen_frames", "lip_sync", "dropouts"}
    assert verdict["report"]["checks"]["colour_tags"]["status"] == "pass"  # the export's tags, read from its file
    json.dumps(verdict)  # plain JSON, as the ledger stores it
    sheet = qc["images"][0]
    assert sheet["type"] == "temp" and (comfy.temp_dir / sheet["subfolder"] / sheet["filename"]).is_file()
    assert qc["text"][0].startswith("Broadcast QC: PASS")


def test_failing_clip_is_reported_and_the_export_still_written(comfy, clips):
    entry = comfy.run(export_then_qc(clips["low_2lu"]))
    verdict = entry["outputs"]["3"]["broadcast_qc"][0]
    assert verdict["verdict"] == "fail" and verdict["failed"] == ["integrated_loudness"]
    written = entry["outputs"]["2"]["images"][0]
    assert (comfy.output_dir / written["subfolder"] / written["filename"]).is_file()
    # The same clip passes a custom target set to where it is.
    entry = comfy.run(export_then_qc(clips["low_2lu"], loudness_preset="custom", target_lufs=-16.0))
    assert entry["outputs"]["3"]["broadcast_qc"][0]["verdict"] == "pass"


def test_frames_and_audio_input_with_whisper(comfy, clips):
    from tests.fixtures.tiny_whisper import install_tiny_whisper

    install_tiny_whisper(comfy.models_dir)
    graph = export_then_qc(clips["clean"], expected_text="Good evening, this is the news.",
                           whisper_model="whisper-tiny-random", language="en")
    del graph["2"]
    graph["3"]["inputs"].pop("video")
    graph["3"]["inputs"].update(images=["1", 0], audio=["1", 1], fps=["1", 2])
    qc = comfy.run(graph, timeout=600)["outputs"]["3"]
    report = qc["broadcast_qc"][0]["report"]
    assert report["checks"]["colour_tags"]["status"] == "skip"
    words = report["checks"]["intelligibility"]
    # A random tiny Whisper hears random bytes: the check runs and fails on the words, and says so.
    assert words["status"] == "fail" and "word accuracy" in words["detail"] and "transcript" in report
    assert qc["broadcast_qc"][0]["failed"] == ["intelligibility"]


def test_video_made_from_tensors_is_measured_as_frames(comfy, clips):
    """Core's Create Video gives a VIDEO that is not a file: QC measures its frames + audio instead of re-encoding."""
    graph = export_then_qc(clips["clean"])
    graph["2"] = {"class_type": "CreateVideo", "inputs": {"images": ["1", 0], "fps": ["1", 2], "audio": ["1", 1]}}
    report = comfy.run(graph)["outputs"]["3"]["broadcast_qc"][0]["report"]
    assert report["source"]["kind"] == "frames" and report["checks"]["colour_tags"]["status"] == "skip"
    assert report["verdict"] == "pass", report["failed"]


def test_nothing_connected_is_named(comfy):
    error = comfy.run_error({"1": {"class_type": "BroadcastQC", "inputs": dict(QC)}})
    assert error["node_type"] == "BroadcastQC" and "video: expected a VIDEO" in error["exception_message"]


def test_batch_runner_records_each_verdict_and_exits_non_zero_on_a_fail(comfy, clips, tmp_path):
    """scripts/run_batch.py against this server: the ledger carries both jobs' verdicts; one fails, so exit 5."""
    import os
    import subprocess
    import sys

    from tests.workflow_cases import REPO_ROOT

    workflow = tmp_path / "export_qc.api.json"
    workflow.write_text(json.dumps(export_then_qc(clips["clean"])))
    batch = tmp_path / "qc.jsonl"
    batch.write_text("".join(json.dumps({"name": name, "workflow": str(workflow), "set": {"1.video": clips[key]}})
                             + "\n" for name, key in (("clean", "clean"), ("low", "low_2lu"))))
    proc = subprocess.run([os.environ.get("BA_PYTHON") or sys.executable, str(REPO_ROOT / "scripts" / "run_batch.py"),
                           str(batch), "--url", comfy.url, "--no-progress", "--out-dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 5, proc.stdout[-4000:] + proc.stderr[-4000:]
    records = [json.loads(line) for line in (tmp_path / "out" / "ledger.jsonl").read_text().splitlines()]
    names = {r["key"]: r["name"] for r in records if r["state"] == "job"}
    done = {names[r["key"]]: r["qc"] for r in records if r["state"] == "done"}
    assert [v["verdict"] for v in done["clean"]] == ["pass"]
    assert [(v["verdict"], v["failed"]) for v in done["low"]] == [("fail", ["integrated_loudness"])]
    standard = done["low"][0]["report"]["checks"]["integrated_loudness"]["standard"]
    assert standard.startswith("delivery profile streaming") and "BS.1770" in standard


@pytest.mark.parametrize("profile, target, ceiling", [("ATSC A/85", -24.0, -2.0), ("EBU R128", -23.0, -1.0)])
def test_one_delivery_profile_drives_the_master_and_the_check(comfy, clips, profile, target, ceiling):
    """The profile is set once, on Audio Master, whose 'delivery' output is linked to QC (QC's own combo says
    streaming and is not used): the master lands on the profile's target (its own target_lufs widget says -14 and is
    overridden), and QC of the exported AAC passes loudness and true peak against the same profile; checked
    against another profile (the link removed), the same file fails loudness."""
    master = {"class_type": "BroadcastAudioMaster", "inputs": {
        "audio": ["1", 1], "lowpass": True, "lowpass_hz": 9600.0, "deess": True, "deess_threshold": 0.045,
        "deess_max_db": 7.0, "terminal_s": True, "loudness": True, "target_lufs": -14.0, "limit": True,
        "ceiling_dbtp": -1.0, "highpass": True, "highpass_hz": 60.0, "delivery_profile": profile,
        "codec_headroom_db": 0.5}}
    graph = export_then_qc(clips["clean"], loudness_preset="streaming")
    graph["4"] = master
    graph["2"]["inputs"]["audio"] = ["4", 0]
    graph["3"]["inputs"]["delivery"] = ["4", 5]
    entry = comfy.run(graph)
    report = entry["outputs"]["3"]["broadcast_qc"][0]["report"]
    checks = report["checks"]
    assert checks["integrated_loudness"]["status"] == "pass", checks["integrated_loudness"]
    assert checks["true_peak"]["status"] == "pass" and checks["true_peak"]["value"] <= ceiling, checks["true_peak"]
    assert abs(checks["integrated_loudness"]["value"] - target) <= 0.2
    assert report["limits"]["delivery_profile"] == profile and report["limits"]["profile_source"]
    assert profile in checks["integrated_loudness"]["standard"] and profile in checks["true_peak"]["standard"]
    other = export_then_qc(clips["clean"], loudness_preset="streaming")
    other["4"] = master
    other["2"]["inputs"]["audio"] = ["4", 0]
    assert comfy.run(other)["outputs"]["3"]["broadcast_qc"][0]["report"]["checks"]["integrated_loudness"][
        "status"] == "fail"
