"""Captions benchmark: what burned-in captions and the soft track add to an export, side by side in one run. Printed,
never pass/fail.

Content: a synthetic script of `--sentences` news sentences timed at 14 characters a second (the caption tests'
timing), laid out by the standard profile; frames are 1080x1920 uint8 grey, made chunk by chunk (16 frames) by a
generator, as a renderer hands them to Export Video; libx264 (the CPU route), no audio.

Rows, alternating in the same run, best and median of the repeats (seconds of wall time):
1. plain export;
2. export + soft track (mov_text muxed in the same pass);
3. export + soft track + burned-in captions (outline).
The ratios to row 1 are what the captions cost. Peak RSS growth (of the process's peak, over a row, after a warm-up
export with every option) shows that burning copies one chunk at a time, never the clip (the clip itself would be
n x 6.2 MB).

    python benchmarks/bench_captions.py            # 20 s of speech, 3 repeats
    python benchmarks/bench_captions.py --quick    # 10 s, 1 repeat
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.captions.layout import LayoutSettings  # noqa: E402
from engines.captions.render import plan_captions  # noqa: E402
from engines.captions.timing import ClauseSpan, timing  # noqa: E402
from engines.export import EncodeSettings, write_stream  # noqa: E402

SR = 24000
SENTENCE = "El dólar subió un 42,5% hasta US$ 3,2 M y la bolsa cerró con ganancias del 1,8% en el día."


def script_timing(seconds: float):
    spans, t = [], 0.3
    while t + len(SENTENCE) / 14 < seconds:
        a, b = int(t * SR), int((t + len(SENTENCE) / 14) * SR)
        spans.append(ClauseSpan(a, b, a, b, SENTENCE, SENTENCE))
        t += len(SENTENCE) / 14 + 0.5
    return timing(spans, SR, int(seconds * SR), "es")


def chunks(n: int, height: int, width: int, size: int = 16):
    for start in range(0, n, size):
        yield np.full((min(size, n - start), height, width, 3), 96, np.uint8)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.seconds, args.repeats = 10.0, 1
    fps, width, height = 25, 1080, 1920
    t = script_timing(args.seconds)
    plan = plan_captions(t, LayoutSettings("standard", "es", fps=fps), burn_in=True)
    n = int(args.seconds * fps)
    settings = EncodeSettings(encoder="x264", preset="veryfast")
    rows = {"plain export": (False, False), "+ soft track": (True, False), "+ soft track + burn-in": (True, True)}
    times = {name: [] for name in rows}
    rss = {name: [] for name in rows}
    with tempfile.TemporaryDirectory() as tmp:
        # Warm-up (encoder probe, font and libraries loaded) so the first timed row pays nothing the others do not.
        write_stream(Path(tmp) / "warm.mp4", fps, plan.frames(chunks(2 * fps, height, width), fps),
                     settings=settings, subtitles=plan.soft_subtitles())
        for rep in range(args.repeats):
            for name, (soft, burn) in rows.items():
                frames = chunks(n, height, width)
                if burn:
                    frames = plan.frames(frames, fps)
                before = peak_rss_mb()
                t0 = time.perf_counter()
                write_stream(Path(tmp) / f"{rep}_{len(times[name])}.mp4", fps, frames, settings=settings,
                             subtitles=plan.soft_subtitles() if soft else None)
                times[name].append(time.perf_counter() - t0)
                rss[name].append(peak_rss_mb() - before)
    print(f"captions bench: {n} frames {width}x{height} at {fps} fps ({args.seconds:g} s), {len(plan.cues)} "
          f"captions, libx264 veryfast, {args.repeats} repeats")
    base = min(times["plain export"])
    for name in rows:
        best, med = min(times[name]), statistics.median(times[name])
        print(f"  {name:26s} best {best:7.2f} s  median {med:7.2f} s  x{best / base:5.2f} of plain  "
              f"peak RSS growth {max(rss[name][1:] or rss[name]):6.1f} MB")


if __name__ == "__main__":
    main()
