"""The broadcast mastering chain the posts converged on, each stage switchable, in this order:

0. high-pass: 2nd-order Butterworth at 60 Hz, zero phase (DC offset and rumble out; see `highpass`);
1. low-pass: 4th-order Butterworth at 9.6 kHz, zero phase (removes the vocoder's 10-12 kHz aliasing);
2. de-esser: 4.8-8.2 kHz band (2nd-order band-pass), 5 ms RMS envelope; above the threshold 0.045 the band is
   turned down by ``min(7, 0.5 * 20 * log10(env / 0.045))`` dB, the gain smoothed over 10 ms;
3. word-final /s/ tamer: sibilant segments (4.8-9.2 kHz envelope > 0.015 and not voiced) followed by 60 ms of quiet
   are faded with a 25 ms raised cosine starting 65 ms into the /s/, and the 80 ms after are held at x 0.03;
4. loudness: gated BS.1770 integrated loudness (pyloudnorm) brought to the target, -14 LUFS by default;
5. true-peak limiter: a look-around gain that keeps the true peak (BS.1770-5 annex 2 at >= 192 kHz,
   `engines/common/true_peak.py`, the QC meter's own measure) under the delivery ceiling (-1 dBTP) less
   `codec_headroom_db` (0.5 dB): the AAC encode that follows raises decoded peaks (measured below).

Codec headroom: the exported MP4 carries AAC, and what a viewer hears is the decoded AAC. Measured by
`benchmarks/bench_qc_trust.py --aac`: 14 espeak-ng readings (en/es, 7 voices, 140/175 wpm), mastered at
-14 LUFS with the limiter at -1.0 dBTP, resampled to 48 kHz and encoded by the export's AAC path at 192 kbps mono,
decode 0.007-0.194 dB above the master (mean 0.10); at 128 kbps 0.10-4.6 dB (mean 1.2). The default 0.5 dB keeps the
decoded file under the ceiling at the shipped 192 kbps with margin; lower bit rates need more (EBU Tech 3344 A.1
advises -2 dBTP before a codec in general).

Stages 4 and 5 together land on the target. Setting the loudness once and then limiting lands low on real speech
(the limiter takes level away after loudness was set: -14.98 LUFS for a -14 target was measured from outside), so
with both on, the gain *before* the limiter is searched until the limited output measures within
`LOUDNESS_TOLERANCE_LU` of the target (bracketed secant steps: the limited loudness only grows with that gain). A
target that no gain reaches under the ceiling is reported (``target_reached`` false, with the level reached), never
hidden. The report's output loudness and true peak are measured on the float32 samples that are returned.

Input is refused (nothing is produced) when it holds NaN/inf, is flat-topped at full scale (already clipped), or is
silent where loudness must be measured. `master` returns the processed samples and a report of what each stage did.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..common import true_peak as tp
from ..common.errors import InputError
from . import dsp

LOUDNESS_TOLERANCE_LU = 0.05   # how close the search aims
REACH_TOLERANCE_LU = 0.3       # within this of the target counts as on target (the broadcast acceptance bar)
MAX_LIMITER_PASSES = 12        # limited takes tried before the target is declared unreachable
MAX_EXTRA_GAIN_DB = 30.0       # the most the search pushes into the limiter beyond the plain loudness gain
_TRIM = 1.0 - 1e-4             # the final uniform trim stays this far under the ceiling, so float32 output does too


@dataclass(frozen=True)
class MasterSettings:
    highpass: bool = True
    highpass_hz: float = 60.0
    lowpass: bool = True
    lowpass_hz: float = 9600.0
    deess: bool = True
    deess_band: tuple = (4800.0, 8200.0)
    deess_threshold: float = 0.045
    deess_max_db: float = 7.0
    terminal_s: bool = True
    terminal_s_cap_ms: float = 65.0
    terminal_s_fade_ms: float = 25.0
    terminal_s_tail_ms: float = 80.0
    terminal_s_tail_gain: float = 0.03
    loudness: bool = True
    target_lufs: float = -14.0
    limit: bool = True
    ceiling_dbtp: float = -1.0
    codec_headroom_db: float = 0.5   # the limiter works this far under the ceiling: room for the AAC encode
    delivery_profile: str = "custom"  # where target and ceiling came from (engines/common/delivery.py), for the report

    @property
    def limiter_ceiling_dbtp(self) -> float:
        return float(self.ceiling_dbtp) - max(float(self.codec_headroom_db), 0.0)


@dataclass
class MasterReport:
    stages: list = field(default_factory=list)
    input_lufs: float = float("nan")
    output_lufs: float = float("nan")
    input_true_peak_db: float = float("nan")
    output_true_peak_db: float = float("nan")
    target_lufs: float = float("nan")
    ceiling_dbtp: float = float("nan")
    limiter_ceiling_dbtp: float = float("nan")   # ceiling less the codec headroom: what the limiter holds
    delivery_profile: str = ""                   # the profile that set target and ceiling ("" or custom: by hand)
    seconds: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    gain_db: float = float("nan")   # gain the loudness stage applied before the limiter
    limiter_passes: int = 0         # limited takes measured while searching that gain (0: no limiting needed)
    target_reached: bool = True     # output loudness within REACH_TOLERANCE_LU of the target

    def summary(self) -> str:
        """The two figures a broadcast is judged on, in one line."""
        loud = f"{self.output_lufs:.2f} LUFS" if np.isfinite(self.output_lufs) else "loudness not measured"
        if np.isfinite(self.target_lufs):
            loud += f" (target {self.target_lufs:.1f}{'' if self.target_reached else ', not reachable'})"
        peak = f"true peak {self.output_true_peak_db:.2f} dBTP"
        if np.isfinite(self.ceiling_dbtp):
            peak += f" (ceiling {self.ceiling_dbtp:.1f}"
            if np.isfinite(self.limiter_ceiling_dbtp) and self.limiter_ceiling_dbtp < self.ceiling_dbtp:
                peak += f", limited at {self.limiter_ceiling_dbtp:.1f} for the codec"
            peak += ")"
        return f"{loud}, {peak}"

    def as_dict(self) -> dict:
        return {**asdict(self), "summary": self.summary()}


def check_master_input(x: np.ndarray, input_name: str = "audio") -> None:
    """Refuse NaN/inf samples and clipped (flat-topped at full scale) audio, naming the first offending sample."""
    bad = ~np.isfinite(x)
    if bad.any():
        where = int(np.argmax(bad.reshape(-1)) % x.shape[-1])
        raise InputError(input_name, "finite samples", f"{int(bad.sum())} NaN/inf samples (first at sample {where})",
                         "Fix the node that produced this audio; mastering cannot repair it.")
    runs = clipped_runs(x)
    if runs:
        raise InputError(input_name, "audio that is not clipped", f"{runs} flat-topped runs at full scale (|x| >= "
                         "0.999 for 3+ samples)", "Re-generate or lower the level before mastering; the limiter "
                         "cannot restore clipped peaks.")


def clipped_runs(x: np.ndarray, level: float = 0.999, min_run: int = 3) -> int:
    """Number of runs of at least `min_run` consecutive samples at or above `level` in magnitude."""
    hot = np.abs(x) >= level
    if not hot.any():
        return 0
    runs = 0
    for row in hot.reshape(-1, x.shape[-1]):
        edges = np.diff(np.concatenate([[0], row.astype(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        runs += int(np.sum(ends - starts >= min_run))
    return runs


def highpass(x: np.ndarray, sr: int, cutoff_hz: float = 60.0) -> np.ndarray:
    """DC offset and sub-speech rumble out, before anything measures the level.

    The posts' latest chain (the fused kernel) starts with a 60 Hz one-pole high-pass; their first chains have none,
    and a vocoder's DC offset then reaches the file (broadcast QC flags more than 1 %) and takes limiter headroom.
    Chosen here: the posts' 60 Hz, as a 2nd-order Butterworth run forward and backward like the low-pass (one phase
    policy for the chain: zero phase, so nothing smears the onsets). DC is removed completely; 60 Hz is 6 dB down,
    85 Hz (a low male voice's fundamental) 1 dB, 150 Hz 0.1 dB.
    """
    if cutoff_hz <= 0:
        return x
    return dsp.zero_phase(dsp.butter_sos(2, cutoff_hz, sr, "highpass"), x)


def lowpass(x: np.ndarray, sr: int, cutoff_hz: float = 9600.0) -> np.ndarray:
    if cutoff_hz >= 0.95 * sr / 2:
        return x  # nothing above the cutoff at this rate
    return dsp.zero_phase(dsp.butter_sos(4, cutoff_hz, sr, "lowpass"), x)


def deess(x: np.ndarray, sr: int, band=(4800.0, 8200.0), threshold: float = 0.045,
          max_db: float = 7.0) -> tuple[np.ndarray, float]:
    """Turn the sibilant band down where its envelope exceeds `threshold`; returns (audio, largest cut in dB)."""
    hi = min(band[1], 0.45 * sr)
    if band[0] >= hi:
        return x, 0.0
    sib = dsp.zero_phase(dsp.butter_sos(2, (band[0], hi), sr, "bandpass"), x)
    env = dsp.rms_envelope(sib, round(0.005 * sr))
    cut_db = np.clip(0.5 * dsp.to_db(env / threshold), 0.0, max_db)
    cut_db = dsp.moving_average(cut_db, round(0.010 * sr))
    gain = dsp.from_db(-cut_db)
    return x - sib + sib * gain, float(cut_db.max(initial=0.0))


def terminal_s(x: np.ndarray, sr: int, cap_ms: float = 65.0, fade_ms: float = 25.0, tail_ms: float = 80.0,
               tail_gain: float = 0.03) -> tuple[np.ndarray, int]:
    """Shorten word-final /s/ sounds and silence their overhang; returns (audio, number of /s/ tamed)."""
    ms = sr / 1000.0
    sib_hi = min(9200.0, sr / 2 - 300.0)
    if sib_hi <= 4800.0:
        return x, 0
    sib = dsp.zero_phase(dsp.butter_sos(3, (4800.0, sib_hi), sr, "bandpass"), x)
    vox = dsp.zero_phase(dsp.butter_sos(3, (100.0, 800.0), sr, "bandpass"), x)
    width = round(10 * ms)
    mono = lambda a: a.reshape(-1, a.shape[-1]).max(axis=0)  # a channel that hisses marks the sample
    env_sib, env_vox = mono(dsp.abs_envelope(sib, width)), mono(dsp.abs_envelope(vox, width))
    env_all = mono(dsp.abs_envelope(x, width))
    fricative = (env_sib > 0.015) & (env_vox < 1.1 * env_sib)
    gain = np.ones(x.shape[-1])
    tamed = 0
    for start, end in _segments(fricative, gap=round(35 * ms)):
        after = env_all[end:end + round(60 * ms)]
        if after.size == 0 or after.mean() >= 0.030:
            continue  # another sound follows: not word-final
        tamed += 1
        cap = start + round(cap_ms * ms)
        hold_from = end
        if end > cap:  # too long: fade out from the cap instead of letting it hiss on
            fade = round(fade_ms * ms)
            ramp = tail_gain + (1 - tail_gain) * dsp.raised_cosine(fade, rising=False)
            seg = gain[cap:cap + fade]
            seg[:] = np.minimum(seg, ramp[: seg.size])
            hold_from = cap + fade
        _hold(gain, hold_from, max(end, hold_from) + round(tail_ms * ms), tail_gain, edge=round(5 * ms))
    return x * gain, tamed


def _segments(flags: np.ndarray, gap: int) -> list:
    """(start, end) runs of True, joining runs separated by at most `gap` samples."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    starts, ends = list(np.flatnonzero(edges == 1)), list(np.flatnonzero(edges == -1))
    merged = []
    for s, e in zip(starts, ends):
        if merged and s - merged[-1][1] <= gap:
            merged[-1][1] = e
        else:
            merged.append([s, e])
    return [(int(s), int(e)) for s, e in merged]


def _hold(gain: np.ndarray, start: int, stop: int, level: float, edge: int) -> None:
    """Hold `gain` at `level` on [start, stop) with a smooth ramp in and out (an unsmoothed gate crackles)."""
    n = gain.size
    start, stop = max(start, 0), min(stop, n)
    if stop <= start:
        return
    curve = np.full(stop - start, level)
    e = min(edge, (stop - start) // 2)
    if e > 0:
        curve[:e] = np.minimum(1.0, level + (1 - level) * dsp.raised_cosine(e, rising=False))
        curve[-e:] = level + (1 - level) * dsp.raised_cosine(e, rising=True)
    gain[start:stop] = np.minimum(gain[start:stop], curve)


def measure_lufs(x: np.ndarray, sr: int) -> float:
    """Gated BS.1770-4 integrated loudness (pyloudnorm) of ``(channels, T)`` audio."""
    import pyloudnorm

    if x.shape[-1] < int(0.4 * sr) + 1:
        raise InputError("audio", "at least 0.4 s of audio to measure loudness (one BS.1770 block)",
                         f"{x.shape[-1] / sr:.3f} s", "Turn the loudness stage off for very short clips.")
    return float(pyloudnorm.Meter(sr).integrated_loudness(np.ascontiguousarray(x.T)))


def normalize_loudness(x: np.ndarray, sr: int, target_lufs: float) -> tuple[np.ndarray, float]:
    measured = measure_lufs(x, sr)
    if not np.isfinite(measured):
        raise InputError("audio", "audio with sound in it to bring to a loudness target", "silence (below the "
                         "BS.1770 gate)", "Check the TTS output, or turn the loudness stage off.")
    return x * dsp.from_db(target_lufs - measured), measured


def limit_true_peak(x: np.ndarray, sr: int, ceiling_dbtp: float = -1.0, window_ms: float = 10.0) -> np.ndarray:
    """Keep the true peak (>= 192 kHz over-sampled) at or under the ceiling with a smooth gain (no clipping, no pumping per sample).

    The gain is the minimum required gain over a window, then averaged over the same window: an average of
    window-minima never exceeds the requirement at the window's centre, so every peak is caught, and the gain moves
    over `window_ms` instead of jumping.
    """
    from scipy.ndimage import minimum_filter1d

    ceiling = float(dsp.from_db(ceiling_dbtp)) * _TRIM
    width = max(round(window_ms * sr / 1000.0) | 1, 3)
    y = x
    for _ in range(4):
        peaks = tp.per_sample(y, sr)
        peaks = peaks.reshape(-1, peaks.shape[-1]).max(axis=0)  # one gain for all channels keeps the stereo image
        if peaks.max() <= ceiling:
            return y
        need = np.minimum(1.0, ceiling / np.maximum(peaks, 1e-12)) * 0.999
        gain = dsp.moving_average(minimum_filter1d(need, width, mode="nearest"), width)
        y = y * gain
    peak = tp.true_peak(y, sr)  # oversampling ripple left after the smooth passes: a last uniform trim
    return y * (ceiling / peak) if peak > ceiling else y


def loudness_into_limiter(x: np.ndarray, sr: int, target_lufs: float, ceiling_dbtp: float,
                          measured_lufs: float) -> tuple[np.ndarray, float, int, float]:
    """Search the pre-limiter gain whose limited output measures `target_lufs`.

    Returns ``(limited audio, gain dB, limiter passes run, output LUFS)``. The output loudness grows monotonically with
    the gain (slope 1 while nothing is limited, below 1 once the limiter works), so the search keeps a bracket
    [gain too quiet, gain too loud] and steps by the secant of the last two takes, falling back to bisection when a
    step leaves the bracket. Speech that needs no limiting at the target takes one plain gain (0 limiter passes).
    """
    if not np.isfinite(measured_lufs):
        raise InputError("audio", "audio with sound in it to bring to a loudness target", "silence (below the "
                         "BS.1770 gate)", "Check the TTS output, or turn the loudness stage off.")
    base = target_lufs - measured_lufs
    ceiling = dsp.from_db(ceiling_dbtp) * _TRIM
    cap = base + MAX_EXTRA_GAIN_DB
    low, high = None, None  # (gain, lufs) pairs below and above the target
    takes = []
    best = None
    gain = base
    passes = 0
    for _ in range(MAX_LIMITER_PASSES):
        y = x * dsp.from_db(gain)
        if tp.true_peak(y, sr) > ceiling:
            y = limit_true_peak(y, sr, ceiling_dbtp)
            passes += 1
        out = measure_lufs(y, sr)  # measured even unlimited: the -70 LUFS gate makes a plain gain inexact
        takes.append((gain, out))
        if best is None or abs(out - target_lufs) < abs(best[2] - target_lufs):
            best = (y, gain, out)
        if abs(out - target_lufs) <= LOUDNESS_TOLERANCE_LU:
            return y, gain, passes, out
        if out < target_lufs:
            low = (gain, out)
        else:
            high = (gain, out)
        if low is not None and low[0] >= cap:
            break  # as loud as the limiter can make it
        gain = _next_gain(takes, low, high, target_lufs, cap)
    y, gain, out = best
    return y, gain, passes, out


def _next_gain(takes: list, low, high, target: float, cap: float) -> float:
    g1, l1 = takes[-1]
    g0, l0 = takes[-2] if len(takes) > 1 else (None, None)
    slope = (l1 - l0) / (g1 - g0) if g0 is not None and g1 != g0 else 1.0
    slope = float(np.clip(slope, 0.02, 1.0))  # limiting only ever flattens the curve
    guess = g1 + (target - l1) / slope
    if low is not None and high is not None:
        lo, hi = low[0], high[0]
        if not lo < guess < hi:
            guess = 0.5 * (lo + hi)
    return min(guess, cap)


def master(samples: np.ndarray, sr: int, settings: MasterSettings = MasterSettings(),
           input_name: str = "audio") -> tuple[np.ndarray, MasterReport]:
    """Run the enabled stages on ``(channels, T)`` (or ``(T,)``) samples; returns float32 of the same shape."""
    x = np.asarray(samples, dtype=np.float64)
    shape = x.shape
    x = x.reshape(-1, shape[-1]) if x.ndim > 1 else x[None]
    check_master_input(x, input_name)
    report = MasterReport(input_true_peak_db=tp.true_peak_db(x, sr), delivery_profile=settings.delivery_profile)
    if settings.loudness:
        report.input_lufs = measure_lufs(x, sr)
        report.target_lufs = float(settings.target_lufs)
    if settings.limit:
        report.ceiling_dbtp = float(settings.ceiling_dbtp)
        report.limiter_ceiling_dbtp = settings.limiter_ceiling_dbtp

    def stage(name, fn):
        nonlocal x
        t0 = time.perf_counter()
        x = fn(x)
        report.seconds[name] = time.perf_counter() - t0
        report.stages.append(name)

    if settings.highpass:
        stage("highpass", lambda a: highpass(a, sr, settings.highpass_hz))
    if settings.lowpass:
        stage("lowpass", lambda a: lowpass(a, sr, settings.lowpass_hz))
    if settings.deess:
        def _deess(a):
            out, cut = deess(a, sr, settings.deess_band, settings.deess_threshold, settings.deess_max_db)
            report.notes.append(f"de-esser: largest cut {cut:.1f} dB")
            return out
        stage("deess", _deess)
    if settings.terminal_s:
        def _ts(a):
            out, n = terminal_s(a, sr, settings.terminal_s_cap_ms, settings.terminal_s_fade_ms,
                                settings.terminal_s_tail_ms, settings.terminal_s_tail_gain)
            report.notes.append(f"terminal /s/: {n} tamed")
            return out
        stage("terminal_s", _ts)
    if settings.loudness:
        def _loud(a):
            out, measured = normalize_loudness(a, sr, settings.target_lufs)
            report.gain_db = float(settings.target_lufs - measured)
            return out
        stage("loudness", _loud)
    if settings.loudness and settings.limit:
        # The limiter takes level away: search the extra gain into it until the limited take is on target.
        def _level(a):
            out, extra, report.limiter_passes, lufs = loudness_into_limiter(
                a, sr, settings.target_lufs, settings.limiter_ceiling_dbtp, measured_lufs=settings.target_lufs)
            report.gain_db += extra
            report.notes.append(f"limiter: {extra:+.2f} dB more into it over {report.limiter_passes} pass(es) "
                                f"to stay on target ({lufs:.2f} LUFS)")
            return out
        stage("limit", _level)
    elif settings.limit:
        stage("limit", lambda a: limit_true_peak(a, sr, settings.limiter_ceiling_dbtp))
    result = x.reshape(shape).astype(np.float32)
    measured = result.astype(np.float64).reshape(x.shape)  # figures of what is returned, float32 rounding included
    report.output_true_peak_db = tp.true_peak_db(measured, sr)
    if settings.loudness:
        report.output_lufs = measure_lufs(measured, sr)
        report.target_reached = abs(report.output_lufs - settings.target_lufs) <= REACH_TOLERANCE_LU
        if not report.target_reached:
            report.notes.append(f"target {settings.target_lufs:.1f} LUFS not reachable under "
                                f"{settings.limiter_ceiling_dbtp:.1f} dBTP: {report.output_lufs:.2f} LUFS is the closest; "
                                "lower the target or raise the ceiling")
    return result, report
