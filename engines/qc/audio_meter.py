"""A streaming audio meter: blocks of samples in, a few small per-time-bin series out, never the whole track.

What it keeps (all tiny next to the audio: one minute is ~60k floats):
- K-weighted mean square per 100 ms sub-block, channel-weighted and summed as ITU-R BS.1770-4 eq. 4 does, from
  which the gated integrated loudness, the momentary / short-term series and the loudness range are computed
  (`loudness.py`). The K-weighting filters are pyloudnorm's (the same biquads the mastering stage measures with),
  run statefully across blocks;
- the true peak: BS.1770-5 annex 2 at an over-sampled rate of at least 192 kHz, by the one implementation the
  mastering limiter uses too (`engines/common/true_peak.py`), each block with enough of its neighbours that no seam
  is mis-measured;
- per 1 ms: the mono mean square (for speech activity, silence and the lip-sync envelope) and the largest absolute
  sample of any channel (digital silence, clipping on the timeline);
- per channel: the sum (DC offset) and the count of samples at or above full scale.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy import signal

from ..common import true_peak as tp

FULL_SCALE = 0.999           # |x| at or above this is an "over" (clipped) sample
SUBBLOCK_S = 0.1             # BS.1770 gating blocks are 400 ms with 75 % overlap: four 100 ms sub-blocks
CHANNEL_GAINS = (1.0, 1.0, 1.0, 1.41, 1.41)  # BS.1770-4 table 3: L, R, C, Ls, Rs
PROCESS_SAMPLES = 1 << 16    # collect about this many samples before filtering (fewer, larger numpy calls)


@dataclass
class AudioMeasurements:
    rate: int
    channels: int
    samples: int
    subblock_power: np.ndarray    # [n_100ms] sum_i G_i * mean(K-weighted x_i^2)
    ms_energy: np.ndarray         # [n_1ms] mean square of the mono mix (unweighted)
    ms_peak: np.ndarray           # [n_1ms] largest |x| of any channel
    dc: np.ndarray                # [channels] mean
    over_samples: int             # samples (any channel) with |x| >= FULL_SCALE
    true_peak: float              # linear
    true_peak_s: float
    mono: Optional[np.ndarray]    # whole mono mix, only when asked for (speech recognition)

    @property
    def seconds(self) -> float:
        return self.samples / self.rate


def k_weighting(rate: int) -> list:
    """pyloudnorm's BS.1770 K-weighting stages at `rate`, as (b, a, gain)."""
    import pyloudnorm

    # Meter's filter table is the one source of the K-weighting coefficients in the pack (mastering measures with
    # Meter.integrated_loudness); it is read, not re-derived, so both meters always weight alike.
    stages = pyloudnorm.Meter(rate)._filters.values()
    return [(np.asarray(f.b, np.float64), np.asarray(f.a, np.float64), float(f.passband_gain)) for f in stages]


class AudioMeter:
    def __init__(self, rate: int, channels: int, keep_mono: bool = False):
        self.rate = int(rate)
        self.channels = int(channels)
        self.keep_mono = keep_mono
        self._filters = k_weighting(self.rate)
        self._zi = [np.zeros((self.channels, max(len(a), len(b)) - 1)) for b, a, _ in self._filters]
        self._gains = np.array([CHANNEL_GAINS[min(i, len(CHANNEL_GAINS) - 1)] for i in range(self.channels)])
        self._sub_len = int(round(SUBBLOCK_S * self.rate))
        self._sub_acc = np.zeros(self.channels)
        self._sub_fill = 0
        self._subblocks: list[float] = []
        self._ms_energy: list[np.ndarray] = []
        self._ms_peak: list[np.ndarray] = []
        self._ms_carry = np.zeros((self.channels, 0))  # samples of an unfinished 1 ms bin
        self._dc = np.zeros(self.channels)
        self._over = 0
        self._samples = 0
        self._pending: list[np.ndarray] = []
        self._pending_n = 0
        self._tp_context = tp.context_samples(self.rate)
        self._tp_factor = tp.factor(self.rate)
        self._tp_tail = np.zeros((self.channels, self._tp_context))  # silence before the start, as a whole-file pass sees
        self._tp_start = -self._tp_context  # sample index of the tail's first column
        self._tp = 0.0
        self._tp_at = 0
        self._mono: list[np.ndarray] = []

    def feed(self, block: np.ndarray) -> None:
        """Add `[channels, n]` float samples."""
        block = np.asarray(block, dtype=np.float64)
        if block.ndim == 1:
            block = block[None]
        if block.shape[0] != self.channels:
            raise ValueError(f"expected {self.channels} channels, got {block.shape[0]}")
        if block.shape[1] == 0:
            return
        self._pending.append(block)
        self._pending_n += block.shape[1]
        if self._pending_n >= PROCESS_SAMPLES:
            self._process()

    def _process(self, final: bool = False) -> None:
        if self._pending:
            x = np.concatenate(self._pending, axis=1) if len(self._pending) > 1 else self._pending[0]
            self._pending, self._pending_n = [], 0
            self._samples += x.shape[1]
            self._dc += x.sum(axis=1)
            self._over += int(np.count_nonzero(np.abs(x) >= FULL_SCALE))
            self._loudness(x)
            self._millisecond_bins(x)
            self._true_peak(x, final)
            if self.keep_mono:
                self._mono.append(x.mean(axis=0).astype(np.float32))
        elif final:
            self._true_peak(np.zeros((self.channels, 0)), True)

    def _loudness(self, x: np.ndarray) -> None:
        y = x
        for i, (b, a, gain) in enumerate(self._filters):
            y, self._zi[i] = signal.lfilter(b, a, y, axis=-1, zi=self._zi[i])
            y = y * gain if gain != 1.0 else y
        sq = np.square(y)
        pos = 0
        n = sq.shape[1]
        while pos < n:
            take = min(self._sub_len - self._sub_fill, n - pos)
            self._sub_acc += sq[:, pos:pos + take].sum(axis=1)
            self._sub_fill += take
            pos += take
            if self._sub_fill == self._sub_len:
                self._subblocks.append(float(np.dot(self._gains, self._sub_acc / self._sub_len)))
                self._sub_acc[:] = 0.0
                self._sub_fill = 0

    def _millisecond_bins(self, x: np.ndarray) -> None:
        x = np.concatenate([self._ms_carry, x], axis=1) if self._ms_carry.shape[1] else x
        start = self._samples - x.shape[1]  # sample index of x[:, 0]
        # Bin i covers samples [i * rate / 1000, (i + 1) * rate / 1000): exact at 44.1 kHz too.
        first_bin = int(np.floor(start * 1000 / self.rate + 1e-9))
        end_bin = int(np.floor(self._samples * 1000 / self.rate + 1e-9))  # bins complete after this block
        if end_bin <= first_bin:
            self._ms_carry = x
            return
        edges = np.ceil(np.arange(first_bin, end_bin + 1) * self.rate / 1000 - 1e-9).astype(np.int64) - start
        edges = np.clip(edges, 0, x.shape[1])
        mono_sq = np.square(x.mean(axis=0))
        peak = np.abs(x).max(axis=0)
        lo, hi = edges[:-1], edges[1:]
        sums = np.add.reduceat(mono_sq, lo) if lo.size else np.zeros(0)
        peaks = np.maximum.reduceat(peak, lo) if lo.size else np.zeros(0)
        self._ms_energy.append((sums / np.maximum(hi - lo, 1)).astype(np.float32))
        self._ms_peak.append(peaks.astype(np.float32))
        self._ms_carry = x[:, edges[-1]:]

    def _true_peak(self, x: np.ndarray, final: bool) -> None:
        ctx, n = self._tp_context, self._tp_factor
        buf = np.concatenate([self._tp_tail, x], axis=1)
        if final:
            buf = np.concatenate([buf, np.zeros((self.channels, ctx))], axis=1)
        if buf.shape[1] <= 2 * ctx:
            self._tp_tail = buf if not final else buf[:, :0]
            return
        lo, hi = ctx, buf.shape[1] - ctx  # inputs measured here; the rest is context
        seg = tp.oversampled_magnitude(buf, self.rate)[:, lo * n:hi * n].max(axis=0)
        at = int(np.argmax(seg)) if seg.size else 0
        peak = max(float(seg[at]) if seg.size else 0.0, float(np.abs(buf[:, lo:hi]).max(initial=0.0)))
        if peak > self._tp:
            self._tp = peak
            self._tp_at = self._tp_start + lo + at // n
        self._tp_start += buf.shape[1] - 2 * ctx
        self._tp_tail = buf[:, -2 * ctx:]

    def finish(self) -> AudioMeasurements:
        self._process(final=True)
        ms_e = np.concatenate(self._ms_energy) if self._ms_energy else np.zeros(0, np.float32)
        ms_p = np.concatenate(self._ms_peak) if self._ms_peak else np.zeros(0, np.float32)
        if self._ms_carry.shape[1]:  # the last, partial millisecond
            ms_e = np.append(ms_e, np.float32(np.mean(np.square(self._ms_carry.mean(axis=0)))))
            ms_p = np.append(ms_p, np.float32(np.abs(self._ms_carry).max()))
        return AudioMeasurements(
            rate=self.rate, channels=self.channels, samples=self._samples,
            subblock_power=np.asarray(self._subblocks, np.float64), ms_energy=ms_e, ms_peak=ms_p,
            dc=self._dc / max(self._samples, 1), over_samples=self._over, true_peak=self._tp,
            true_peak_s=max(self._tp_at, 0) / self.rate,
            mono=np.concatenate(self._mono) if self._mono else None)
