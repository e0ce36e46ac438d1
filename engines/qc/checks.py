"""The checks: measurements + limits -> one `Check` per question a QC operator asks, each pass / fail / skip.

Every check names the standard its limit comes from (`limits.py`), says what it measured in words, and lists the
stretches of time where it found a problem (for the timeline plot and for whoever fixes the clip). A skipped check
(no file, no Whisper model) or an inconclusive one (lip sync without evidence beyond chance: too little speech, no
visible mouth, no significant correlation) never fails the clip, and says why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from . import lipsync, loudness
from .limits import QCLimits
from .source import Measured

PASS, FAIL, SKIP, INCONCLUSIVE = "pass", "fail", "skip", "inconclusive"
DIGITAL_SILENCE = 10 ** (-90 / 20)
MAX_EVENTS = 50

# Matrix / primaries pairs that belong together. BT.601 matrix with BT.709 primaries is what this pack's writer
# tags on purpose (engines/export/settings.py: ComfyUI frames are sRGB pictures, converted with the BT.601 matrix).
MATRIX_PRIMARIES = {
    "bt709": {"bt709"}, "smpte170m": {"smpte170m", "bt470bg", "bt709"}, "bt470bg": {"bt470bg", "smpte170m", "bt709"},
    "bt2020nc": {"bt2020"}, "bt2020c": {"bt2020"}, "smpte240m": {"smpte240m"},
}
SDR_TRANSFERS = {"bt709", "smpte170m", "iec61966-2-1", "gamma22", "gamma28", "bt2020-10", "bt2020-12"}
HDR_TRANSFERS = {"smpte2084", "arib-std-b67"}


@dataclass
class Check:
    name: str
    status: str
    value: Optional[float]
    limit: str
    standard: str
    detail: str
    events: list = field(default_factory=list)  # [(start_s, end_s)]

    def as_dict(self) -> dict:
        value = None if self.value is None or not np.isfinite(self.value) else round(float(self.value), 3)
        return {"status": self.status, "value": value, "limit": self.limit, "standard": self.standard,
                "detail": self.detail,
                "events": [[round(a, 3), round(b, 3)] for a, b in self.events[:MAX_EVENTS]]}

    @classmethod
    def from_report(cls, name: str, entry: dict) -> "Check":
        """A check measured elsewhere, given in the report's shape (`as_dict`'s keys)."""
        value = entry.get("value")
        return cls(name, entry["status"], None if value is None else float(value), str(entry.get("limit", "")),
                   str(entry.get("standard", "")), str(entry.get("detail", "")),
                   [(float(a), float(b)) for a, b in entry.get("events", ())])


def runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index pairs of the True runs of a boolean array."""
    if flags.size == 0:
        return []
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def _verdict(ok: bool) -> str:
    return PASS if ok else FAIL


# -- audio -----------------------------------------------------------------------------------------------------------

def audio_checks(m: Measured, lim: QCLimits) -> list[Check]:
    a = m.audio
    names = ("integrated_loudness", "true_peak", "loudness_range", "clipping", "dc_offset", "sample_rate",
             "channel_layout", "silence", "dropouts")
    if a is None or a.samples == 0:
        return [Check(n, FAIL, None, "an audio track", "EBU R128", "no audio stream: a broadcast clip needs sound")
                for n in names]
    out = []
    profile = f"delivery profile {lim.delivery_profile} ({lim.profile_source})"
    lufs = loudness.integrated(a.subblock_power)
    lo, hi = lim.target_lufs - lim.loudness_tolerance_lu, lim.target_lufs + lim.loudness_tolerance_lu
    if not np.isfinite(lufs):
        out.append(Check("integrated_loudness", FAIL, None, f"{lo:.1f} .. {hi:.1f} LUFS",
                         f"{profile}; measured per ITU-R BS.1770", "silent (nothing above the -70 LUFS gate)"))
    else:
        out.append(Check("integrated_loudness", _verdict(lo <= lufs <= hi), lufs, f"{lo:.1f} .. {hi:.1f} LUFS",
                         f"{profile}; measured per ITU-R BS.1770",
                         f"{lufs:.1f} LUFS integrated ({lufs - lim.target_lufs:+.1f} LU from {lim.target_lufs:g})"))
    tp_db = 20 * np.log10(max(a.true_peak, 1e-12))
    out.append(Check("true_peak", _verdict(tp_db <= lim.max_true_peak_dbtp), tp_db,
                     f"<= {lim.max_true_peak_dbtp:g} dBTP",
                     f"{profile}; ITU-R BS.1770-5 annex 2, over-sampled to >= 192 kHz",
                     f"{tp_db:.2f} dBTP at {a.true_peak_s:.2f} s",
                     [] if tp_db <= lim.max_true_peak_dbtp else [(a.true_peak_s, a.true_peak_s + 0.05)]))
    lra = loudness.loudness_range(a.subblock_power)
    out.append(Check("loudness_range", _verdict(lra <= lim.max_loudness_range_lu), lra,
                     f"<= {lim.max_loudness_range_lu:g} LU", "EBU Tech 3342 / 3343", f"LRA {lra:.1f} LU"))
    overs = a.over_samples
    over_ms = runs(a.ms_peak >= 0.999)
    out.append(Check("clipping", _verdict(overs <= lim.max_clipped_samples), overs,
                     f"<= {lim.max_clipped_samples:g} samples at full scale", "EBU Tech 3341 (over indication)",
                     f"{overs} samples at or over full scale" + (f" in {len(over_ms)} places" if overs else ""),
                     [(s / 1000, e / 1000) for s, e in over_ms]))
    dc = float(np.max(np.abs(a.dc))) * 100.0
    out.append(Check("dc_offset", _verdict(dc <= lim.max_dc_offset_percent), dc,
                     f"<= {lim.max_dc_offset_percent:g} % of full scale", "AES17 practice",
                     f"DC offset {dc:.3f} % (largest channel)"))
    out.append(Check("sample_rate", _verdict(a.rate == int(lim.sample_rate_hz)), a.rate,
                     f"{int(lim.sample_rate_hz)} Hz", "EBU R128 / broadcast delivery", f"{a.rate} Hz"))
    allowed = {"mono_or_stereo": (1, 2), "stereo": (2,), "mono": (1,)}[lim.channel_layout]
    layout = m.info.layout or f"{a.channels} channels"
    out.append(Check("channel_layout", _verdict(a.channels in allowed), a.channels,
                     lim.channel_layout.replace("_", " "), "delivery spec",
                     f"{a.channels} channel(s), layout {layout}"))
    out.extend(_silences(a, lim))
    return out


def _silences(a, lim: QCLimits) -> list[Check]:
    n10 = a.ms_energy.size // 10
    rms10 = 10 * np.log10(np.maximum(a.ms_energy[: n10 * 10].reshape(n10, 10).mean(axis=1), 1e-20))
    speech = np.flatnonzero(rms10 > lim.min_speech_dbfs)
    if speech.size == 0:
        msg = f"no speech above {lim.min_speech_dbfs:g} dBFS"
        return [Check("silence", FAIL, None, f"<= {lim.max_silence_s:g} s", "newsroom file QC", msg),
                Check("dropouts", SKIP, None, f"none >= {lim.dropout_ms:g} ms", "file QC practice", msg)]
    first, last = int(speech[0]), int(speech[-1]) + 1  # in 10 ms units
    quiet = runs(rms10[first:last] <= lim.min_speech_dbfs)
    gaps = [((s + first) / 100, (e + first) / 100) for s, e in quiet if (e - s) / 100 > lim.max_silence_s]
    longest = max(((e - s) / 100 for s, e in quiet), default=0.0)
    silence = Check("silence", _verdict(not gaps), longest, f"<= {lim.max_silence_s:g} s", "newsroom file QC",
                    f"longest pause inside speech {longest:.2f} s" + (f"; {len(gaps)} over the limit" if gaps else ""),
                    gaps)
    lo_ms, hi_ms = first * 10, last * 10
    digital = runs(a.ms_peak[lo_ms:hi_ms] < DIGITAL_SILENCE)
    drops = [((s + lo_ms) / 1000, (e + lo_ms) / 1000) for s, e in digital if e - s >= lim.dropout_ms]
    total = sum(e - s for s, e in drops)
    dropouts = Check("dropouts", _verdict(not drops), len(drops), f"no digital silence >= {lim.dropout_ms:g} ms "
                     "inside speech", "file QC practice (real speech never reaches digital silence)",
                     f"{len(drops)} dropout(s), {total * 1000:.0f} ms in all" if drops else "none", drops)
    return [silence, dropouts]


# -- picture ---------------------------------------------------------------------------------------------------------

def picture_checks(m: Measured, lim: QCLimits) -> list[Check]:
    p, fps, w = m.picture, m.info.fps, m.window
    out = []
    t = np.arange(p.frames) / fps

    def spans(flags):
        return [(float(t[s]), float(t[e - 1] + 1 / fps)) for s, e in runs(flags)]

    bad = p.out_of_range_pct > lim.max_out_of_range_area_percent
    luma_bad = bad & ((p.luma_min < w.luma_lo) | (p.luma_max > w.luma_hi))
    chroma_bad = bad & ((p.chroma_min < w.chroma_lo) | (p.chroma_max > w.chroma_hi))
    scale = 4.0 if m.info.bit_depth > 8 else 1.0
    for name, flags, lo_arr, hi_arr, lo, hi in (
            ("luma_levels", luma_bad, p.luma_min, p.luma_max, w.luma_lo, w.luma_hi),
            ("chroma_levels", chroma_bad, p.chroma_min, p.chroma_max, w.chroma_lo, w.chroma_hi)):
        worst = float(p.out_of_range_pct[flags].max()) if flags.any() else 0.0
        detail = (f"codes {lo_arr.min() / scale:.0f}..{hi_arr.max() / scale:.0f} (8-bit units); "
                  + (f"{int(flags.sum())} frame(s) with over {lim.max_out_of_range_area_percent:g} % of the picture "
                     f"outside, worst {worst:.1f} %" if flags.any() else "within the legal window"))
        declared = "full" if (m.info.tags or {}).get("range") == "pc" else "limited"
        out.append(Check(name, _verdict(not flags.any()), int(flags.sum()),
                         f"{lo / scale:.1f} .. {hi / scale:.1f} (declared {declared} range)", "EBU R103", detail,
                         spans(flags)))
    out.append(_colour_tags(m))
    black = p.black_pct >= lim.black_area_percent
    black_runs = [(s, e) for s, e in runs(black) if (e - s) / fps > lim.max_black_s]
    out.append(Check("black_frames", _verdict(not black_runs), int(black.sum()), f"runs <= {lim.max_black_s:g} s",
                     "FFmpeg blackdetect rule (98 % of pixels under 10 % luma)",
                     f"{int(black.sum())} black frame(s)", [(s / fps, e / fps) for s, e in black_runs]))
    still = np.zeros(p.frames, bool)
    if p.frames > 1:
        still[1:] = p.block_motion[1:].max(axis=1) < lim.freeze_noise
    # A run of n unchanged transitions holds one picture for n + 1 frames.
    freezes = [(s - 1, e) for s, e in runs(still) if (e - s + 1) / fps > lim.max_freeze_s]
    longest = max(((e - s + 1) / fps for s, e in runs(still)), default=0.0)
    out.append(Check("frozen_frames", _verdict(not freezes), longest, f"holds <= {lim.max_freeze_s:g} s",
                     "file QC practice (FFmpeg freezedetect's measure, per block)",
                     f"longest held picture {longest:.2f} s" + (f"; {len(freezes)} freeze(s)" if freezes else ""),
                     [(s / fps, e / fps) for s, e in freezes]))
    return out


def _colour_tags(m: Measured) -> Check:
    std = "ITU-T H.273 / the pack's export (BT.601 matrix, limited range)"
    if m.info.tags is None:
        return Check("colour_tags", SKIP, None, "tags present and consistent", std,
                     "frames, not a file: the export writer tags what it writes")
    tags, frame = m.info.tags, m.info.frame_tags or {}
    problems = [f"{k} unspecified" for k, v in tags.items() if v == "unspecified" or v.startswith("reserved")]
    if not problems:
        if tags["primaries"] not in MATRIX_PRIMARIES.get(tags["matrix"], set()):
            problems.append(f"matrix {tags['matrix']} does not belong with primaries {tags['primaries']}")
        if tags["transfer"] in HDR_TRANSFERS and tags["primaries"] != "bt2020":
            problems.append(f"HDR transfer {tags['transfer']} without BT.2020 primaries")
        elif tags["transfer"] not in SDR_TRANSFERS | HDR_TRANSFERS:
            problems.append(f"transfer {tags['transfer']} is not a video transfer")
        if m.info.bit_depth == 8 and tags["transfer"] in HDR_TRANSFERS:
            problems.append("HDR transfer in an 8-bit stream")
    for k, v in frame.items():
        if tags.get(k) != v and v != "unspecified":
            problems.append(f"stream says {k} {tags.get(k)}, frames say {v}")
    desc = ", ".join(f"{k} {v}" for k, v in tags.items())
    return Check("colour_tags", _verdict(not problems), len(problems), "present and consistent", std,
                 desc + ("; " + "; ".join(problems) if problems else ""))


# -- A/V ---------------------------------------------------------------------------------------------------------------

def av_checks(m: Measured, lim: QCLimits) -> tuple[list[Check], Optional[lipsync.SyncEstimate], tuple]:
    """A/V durations, lip sync (in sync / out of sync / inconclusive with the reason) and face flicker."""
    info, fps = m.info, m.info.fps
    out = []
    if info.audio_seconds is None:
        out.append(Check("av_duration", FAIL, None, "audio and video", "EBU R128 / delivery spec", "no audio"))
    else:
        diff = abs(info.audio_seconds - info.video_seconds) * fps
        out.append(Check("av_duration", _verdict(diff <= lim.max_av_difference_frames + 1e-6), diff,
                         f"<= {lim.max_av_difference_frames:g} frame(s)", "delivery spec (declared durations)",
                         f"video {info.video_seconds:.3f} s, audio {info.audio_seconds:.3f} s "
                         f"({diff:.2f} frame(s) apart)"))
    est = None
    tol = lipsync.tolerance(lim.lipsync_tolerance, lim.max_audio_early_ms, lim.max_audio_late_ms)
    window = f"audio {tol.max_early_ms:g} ms early .. {tol.max_late_ms:g} ms late"
    std = f"{tol.name}: {tol.source}"
    if m.audio is None or not m.audio.samples:
        out.append(Check("lip_sync", INCONCLUSIVE, None, window, std, "inconclusive: no audio"))
    else:
        est = lipsync.estimate(m.picture.block_luma, m.picture.block_motion, fps, m.audio.ms_energy,
                               lim.min_speech_dbfs)
        if est.state != lipsync.INCONCLUSIVE and est.correlation < lim.min_sync_confidence:
            est = lipsync.SyncEstimate(lipsync.INCONCLUSIVE, None, est.correlation, est.p_value,
                                       f"correlation {est.correlation:.2f} under min_sync_confidence "
                                       f"{lim.min_sync_confidence:g}", est.mouth_blocks, est.speech_s)
        est = lipsync.judge(est, tol.max_early_ms, tol.max_late_ms)
        if est.state == lipsync.INCONCLUSIVE:
            out.append(Check("lip_sync", INCONCLUSIVE, None, window, std, f"inconclusive: {est.reason}"))
        else:
            side = "late" if est.offset_ms > 0 else "early"
            limit = tol.max_late_ms if est.offset_ms > 0 else tol.max_early_ms
            ok = est.state == lipsync.IN_SYNC
            verdict = "in sync" if ok else f"out of sync by {abs(est.offset_ms) - limit:.0f} ms beyond the limit"
            out.append(Check("lip_sync", _verdict(ok), est.offset_ms, window, std,
                             f"{verdict}: audio {abs(est.offset_ms):.0f} ms {side} (correlation "
                             f"{est.correlation:.2f}, p = {est.p_value:.2f} against rotated audio)",
                             [] if ok else [(0.0, info.video_seconds)]))
    face = face_region(m, est)
    out.append(_flicker(m, lim, face))
    return out, est, face


def face_region(m: Measured, est: Optional[lipsync.SyncEstimate]) -> tuple:
    """(row0, row1, col0, col1) in analysis blocks: around the mouth blocks (a face is ~3 mouths wide, the eyes
    ~2 mouth heights above), or the whole picture when no mouth was found."""
    rows, cols = m.picture.grid
    if est is None or not est.mouth_blocks:
        return (0, rows, 0, cols)
    r = np.array(est.mouth_blocks) // cols
    c = np.array(est.mouth_blocks) % cols
    h = r.max() - r.min() + 1
    w = c.max() - c.min() + 1
    return (max(0, r.min() - 2 * h), min(rows, r.max() + 1 + h), max(0, c.min() - w), min(cols, c.max() + 1 + w))


def _flicker(m: Measured, lim: QCLimits, face: tuple) -> Check:
    p, fps = m.picture, m.info.fps
    std = "frame-difference statistics of the face region"
    if p.frames < 5:
        return Check("face_flicker", SKIP, None, f"<= {lim.max_face_flicker:g}", std, "fewer than 5 frames")
    rows, cols = p.grid
    r0, r1, c0, c1 = face
    lum = p.block_luma.reshape(p.frames, rows, cols)[:, r0:r1, c0:c1].reshape(p.frames, -1)
    # A flicker is a frame brighter (or darker) than both of its neighbours; a cut or a fade, which differs from one
    # side only, is not. Taking the median over the region's blocks keeps the mouth's own motion (a few blocks)
    # out: what is measured is a change shared by at least half of the face region.
    before = lum[1:-1] - lum[:-2]
    after = lum[1:-1] - lum[2:]
    both = np.where(np.sign(before) == np.sign(after), np.sign(before) * np.minimum(np.abs(before), np.abs(after)), 0)
    jump = np.zeros(p.frames)
    jump[1:-1] = np.abs(np.median(both, axis=1))
    bad = jump > lim.max_face_flicker
    worst = float(jump.max())
    return Check("face_flicker", _verdict(not bad.any()), worst, f"<= {lim.max_face_flicker:g} codes", std,
                 f"largest one-frame jump of the face region's mean luma {worst:.1f} (8-bit codes)"
                 + (f"; {int(bad.sum())} frame(s) over" if bad.any() else ""),
                 [(float(i / fps), float((i + 1) / fps)) for i in np.flatnonzero(bad)])


# -- speech ----------------------------------------------------------------------------------------------------------

def intelligibility(m: Measured, lim: QCLimits, expected_text: str,
                    transcribe: Optional[Callable[[np.ndarray, int], str]]) -> tuple[Check, Optional[str]]:
    from ..omnivoice import verify

    std = "Whisper word accuracy (1 - WER)"
    limit = f">= {lim.min_word_accuracy:.0%}"
    if not (expected_text or "").strip():
        return Check("intelligibility", SKIP, None, limit, std, "no expected text given"), None
    if transcribe is None:
        return Check("intelligibility", SKIP, None, limit, std,
                     "no Whisper model chosen (put one in models/whisper to check the words)"), None
    if m.audio is None or m.audio.mono is None:
        return Check("intelligibility", FAIL, None, limit, std, "no audio to transcribe"), None
    transcript = transcribe(m.audio.mono, m.audio.rate)
    acc = verify.word_accuracy(expected_text, transcript, language=lim.language)
    return Check("intelligibility", _verdict(acc.word_accuracy >= lim.min_word_accuracy), acc.word_accuracy, limit,
                 std, f"word accuracy {acc.word_accuracy:.0%} ({acc.errors} error(s) over {acc.reference_words} "
                      f"words)"), transcript
