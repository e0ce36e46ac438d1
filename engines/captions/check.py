"""Caption QC: the captions against the speech in the written clip, against their profile's limits, and the files
against each other, read back by FFmpeg (through PyAV), never by the writers' code.

Checks (each ``{"status": pass|fail|skip, "value", "limit", "standard", "detail", "events"}``, the QC report's
shape):

- ``caption_speech``: every caption overlaps speech (at least `MIN_SPEECH_S` of it) — FCC §79.1(j)(2) synchronicity;
- ``caption_silence``: no caption stays up over a silence longer than `MAX_SILENT_S` (BBC §5.2: do not hang more
  than 1.5 s after the speech);
- ``caption_reading_speed``: characters a second of every caption (over its display time) within the profile's limit;
- ``caption_lines``: lines and characters a line within the profile's limits;
- ``caption_tracks``: the MP4's mov_text track and the SRT and WebVTT sidecars hold the planned cues (same times to
  the millisecond, same text), as FFmpeg's decoders read them;
- ``caption_start_error``: with ASR word times (Whisper), how far each caption's start is from its first word
  (Netflix: within 3 frames); skipped without them.

Speech is where the clip's audio (mixed to mono, 10 ms frames) is above `SPEECH_DBFS`; the audio is decoded frame by
frame and only the frame levels are kept.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .layout import PROFILES
from .render import ISO639_2
from .srt import plain

MIN_SPEECH_S = 0.1
MAX_SILENT_S = 1.5
SPEECH_DBFS = -45.0
FRAME_S = 0.01
START_ERROR_FRAMES = 3
PASS, FAIL, SKIP = "pass", "fail", "skip"


def _check(status, value, limit, standard, detail, events=()) -> dict:
    return {"status": status, "value": None if value is None else round(float(value), 3), "limit": limit,
            "standard": standard, "detail": detail, "events": [[round(a, 3), round(b, 3)] for a, b in events][:20]}


def _mono_16k(path):
    """The file's audio as mono float32 blocks at 16 kHz, decoded frame by frame (nothing if it has no audio)."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.audio:
            return
        resampler = av.AudioResampler(format="flt", layout="mono", rate=16000)
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                yield out.to_ndarray().reshape(-1)


def speech_levels(path) -> np.ndarray:
    """dBFS of every 10 ms of the file's audio (mono mix, 16 kHz), decoded frame by frame."""
    levels, carry = [], np.zeros(0, np.float32)
    step = int(16000 * FRAME_S)
    for block in _mono_16k(path):
        carry = np.concatenate([carry, block])
        n = carry.size // step
        if n:
            frames = carry[:n * step].reshape(n, step)
            levels.append(10 * np.log10(np.mean(frames.astype(np.float64) ** 2, axis=1) + 1e-12))
            carry = carry[n * step:]
    return np.concatenate(levels) if levels else np.zeros(0)


def asr_words(path, whisper, language: Optional[str] = None, progress_for=None) -> Optional[list]:
    """Whisper's ``(start, end, word)`` over the file's audio, for the start-error check; None when the model gives
    no word times (no ``alignment_heads`` in its generation config: the check is then skipped, not failed).
    ``progress_for(total)``: a progress (and cancel) reporter for that many Whisper windows."""
    from .refine import WINDOW_S, whisper_words

    if not getattr(whisper.model.generation_config, "alignment_heads", None):
        return None
    blocks = list(_mono_16k(path))
    if not blocks:
        return None
    samples = np.concatenate(blocks)
    windows = int(samples.size / 16000 // WINDOW_S) + 1
    return whisper_words(whisper, samples, 16000, language, progress_for(windows) if progress_for else None)


def read_cues(path, stream: str = "subtitles") -> tuple:
    """``(cues [(start, end, text)], language tag)`` of the first subtitle stream of `path` as FFmpeg reads it."""
    import av

    out = []
    with av.open(str(path)) as container:
        if not container.streams.subtitles:
            return [], None
        sub_stream = container.streams.subtitles[0]
        for packet in container.demux(sub_stream):
            if packet.size <= 2:  # the MP4 muxer's empty samples between cues
                continue
            for sub in packet.decode():
                a = float(packet.pts * packet.time_base)
                out.append((round(a, 3), round(a + float(packet.duration * packet.time_base), 3),
                            sub.dialogue.decode("utf-8")))
        return out, sub_stream.metadata.get("language")


def check_captions(plan, video: Optional[Path] = None, levels: Optional[np.ndarray] = None,
                   words: Optional[Sequence] = None) -> dict:
    """The caption checks of `plan` (a `render.CaptionPlan`) against `video` (the written MP4: its audio and files)
    or the given speech `levels`; ``words``: ASR ``(start, end, word)``. Returns ``{"checks": {...}, "failed": [...]}``.
    """
    cues = list(plan.cues)
    prof = PROFILES.get(plan.profile)
    checks = {}
    if levels is None and video is not None:
        levels = speech_levels(video)
    if levels is None or levels.size == 0:
        checks["caption_speech"] = _check(SKIP, None, "", "FCC 47 CFR 79.1(j)(2)", "no audio to compare with")
        checks["caption_silence"] = _check(SKIP, None, "", "BBC Subtitle Guidelines 5.2", "no audio")
    else:
        speech = levels > SPEECH_DBFS
        missing, hanging, longest = [], [], 0.0
        for c in cues:
            a, b = int(c.start / FRAME_S), max(int(c.start / FRAME_S) + 1, int(c.end / FRAME_S))
            inside = speech[a:b]
            if inside.sum() * FRAME_S < MIN_SPEECH_S:
                missing.append((c.start, c.end))
            quiet = _longest_run(~inside) * FRAME_S if inside.size else c.end - c.start
            longest = max(longest, quiet)
            if quiet > MAX_SILENT_S:
                hanging.append((c.start, c.end))
        checks["caption_speech"] = _check(
            FAIL if missing else PASS, len(missing), f"every caption overlaps >= {MIN_SPEECH_S} s of speech",
            "FCC 47 CFR 79.1(j)(2) synchronicity", f"{len(cues) - len(missing)} of {len(cues)} captions over speech",
            missing)
        checks["caption_silence"] = _check(
            FAIL if hanging else PASS, longest, f"<= {MAX_SILENT_S} s of silence under a caption",
            "BBC Subtitle Guidelines 5.2", f"longest silence under a caption {longest:.2f} s", hanging)
    if prof is not None:
        cps = float(plan.max_cps) or prof.cps(plan.language)
        speeds = [(len(" ".join(c.lines)) / max(c.end - c.start, 1e-6), c) for c in cues]
        fast = [(c.start, c.end) for s, c in speeds if s > cps + 1e-6]
        top = max((s for s, _ in speeds), default=0.0)
        checks["caption_reading_speed"] = _check(
            FAIL if fast else PASS, top, f"<= {cps:g} characters a second", f"{prof.name} profile",
            f"fastest caption {top:.1f} cps; {len(fast)} over the limit", fast)
        long_lines = [(c.start, c.end) for c in cues
                      if len(c.lines) > prof.max_lines or any(len(line) > prof.max_chars for line in c.lines)]
        checks["caption_lines"] = _check(
            FAIL if long_lines else PASS, max((len(line) for c in cues for line in c.lines), default=0),
            f"<= {prof.max_lines} lines of <= {prof.max_chars} characters", f"{prof.name} profile",
            f"{len(long_lines)} captions over the limits", long_lines)
    if video is not None:
        checks["caption_tracks"] = _tracks(plan, Path(video))
    checks["caption_start_error"] = _start_error(cues, words, plan.fps)
    return {"checks": checks, "failed": [name for name, c in checks.items() if c["status"] == FAIL]}


def _longest_run(flags: np.ndarray) -> int:
    best = run = 0
    for f in flags:
        run = run + 1 if f else 0
        best = max(best, run)
    return best


def _tracks(plan, video: Path) -> dict:
    expected = [(round(c.start, 3), round(c.end, 3), c.text) for c in plan.cues]
    problems, read = [], 0
    if plan.soft_track:
        muxed, language = read_cues(video)
        read += 1
        if muxed != expected:
            problems.append(f"MP4 track differs ({len(muxed)} cues read, {len(expected)} planned)")
        if language != ISO639_2.get(plan.language):
            problems.append(f"MP4 track language {language!r}")
    for name in plan.sidecar_names(video.name):
        path = video.with_name(name)
        if not path.is_file():
            problems.append(f"{name} missing")
            continue
        cues, _ = read_cues(path)
        read += 1
        want = [(a, b, plain(t)) for a, b, t in expected] if name.endswith(".srt") else expected
        if cues != want:
            problems.append(f"{name} differs ({len(cues)} cues read)")
    if not read and not problems:
        return _check(SKIP, None, "", "FFmpeg's mov_text / SubRip / WebVTT decoders",
                      "no soft track or sidecar files asked for")
    return _check(FAIL if problems else PASS, len(problems), "every file reads back as the planned cues",
                  "FFmpeg's mov_text / SubRip / WebVTT decoders", "; ".join(problems) or
                  f"{read} files, {len(expected)} cues each, identical")


def _start_error(cues, words, fps: float) -> dict:
    if not words:
        return _check(SKIP, None, "", "Netflix timed text: within 3 frames of the audio",
                      "no ASR word times (select a Whisper model with word times: alignment_heads)")
    starts = np.array([w[0] for w in words], dtype=np.float64)
    errors, late = [], []
    for c in cues:
        nearest = starts[np.argmin(np.abs(starts - c.start))]
        errors.append(abs(c.start - nearest))
        if abs(c.start - nearest) > START_ERROR_FRAMES / fps + 1e-6:
            late.append((c.start, c.end))
    worst = max(errors, default=0.0)
    return _check(FAIL if late else PASS, worst, f"<= {START_ERROR_FRAMES} frames", "Netflix timed text (NFX-GR)",
                  f"largest start error {worst * 1000:.0f} ms over {len(cues)} captions", late)


def for_qc(plan, video: Optional[Path], whisper=None, language: Optional[str] = None, progress_for=None) -> dict:
    """The caption checks Broadcast QC adds to its verdict, in its report's shape (``{name: check}``): `plan`
    against the written file `video` (None: a clip given as frames, so only the plan's own limits are checked) and,
    with a `whisper` model (`engines.omnivoice.asr.load_whisper`) and the file, against Whisper's word times in it.
    ``progress_for(total)``: a progress (and cancel) reporter for the Whisper windows."""
    words = None
    if whisper is not None and video is not None:
        words = asr_words(video, whisper, language, progress_for)
    return check_captions(plan, video, words=words)["checks"]
