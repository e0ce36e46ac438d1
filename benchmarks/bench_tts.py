"""TTS benchmark: ratios measured side by side in one run (printed, never pass/fail).

1. Mastering throughput on the CPU for 60 s of 24 kHz speech-like audio (voiced syllables, sibilant bursts, pauses;
   made before any timer starts), as a real-time ratio (audio seconds per wall second), for the pack's chain
   (engines/omnivoice/master.py) and for a straightforward per-stage scipy implementation of the same five stages:
   transfer-function (b, a) filters with `filtfilt`, `np.convolve` envelopes, a per-sample Python loop to find
   fricative segments, FFT resampling (`scipy.signal.resample`) for the 4x true-peak estimate and a per-sample
   attack/release limiter loop. Both use pyloudnorm for loudness. Printed per stage and in total, with the speed
   ratio baseline time / our time (above 1: ours is faster).
2. Voice prompt: a cache hit (memory-mapped safetensors + JSON) against a cold build (OmniVoice's tokenizer encode +
   cache write), with the tiny random model by default or a real model folder with --model.

    python benchmarks/bench_tts.py                 # about a minute on 2 cores
    python benchmarks/bench_tts.py --seconds 20 --repeats 1
    python benchmarks/bench_tts.py --model /path/to/models/omnivoice/OmniVoice
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import signal

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engines.omnivoice import master as M  # noqa: E402

SR = 24000


def speech_like(seconds: float, seed: int = 0) -> np.ndarray:
    """Syllables of a 120-220 Hz voice (3-5 per second), a sibilant burst ending some words, pauses between phrases."""
    rng = np.random.default_rng(seed)
    out = np.zeros(int(seconds * SR))
    pos = 0
    while pos < out.size - SR:
        syl = int(rng.uniform(0.12, 0.3) * SR)
        t = np.arange(syl) / SR
        f0 = rng.uniform(120, 220)
        voice = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 12)) * np.hanning(syl) * 0.25
        out[pos:pos + syl] += voice
        pos += syl
        if rng.random() < 0.3:  # a word-final /s/
            n = int(rng.uniform(0.06, 0.25) * SR)
            hiss = signal.sosfilt(signal.butter(4, (4500, 9000), "bandpass", fs=SR, output="sos"),
                                  rng.standard_normal(n)) * 0.15
            out[pos:pos + n] += hiss * np.hanning(n)
            pos += n
        if rng.random() < 0.15:
            pos += int(rng.uniform(0.2, 0.6) * SR)
    return out


# -- the straightforward per-stage implementation ----------------------------------------------------------------
def naive_lowpass(x):
    b, a = signal.butter(4, 9600, fs=SR)
    return signal.filtfilt(b, a, x)


def naive_deess(x):
    b, a = signal.butter(2, (4800, 8200), "bandpass", fs=SR)
    band = signal.filtfilt(b, a, x)
    w = int(0.005 * SR)
    env = np.sqrt(np.convolve(band ** 2, np.ones(w) / w, mode="same"))
    cut = np.clip(0.5 * 20 * np.log10(np.maximum(env, 1e-12) / 0.045), 0, 7)
    w = int(0.010 * SR)
    cut = np.convolve(cut, np.ones(w) / w, mode="same")
    return x - band + band * 10 ** (-cut / 20)


def naive_terminal_s(x):
    b, a = signal.butter(3, (4800, 9200), "bandpass", fs=SR)
    sib = signal.filtfilt(b, a, x)
    b, a = signal.butter(3, (100, 800), "bandpass", fs=SR)
    vox = signal.filtfilt(b, a, x)
    w = int(0.010 * SR)
    box = np.ones(w) / w
    env_s, env_v, env_a = (np.convolve(np.abs(v), box, mode="same") for v in (sib, vox, x))
    fric = (env_s > 0.015) & (env_v < 1.1 * env_s)
    segments, start, last = [], None, -10 ** 9
    for i in range(fric.size):  # walk the samples, joining runs closer than 35 ms
        if fric[i]:
            if start is None:
                start = i if i - last > int(0.035 * SR) or not segments else segments.pop()[0]
            last = i
        elif start is not None:
            segments.append((start, i))
            start = None
    gain = np.ones_like(x)
    ms = SR // 1000
    for s, e in segments:
        if env_a[e:e + 60 * ms].mean() >= 0.03:
            continue
        hold = e
        if e - s > 65 * ms:
            f = 25 * ms
            gain[s + 65 * ms:s + 65 * ms + f] = 0.03 + 0.97 * (0.5 + 0.5 * np.cos(np.pi * np.arange(f) / f))
            hold = s + 90 * ms
        gain[hold:max(e, hold) + 80 * ms] = 0.03
    return x * gain


def naive_loudness(x):
    import pyloudnorm

    return x * 10 ** ((-14.0 - pyloudnorm.Meter(SR).integrated_loudness(x)) / 20)


def naive_limit(x):
    ceiling = 10 ** (-1 / 20)
    up = np.abs(signal.resample(x, 4 * x.size)).reshape(-1, 4).max(axis=1)
    attack, release = np.exp(-1 / (0.001 * SR)), np.exp(-1 / (0.050 * SR))
    gain, g = np.ones_like(x), 1.0
    for i in range(x.size):  # classic per-sample limiter: instant-ish attack, smooth release
        target = min(1.0, ceiling / max(up[i], 1e-12))
        g = target if target < g else release * g + (1 - release) * target
        gain[i] = g
    return x * gain


NAIVE = [("lowpass", naive_lowpass), ("deess", naive_deess), ("terminal_s", naive_terminal_s),
         ("loudness", naive_loudness), ("limit", naive_limit)]


def time_naive(x):
    seconds = {}
    for name, fn in NAIVE:
        t0 = time.perf_counter()
        x = fn(x)
        seconds[name] = time.perf_counter() - t0
    return x, seconds


def time_ours(x):
    t0 = time.perf_counter()
    y, report = M.master(x, SR)
    report.seconds["total"] = time.perf_counter() - t0
    return y, report.seconds


def bench_mastering(seconds: float, repeats: int) -> None:
    x = speech_like(seconds)
    ours_runs, naive_runs = [], []
    for _ in range(repeats):
        ours_runs.append(time_ours(x)[1])
        _, naive = time_naive(x)
        naive["total"] = sum(naive.values())
        naive_runs.append(naive)
    print(f"\n1. mastering {seconds:.0f} s of 24 kHz audio on the CPU (median of {repeats}; real-time ratio = audio s / "
          "wall s)")
    print(f"   {'stage':<11} {'ours RT':>10} {'scipy RT':>10} {'speed ratio':>12}")
    for name in [n for n, _ in NAIVE] + ["total"]:
        ours = statistics.median(r[name] for r in ours_runs)
        naive = statistics.median(r[name] for r in naive_runs)
        print(f"   {name:<11} {seconds / ours:>9.0f}x {seconds / naive:>9.0f}x {naive / ours:>11.1f}x")


def bench_prompt(model_dir, repeats: int) -> None:
    from engines.common.cache import ContentCache
    from engines.omnivoice import model as ov_model, prompt as ov_prompt
    from tests.fixtures.tiny_omnivoice import install_tiny_omnivoice, reference_voice

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(model_dir) if model_dir else install_tiny_omnivoice(Path(tmp) / "models")
        loaded = ov_model.load_omnivoice(folder)
        ref = reference_voice(6.0)
        text = "Good evening. Tonight, we bring you an exclusive report on major technological breakthroughs."
        ov_prompt.build_prompt(loaded, ref, text)  # first call pays one-off costs outside the timing
        cold, warm = [], []
        for r in range(repeats):
            cache = ContentCache(Path(tmp) / f"cache{r}")
            t0 = time.perf_counter()
            _, hit = ov_prompt.build_prompt(loaded, ref, text, cache=cache)
            cold.append(time.perf_counter() - t0)
            assert not hit
            t0 = time.perf_counter()
            _, hit = ov_prompt.build_prompt(loaded, ref, text, cache=cache)
            warm.append(time.perf_counter() - t0)
            assert hit
    c, w = statistics.median(cold), statistics.median(warm)
    kind = "the model in " + str(model_dir) if model_dir else "the tiny random model (real tokenizer: far slower cold)"
    print(f"\n2. voice prompt for a 6 s reference, {kind}, median of {repeats}")
    print(f"   cold build {c * 1000:.1f} ms, cache hit {w * 1000:.2f} ms: hit is {c / w:.0f}x faster")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the mastering test audio")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", help="a real OmniVoice folder for the prompt benchmark (default: tiny model)")
    parser.add_argument("--skip-prompt", action="store_true", help="mastering only (no omnivoice needed)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 s of audio, one repeat")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats = 10.0, 1
    bench_mastering(args.seconds, args.repeats)
    if not args.skip_prompt:
        bench_prompt(args.model, max(args.repeats, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
