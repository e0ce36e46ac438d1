"""Broadcast QC engine on clips made to fail: each check catches its own fault and passes the clean clip.

The clips (tests/fixtures/qc_clips.py) are 6 s, 256x256, 30 fps talking faces whose mouth follows the voice's
envelope; clean ones and audio faults are written by the pack's export writer.
"""
import numpy as np
import pytest

from engines.common.errors import InputError
from engines.omnivoice import dsp, master
from engines.qc import QCLimits, loudness, qc_file, qc_frames
from engines.qc.audio_meter import AudioMeter
from engines.common import true_peak
from tests.fixtures.peak_reference import reference_peak_db
from tests.fixtures.qc_clips import FAULTS, talking_clip, voice

LIMITS = QCLimits()
# What each fault must fail (and nothing outside the set may fail).
EXPECTED = {
    "low_2lu": {"integrated_loudness"},
    "clipped": {"clipping", "true_peak", "integrated_loudness"},   # driven 12 dB into full scale: louder too
    "frozen": {"frozen_frames"},
    "superwhite": {"luma_levels"},
    "silent_gap": {"dropouts"},
    "flicker": {"face_flicker"},
    "black": {"black_frames"},
    "untagged": {"colour_tags"},
}


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qc")
    return lambda name, **kw: talking_clip(folder / f"{name}.mp4", **kw) if not (folder / f"{name}.mp4").exists() \
        else folder / f"{name}.mp4"


@pytest.fixture(scope="module")
def clean(clips):
    return qc_file(clips("clean"), LIMITS)


def test_clean_clip_passes_every_check(clean):
    assert clean.verdict == "pass", clean.text
    checks = clean.report["checks"]
    assert {n for n, c in checks.items() if c["status"] == "skip"} == {"intelligibility"}
    for check in checks.values():  # every check states its state, value, limit and standard
        assert check["status"] in ("pass", "fail", "skip", "inconclusive") and check["limit"] and check["standard"]
    assert abs(checks["integrated_loudness"]["value"] + 14.0) < 0.2
    assert checks["true_peak"]["value"] <= -1.0
    assert checks["colour_tags"]["detail"].startswith("range tv, matrix smpte170m, primaries bt709")


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_caught_by_its_check(clips, fault):
    result = qc_file(clips(fault, fault=fault), LIMITS)
    assert result.verdict == "fail"
    failed = set(result.failed)
    own = {"clipped": "clipping"}.get(fault, next(iter(EXPECTED[fault])))
    assert own in failed, result.text
    assert failed <= EXPECTED[fault], result.text
    assert result.contract()["failed"] == result.failed
    assert result.report["checks"][own]["events"] or own in ("integrated_loudness", "colour_tags")


def test_faults_are_located_in_time(clips):
    frozen = qc_file(clips("frozen", fault="frozen"), LIMITS).report["checks"]["frozen_frames"]
    (start, end), = frozen["events"]
    assert abs(start - 2.0) < 0.1 and abs(end - 3.0) < 0.1 and abs(frozen["value"] - 1.0) < 0.1
    gap = qc_file(clips("silent_gap", fault="silent_gap"), LIMITS).report["checks"]["dropouts"]
    assert len(gap["events"]) == 1 and 0.3 < gap["events"][0][1] - gap["events"][0][0] <= 0.41
    white = qc_file(clips("superwhite", fault="superwhite"), LIMITS).report["checks"]["luma_levels"]
    assert white["value"] == 30 and white["events"] == [[2.0, 3.0]]


def test_low_clip_reads_two_lu_under(clips, clean):
    low = qc_file(clips("low_2lu", fault="low_2lu"), LIMITS).report["checks"]["integrated_loudness"]["value"]
    assert abs(clean.report["checks"]["integrated_loudness"]["value"] - low - 2.0) < 0.1


def test_broadcast_preset_fails_a_streaming_master_and_custom_target_passes_it(clips):
    path = clips("clean")
    assert qc_file(path, QCLimits.from_values({}, "EBU R128")).failed == ["integrated_loudness"]
    # A workflow saved with the old preset name still loads, meaning the same.
    assert QCLimits.from_values({}, "broadcast -23 LUFS (EBU R128)") == QCLimits.from_values({}, "EBU R128")
    assert qc_file(path, QCLimits.from_values({"target_lufs": -14.0}, "custom")).verdict == "pass"


# Lip sync is tested in test_qc_lipsync.py with mouths driven by espeak-ng's phoneme timings: these clips' mouths
# follow the very envelope the estimator correlates with, which would prove nothing about it.


def test_lip_sync_without_a_talking_mouth_is_inconclusive_not_failed():
    frames = np.full((180, 64, 64, 3), 0.5, np.float32)
    # something moves (a ticker), unrelated to the sound
    for k in range(180):
        frames[k, :8, (2 * k) % 56:(2 * k) % 56 + 8] = 0.9
    samples, _ = voice(6.0)
    result = qc_frames(frames, 30.0, (samples[None], 48000), LIMITS)
    check = result.report["checks"]["lip_sync"]
    assert check["status"] == "inconclusive" and "inconclusive" in check["detail"]


def test_frames_and_audio_are_measured_like_the_export(clips):
    samples, env = voice(6.0)
    from tests.fixtures.qc_clips import Painter

    painter = Painter(256, 256)
    frames = np.stack([painter.frame(k, env[int(k / 30 * 48000)] / env.max()) for k in range(180)])
    result = qc_frames(frames, 30.0, (samples[None].astype(np.float32), 48000), LIMITS)
    assert result.verdict == "pass", result.text
    assert result.report["checks"]["colour_tags"]["status"] == "skip"


def test_streaming_meter_matches_whole_file_measurements():
    rng = np.random.default_rng(3)
    rate = 44100
    x = rng.standard_normal((2, rate * 8)) * 0.05 * (1 + np.sin(np.arange(rate * 8) / rate * 2))
    meter = AudioMeter(rate, 2)
    for i in range(0, x.shape[1], 3001):  # odd block sizes: every seam lands somewhere new
        meter.feed(x[:, i:i + 3001])
    m = meter.finish()
    assert abs(loudness.integrated(m.subblock_power) - master.measure_lufs(x, rate)) < 0.01
    assert abs(20 * np.log10(m.true_peak) - reference_peak_db(x)) < 0.05  # an independent reference
    assert m.true_peak == pytest.approx(true_peak.true_peak(x, rate), rel=1e-9)  # seams measured as whole
    assert m.ms_energy.size == 8000 and m.samples == x.shape[1]
    assert np.allclose(m.dc, x.mean(axis=1), atol=1e-9)


def test_loudness_range_of_two_levels_is_their_difference():
    # 10 s at -20 LUFS then 10 s at -30 LUFS (K-weighted powers per 100 ms): LRA (10th..95th percentile) = 10 LU
    power = np.concatenate([np.full(100, 10 ** ((-20 + 0.691) / 10)), np.full(100, 10 ** ((-30 + 0.691) / 10))])
    assert abs(loudness.loudness_range(power) - 10.0) < 0.3
    assert abs(loudness.integrated(power[:100]) + 20.0) < 1e-6


def test_whisper_check_runs_when_a_transcriber_is_given(clips):
    heard = []

    def transcribe(samples, rate):
        heard.append((samples.shape, rate))
        return "good evening this is the news"

    result = qc_file(clips("clean"), LIMITS, expected_text="Good evening, this is the news.", transcribe=transcribe)
    assert heard and heard[0][1] == 48000 and abs(heard[0][0][0] - 6 * 48000) <= 1024  # one AAC frame of padding
    assert result.report["checks"]["intelligibility"]["status"] == "pass"
    bad = qc_file(clips("clean"), LIMITS, expected_text="Good morning, this was the weather.", transcribe=transcribe)
    assert bad.failed == ["intelligibility"]


def test_the_word_check_compares_whisper_figures_with_the_prepared_script_in_spoken_form(clips):
    """Whisper writes figures; the broadcasts check against Text Prepare's spoken form. A perfect read must pass."""
    from dataclasses import replace

    prepared = "La inflación fue de cuarenta y dos coma cinco por ciento el quince de marzo."

    def transcribe(samples, rate):
        return "La inflación fue de 42,5% el 15/03."
    as_written = qc_file(clips("clean"), LIMITS, expected_text=prepared, transcribe=transcribe)
    assert as_written.failed == ["intelligibility"]                    # the language not given: compared as written
    assert QCLimits.from_values({"language": "es"}).language == "es"      # the node's text input, kept as text
    spanish = replace(LIMITS, language="es")
    result = qc_file(clips("clean"), spanish, expected_text=prepared, transcribe=transcribe)
    assert result.report["checks"]["intelligibility"]["status"] == "pass"
    assert result.report["checks"]["intelligibility"]["value"] == 1.0


@pytest.mark.parametrize("name, target, tolerance, ceiling", [
    # The standards' current texts (EBU R 128 v5 (h)(i)(m); ATSC A/85:2013; Spotify; Apple Podcasts).
    ("EBU R128", -23.0, 0.2, -1.0), ("ATSC A/85", -24.0, 2.0, -2.0), ("streaming", -14.0, 1.0, -1.0),
    ("podcast", -16.0, 1.0, -1.0)])
def test_a_delivery_profile_sets_target_tolerance_and_ceiling_over_the_widgets(name, target, tolerance, ceiling):
    lim = QCLimits.from_values({"target_lufs": -30.0, "loudness_tolerance_lu": 4.0, "max_true_peak_dbtp": -6.0}, name)
    assert (lim.target_lufs, lim.loudness_tolerance_lu, lim.max_true_peak_dbtp) == (target, tolerance, ceiling)
    assert lim.delivery_profile == name and lim.profile_source
    custom = QCLimits.from_values({"target_lufs": -30.0, "max_true_peak_dbtp": -6.0}, "custom")
    assert (custom.target_lufs, custom.max_true_peak_dbtp) == (-30.0, -6.0)


def test_bad_limits_and_files_are_named():
    with pytest.raises(InputError, match="loudness_preset"):
        QCLimits.from_values({}, "loud")
    with pytest.raises(InputError, match="max_true_peak_dbtp"):
        QCLimits.from_values({"max_true_peak_dbtp": 3.0})
    with pytest.raises(InputError, match="video: expected an existing media file"):
        qc_file("missing.mp4", LIMITS)


def test_sheet_is_an_image_with_the_verdict_colour(clean, clips):
    sheet = clean.sheet
    assert sheet.dtype == np.uint8 and sheet.ndim == 3 and sheet.shape[1] == 768
    assert tuple(sheet[5, 5]) == (46, 160, 67)
    failed = qc_file(clips("frozen", fault="frozen"), LIMITS).sheet
    assert tuple(failed[5, 5]) == (200, 40, 40) and failed.shape[0] > sheet.shape[0] - 1


@pytest.mark.parametrize("name", ["broadcast_musetalk", "broadcast_ditto", "broadcast_wardrobe"])
def test_shipped_broadcasts_set_the_delivery_profile_once(name):
    """The profile is chosen on Audio Master alone: its 'delivery' output (the 6th, after audio, audio_16k, report,
    lufs and true_peak_dbtp) is linked to Broadcast QC's 'delivery', so QC's own combo is not used."""
    import json
    from pathlib import Path

    from engines.common import delivery

    graph = json.loads((Path(__file__).resolve().parents[2] / "workflows" / "api" / f"{name}.api.json").read_text())
    masters = {k: n["inputs"] for k, n in graph.items() if n["class_type"] == "BroadcastAudioMaster"}
    checks = [n["inputs"] for n in graph.values() if n["class_type"] == "BroadcastQC"]
    assert len(masters) == 1 and checks
    (master_id, master), = masters.items()
    assert delivery.canonical(master["delivery_profile"]) != delivery.CUSTOM
    assert all(q.get("delivery") == [master_id, 5] for q in checks), [q.get("delivery") for q in checks]


def test_the_delivery_handoff_carries_the_profile_or_the_custom_figures():
    from engines.common import delivery

    assert delivery.from_handoff(delivery.handoff("ATSC A/85", -14.0, -1.0)) == ("ATSC A/85", {})
    assert delivery.from_handoff(delivery.handoff("broadcast -23 LUFS (EBU R128)", 0, 0)) == ("EBU R128", {})
    assert delivery.from_handoff(delivery.handoff("custom", -20.5, -3.0)) == (
        "custom", {"target_lufs": -20.5, "max_true_peak_dbtp": -3.0})
    for bad in ("", "streaming", '{"profile": "loud"}', '{"profile": "custom"}', "[1]"):
        with pytest.raises(InputError, match="delivery: expected Broadcast Audio Master's 'delivery' output|"
                                             "delivery: expected one of"):
            delivery.from_handoff(bad)
