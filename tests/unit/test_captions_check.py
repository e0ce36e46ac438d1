"""Caption QC (engines/captions/check.py) on written clips whose speech is known: noise bursts where the voice is,
silence elsewhere. The oracles are those known intervals, the profile figures, and files changed behind the plan's
back (a sidecar edited after the export must fail the track check)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engines.captions.check import check_captions, speech_levels
from engines.captions.layout import Cue, LayoutSettings
from engines.captions.render import plan_captions
from engines.captions.timing import ClauseSpan, timing
from engines.export import AudioTrack, split_frames, write_stream

SR = 24000
SENTENCES = ["Good evening, here is the news.", "Markets closed higher today."]


def _timing():
    spans, t = [], 0.5
    for text in SENTENCES:
        a, b = int(t * SR), int((t + len(text) / 14) * SR)
        spans.append(ClauseSpan(a, b, a, b, text, text))
        t += len(text) / 14 + 1.0
    return timing(spans, SR, int((t + 0.5) * SR), "en")


def _speech(t):
    rng = np.random.default_rng(0)
    samples = np.zeros(t.length, np.float32)
    for s in t.spans:
        samples[s.voice_start:s.voice_end] = rng.uniform(-0.3, 0.3, s.voice_end - s.voice_start)
    return samples


@pytest.fixture
def clip(tmp_path):
    t = _timing()
    plan = plan_captions(t, LayoutSettings("standard", "en", fps=25))
    n = int(t.duration * 25)
    track = AudioTrack.from_comfy({"waveform": __import__("torch").from_numpy(_speech(t))[None, None],
                                   "sample_rate": SR})
    result = write_stream(tmp_path / "clip.mp4", 25, split_frames(np.zeros((n, 32, 48, 3), np.uint8), 25),
                          audio=track, subtitles=plan.soft_subtitles())
    plan.write_sidecars(result.path)
    return plan, result.path, t


def test_captions_that_follow_the_speech_pass(clip):
    plan, path, _ = clip
    report = check_captions(plan, path)
    assert report["failed"] == []
    assert {n: c["status"] for n, c in report["checks"].items()} == {
        "caption_speech": "pass", "caption_silence": "pass", "caption_reading_speed": "pass", "caption_lines": "pass",
        "caption_tracks": "pass", "caption_start_error": "skip"}


def test_speech_levels_find_the_bursts(clip):
    _, path, t = clip
    speech = speech_levels(path) > -45
    for s in t.spans:  # inside each burst (away from its edges and the AAC priming), speech
        a, b = int(s.voice_start / SR / 0.01) + 5, int(s.voice_end / SR / 0.01) - 5
        assert speech[a:b].mean() > 0.95
    assert speech[:int(0.4 / 0.01)].mean() < 0.05


def test_a_caption_over_silence_or_without_speech_fails(clip):
    plan, path, t = clip
    late = dataclasses.replace(plan, cues=plan.cues + (Cue(t.duration - 0.4, t.duration - 0.1, ("The end.",)),))
    report = check_captions(late, None, levels=speech_levels(path))
    assert report["checks"]["caption_speech"]["status"] == "fail"
    levels = np.full(800, -90.0)  # 8 s of silence in 10 ms frames, speech from 1.0 to 1.5 s
    levels[100:150] = -20.0
    hang = dataclasses.replace(plan, cues=(Cue(1.0, 4.0, ("Good evening.",)),))
    report = check_captions(hang, None, levels=levels)["checks"]
    assert report["caption_speech"]["status"] == "pass" and report["caption_silence"]["status"] == "fail"
    assert report["caption_silence"]["value"] == pytest.approx(2.5, abs=0.02)
    fits = dataclasses.replace(plan, cues=(Cue(1.0, 2.5, ("Good evening.",)),))
    assert check_captions(fits, None, levels=levels)["checks"]["caption_silence"]["status"] == "pass"


def test_reading_speed_and_line_limits_are_checked(clip):
    plan, path, _ = clip
    dense = dataclasses.replace(plan, cues=(Cue(1.0, 1.5, ("x" * 41, "y" * 41)),))
    checks = check_captions(dense, None, levels=speech_levels(path))["checks"]
    assert checks["caption_reading_speed"]["status"] == "fail" and checks["caption_reading_speed"]["value"] > 20
    wide = dataclasses.replace(plan, cues=(Cue(1.0, 6.0, ("z" * 43,)),))
    assert check_captions(wide, None, levels=speech_levels(path))["checks"]["caption_lines"]["status"] == "fail"


def test_a_sidecar_changed_after_the_export_fails_the_track_check(clip):
    plan, path, _ = clip
    srt = path.with_name("clip.en.srt")
    srt.write_text(srt.read_text(encoding="utf-8").replace("news", "nudes"), encoding="utf-8")
    report = check_captions(plan, path)
    assert report["failed"] == ["caption_tracks"] and "clip.en.srt" in report["checks"]["caption_tracks"]["detail"]


def test_start_error_against_asr_word_times(clip):
    plan, path, t = clip
    onsets = [s.voice_start / SR for s in t.spans]
    words = [(a + 0.02, a + 0.3, "w") for a in onsets]
    assert check_captions(plan, path, words=words)["checks"]["caption_start_error"]["status"] == "pass"
    late = [(a + 0.5, a + 0.8, "w") for a in onsets]
    assert check_captions(plan, path, words=late)["checks"]["caption_start_error"]["status"] == "fail"


def test_asr_words_read_the_written_file_and_feed_the_start_error(clip, tmp_path):
    """Broadcast QC's caption start error gets Whisper's word times from the written file's own audio track: the
    tiny random Whisper hears no real words, so the oracle is the plumbing (words inside the file's duration, in time
    order; the check's value is the largest distance from a caption start to its nearest word start, computed here
    independently), and a model without word times skips the check instead of failing it."""
    import json

    from engines.captions.check import asr_words
    from engines.omnivoice import asr
    from tests.fixtures.tiny_whisper import build_tiny_whisper

    plan, path, t = clip
    plain = build_tiny_whisper(tmp_path / "plain")
    aligned = build_tiny_whisper(tmp_path / "aligned")
    config = json.loads((aligned / "generation_config.json").read_text())
    config["alignment_heads"] = [[0, 0], [0, 1]]
    (aligned / "generation_config.json").write_text(json.dumps(config))

    assert asr_words(path, asr.load_whisper(plain)) is None
    steps = []

    class Counter:
        def __init__(self, total):
            steps.append(total)

        def step(self):
            steps.append("step")

    words = asr_words(path, asr.load_whisper(aligned), "en", Counter)
    assert words and steps[0] == int(t.duration // 30) + 1 and steps.count("step") == steps[0]
    starts = [w[0] for w in words]
    assert starts == sorted(starts) and all(0 <= a <= b <= t.duration + 0.1 for a, b, _ in words)
    check = check_captions(plan, path, words=words)["checks"]["caption_start_error"]
    expected = max(min(abs(c.start - s) for s in starts) for c in plan.cues)
    assert check["status"] in ("pass", "fail") and abs(check["value"] - expected) < 1e-3


def test_caption_checks_turn_the_qc_verdict_its_first_line_and_its_sheet(tmp_path):
    """Broadcast QC shows its verdict in three places a user reads: the verdict, the text's first line and the
    sheet's banner (green for pass, red for fail). Caption checks are measured outside QC (engines/captions), so a
    caption-only failure must still turn all three: a clip that passes every picture and sound check, whose SRT
    sidecar is edited after the export, fails on caption_tracks alone, with a red banner."""
    from engines.captions.check import for_qc
    from engines.qc import QCLimits, qc_file

    t = _timing()
    plan = plan_captions(t, LayoutSettings("standard", "en", fps=25))
    n = int(t.duration * 25)
    rng = np.random.default_rng(1)
    speech = _speech(t) + rng.uniform(-1e-3, 1e-3, t.length).astype(np.float32)  # a room's floor, not digital zero
    track = AudioTrack.from_comfy({"waveform": __import__("torch").from_numpy(speech)[None, None], "sample_rate": SR})
    frames = rng.integers(40, 200, (n, 32, 48, 3), dtype=np.uint8)               # moving, neither black nor frozen
    path = write_stream(tmp_path / "clip.mp4", 25, split_frames(frames, 25), audio=track,
                        subtitles=plan.soft_subtitles()).path
    plan.write_sidecars(path)

    def banner(result):
        r, g, b = result.sheet[4:20, 300:460].reshape(-1, 3).mean(axis=0)
        return "green" if g > 1.5 * r and g > 1.5 * b else "red" if r > 1.5 * g and r > 1.5 * b else "other"

    limits = QCLimits()
    plain_qc = qc_file(path, limits)
    assert plain_qc.verdict == "pass", plain_qc.text  # the precondition: only the captions can fail it
    captioned = qc_file(path, limits, more_checks=for_qc(plan, path))
    assert captioned.verdict == "pass" and banner(captioned) == "green"
    assert {"caption_tracks", "caption_speech"} <= set(captioned.report["checks"])

    srt = path.with_name("clip.en.srt")
    srt.write_text(srt.read_text(encoding="utf-8").replace("news", "nudes"), encoding="utf-8")
    result = qc_file(path, limits, more_checks=for_qc(plan, path))
    lines = result.text.splitlines()
    assert result.verdict == "fail" and result.failed == ["caption_tracks"]
    assert result.report["verdict"] == "fail" and result.report["failed"] == ["caption_tracks"]
    assert lines[0] == "Broadcast QC: FAIL (caption_tracks)" and lines[1].startswith("clip.mp4")
    assert any(line.startswith("FAIL  caption_tracks:") and "[limit" in line for line in lines)
    assert banner(result) == "red"
