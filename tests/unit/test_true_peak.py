"""True peak (engines/common/true_peak.py) against references that are not the code under test.

Oracles: the analytic peak of a sine (a tone of amplitude A peaks at A whatever its phase; EBU Tech 3341 cases 15-19
are such tones: fs/4 at 0 and 45 degrees, fs/6 at 60, fs/8 at 67.5), and an FFT-domain 64x interpolation of the
whole signal (band-limited periodic interpolation: zero-padding the spectrum; its own worst under-read is
20 log10 cos(pi / 128) = 0.003 dB, BS.1770-5 annex 2 attachment 1). Agreement asked: 0.05 dB, at 16, 22.05, 24,
44.1 and 48 kHz. The mastering limiter's output is measured with the same FFT reference.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import signal

from engines.common import true_peak as T
from engines.omnivoice import master as M
from tests.fixtures.peak_reference import fft_reference_peak

RATES = (16000, 22050, 24000, 44100, 48000)
TOLERANCE_DB = 0.05


def db(x: float) -> float:
    return 20.0 * np.log10(x)


def band_limited_noise(rate: int, seconds: float, top: float, seed: int) -> np.ndarray:
    """White noise low-passed at `top` x Nyquist, Hann-tapered so the FFT's periodic wrap adds no edge."""
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    taps = signal.firwin(511, top, window=("kaiser", 10.0))
    x = np.convolve(rng.standard_normal(n), taps, "same") * np.hanning(n)
    return 0.5 * x / np.abs(x).max()


def tone(rate: int, cycles_per_sample: float, phase_deg: float, amplitude: float, seconds: float = 1.0):
    t = np.arange(int(rate * seconds))
    # Tech 3341 tapers its tones (10 ms fades); a 20 ms raised-cosine fade leaves the steady part's peak untouched.
    fade = np.ones(t.size)
    edge = int(0.02 * rate)
    ramp = 0.5 - 0.5 * np.cos(np.pi * (np.arange(edge) + 0.5) / edge)
    fade[:edge], fade[-edge:] = ramp, ramp[::-1]
    return amplitude * np.sin(2 * np.pi * cycles_per_sample * t + np.radians(phase_deg)) * fade


def test_factor_reaches_192_khz_with_the_smallest_integer():
    # BS.1770-5 annex 2: meters over-sample to at least 192 kHz; 4x is the annex's factor for 48 kHz.
    assert [T.factor(r) for r in RATES] == [12, 9, 8, 5, 4]
    for rate in (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000, 192000):
        n = T.factor(rate)
        assert n * rate >= 192000 and (n == 1 or (n - 1) * rate < 192000)


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("cycles, phase, amplitude", [(1 / 4, 0.0, 0.5), (1 / 4, 45.0, 0.5), (1 / 6, 60.0, 0.5),
                                                      (1 / 8, 67.5, 0.5), (1 / 4, 45.0, 1.41), (1 / 4, 45.0, 1.0)])
def test_tech_3341_tones_read_their_analytic_peak(rate, cycles, phase, amplitude):
    x = tone(rate, cycles, phase, amplitude)
    assert abs(T.true_peak_db(x, rate) - db(amplitude)) <= TOLERANCE_DB


@pytest.mark.parametrize("rate", RATES)
def test_full_scale_fs4_sine_at_45_degrees_is_3_01_db_over_its_sample_peak(rate):
    x = tone(rate, 1 / 4, 45.0, 1.0)
    sample_peak = db(np.abs(x).max())
    assert abs(sample_peak + 3.0103) < 0.001       # every sample lands at sin(45 deg) = -3.01 dB
    assert abs(T.true_peak_db(x, rate) - (sample_peak + 3.0103)) <= TOLERANCE_DB


@pytest.mark.parametrize("rate", RATES)
def test_band_limited_noise_agrees_with_the_fft_reference(rate):
    worst = 0.0
    for seed, top in enumerate((0.5, 0.8, 0.9, 0.9)):
        x = band_limited_noise(rate, 0.5, top, seed)
        err = db(T.true_peak(x, rate)) - db(fft_reference_peak(x))
        worst = max(worst, abs(err))
    assert worst <= TOLERANCE_DB, f"{rate} Hz: {worst:.4f} dB from the FFT reference"


def test_a_fixed_4x_meter_under_reads_at_24_khz_so_the_reference_can_tell():
    # The old meter (4x whatever the rate): an fs/4 tone (6 kHz) whose every peak falls half-way between two of its
    # over-samples (sample offset 1/8) reads cos(11.25 deg) = 0.17 dB low.
    rate = 24000
    x = tone(rate, 1 / 4, 78.75, 0.5)
    old = np.abs(signal.resample_poly(x, 4, 1)).max()
    assert db(fft_reference_peak(x)) - db(old) > 0.15
    assert abs(T.true_peak_db(x, rate) - db(fft_reference_peak(x))) <= TOLERANCE_DB


@pytest.mark.parametrize("rate", (22050, 24000, 48000))
def test_limiter_output_is_under_the_ceiling_by_the_fft_reference(rate):
    x = np.concatenate([band_limited_noise(rate, 0.5, 0.9, 7), tone(rate, 0.45, 30.0, 0.5, 0.5)]) * 3.0
    y = M.limit_true_peak(x[None], rate, -1.0)[0]
    assert db(fft_reference_peak(np.concatenate([y, np.zeros(rate // 10)]))) <= -1.0 + 0.01


def test_streaming_is_not_needed_for_per_sample_to_cover_the_peak():
    # per_sample credits a peak between two samples to both: its maximum is the true peak.
    x = band_limited_noise(24000, 0.25, 0.9, 3)
    assert np.isclose(T.per_sample(x, 24000).max(), T.true_peak(x, 24000))
