"""Accelerated backends on this CPU, side by side in one run (printed, never pass/fail).

1. networks at the real architectures' full size with random weights, batch 1-4: eager fp32 vs eager bf16 vs
   torch.compile (inductor) vs ONNX Runtime, for MuseTalk's UNet step + VAE decode and Ditto's warp + decoder;
   each row: ms per call, frames per second, speed ratio against eager fp32, peak extra memory, and parity
   (cosine of the outputs against eager fp32 on the same inputs);
2. pipelined vs sequential wall time for a 10 s MuseTalk clip on the tiny models (see ``engines/musetalk/lipsync.py``).

    bash scripts/bench.sh accel                # full size: tens of minutes on 2 shared cores (keep it out of CI)
    bash scripts/bench.sh accel --quick        # tiny networks, batch 1 and 2: a smoke run of the script itself

Ratios are eager fp32 time / backend time: above 1 means faster.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.accel_nets import ditto_networks, musetalk_networks  # noqa: E402
from engines.accel import BuildOptions, accelerate, cosine  # noqa: E402
from engines.accel.network import as_tuple  # noqa: E402
from engines.common.cache import ContentCache  # noqa: E402

VARIANTS = (("eager fp32", "eager", torch.float32), ("compile fp32", "compile", torch.float32),
            ("onnxruntime fp32", "onnxruntime", torch.float32), ("eager bf16", "eager", torch.bfloat16))


class PeakRSS:
    """Peak resident memory above the level at start, sampled every 5 ms (CPU allocations are not tracked by torch)."""

    def __init__(self):
        import psutil

        self.proc = psutil.Process()

    def __enter__(self):
        self.base = self.peak = self.proc.memory_info().rss
        self.running = True
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def _poll(self):
        while self.running:
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()

    @property
    def extra_mb(self) -> float:
        return (self.peak - self.base) / 2 ** 20


def timed(fn, repeats: int) -> float:
    fn()                                        # warm-up (first-call allocations, compiled kernels)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_group(title: str, nets, batches, repeats: int, cache: ContentCache) -> list:
    """Time each variant on the chain of `nets` (each network fed its own example inputs) at each batch."""
    rows = []
    inputs = {b: [net.example(b) for net in nets] for b in batches}
    refs = {}
    with torch.inference_mode():
        for b in batches:
            refs[b] = [as_tuple(net.module(*x)) for net, x in zip(nets, inputs[b])]
    base = {}
    for label, backend, dtype in VARIANTS:
        for net in nets:
            net.module.to(dtype)
        t0 = time.perf_counter()
        try:
            runners = [accelerate(net, backend, BuildOptions(batches=(max(batches),), cache=cache, parity=False))
                       for net in nets]
        except Exception as exc:                  # a variant that cannot run here is a row saying why
            rows.append((title, label, "-", f"not run: {type(exc).__name__}: {exc}"[:120], "", "", "", ""))
            continue
        build_s = time.perf_counter() - t0
        print(f"  {title}: {label} built in {build_s:.1f} s", flush=True)
        used = "/".join(sorted({r.backend for r in runners}))
        for b in batches:
            def call():
                with torch.inference_mode():
                    return [as_tuple(r(*x)) for r, x in zip(runners, inputs[b])]
            with PeakRSS() as mem:
                t = timed(call, repeats)
                outs = call()
            cos = min(cosine(o, r) for out, ref in zip(outs, refs[b]) for o, r in zip(out, ref))
            if label == "eager fp32":
                base[b] = t
            ratio = base[b] / t if b in base else float("nan")
            rows.append((title, label if used == backend else f"{label} (ran {used})", b, f"{t * 1000:.0f}",
                         f"{b / t:.2f}", f"{ratio:.2f}x", f"{mem.extra_mb:.0f}", f"{cos:.6f}"))
            print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)     # as measured (long runs)
        rows.append((title, f"  {label} build", "-", f"{build_s:.1f} s", "", "", "", ""))
        del runners
        gc.collect()
    for net in nets:
        net.module.to(torch.float32)
    return rows


def print_table(rows, header=("networks", "variant", "batch", "ms/call", "frames/s", "vs eager fp32",
                              "peak MB", "cos vs fp32")) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = " | ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def pipelined_vs_sequential(seconds: float, quick: bool) -> None:
    """A MuseTalk clip on the tiny models, the same render with and without overlapped stages."""
    from engines.musetalk.avatar import build_avatar
    from engines.musetalk.face_track import HaarDetector, track_faces
    from engines.musetalk.lipsync import LipSyncSettings, lipsync_chunks
    from engines.musetalk.loader import load_musetalk
    from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk, speech_like

    with tempfile.TemporaryDirectory() as tmp:
        nets = load_musetalk(build_tiny_musetalk(Path(tmp) / "tiny"))
        frames, _ = astronaut_loop(8)
        track = track_faces(frames, HaarDetector(), every=2, proxy_size=160)
        avatar = build_avatar(nets, frames, track, 25.0)
        audio = speech_like(seconds)
        results = {}
        for name, pipelined in (("sequential", False), ("pipelined", True)):
            stages: dict = {}
            count = 0
            t = time.perf_counter()
            for chunk in lipsync_chunks(nets, avatar, audio, LipSyncSettings(batch_size=8, pipelined=pipelined),
                                        stage_times=stages):
                count += chunk.shape[0]          # frames dropped: the encoder's share is measured in bench_export
            results[name] = (time.perf_counter() - t, dict(stages), count)
    seq, pipe = results["sequential"], results["pipelined"]
    slowest = max(pipe[1].values()) if pipe[1] else float("nan")
    print(f"\nMuseTalk tiny, {seconds:g} s clip ({seq[2]} frames at 25 fps, batch 8):")
    print(f"  sequential wall {seq[0]:.2f} s; stage times {', '.join(f'{k} {v:.2f} s' for k, v in seq[1].items())}")
    print(f"  pipelined  wall {pipe[0]:.2f} s; stage times {', '.join(f'{k} {v:.2f} s' for k, v in pipe[1].items())}")
    print(f"  pipelined / sequential {pipe[0] / seq[0]:.2f}; pipelined wall / slowest stage {pipe[0] / slowest:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny networks, batch 1-2, 3 s clip")
    ap.add_argument("--batches", default=None, help="comma-separated batch sizes (default 1,2,4; quick 1,2)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--only", choices=("musetalk", "ditto", "pipeline"), default=None)
    args = ap.parse_args()
    batches = [int(b) for b in (args.batches or ("1,2" if args.quick else "1,2,4")).split(",")]
    repeats = args.repeats or (2 if args.quick else 3)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs; "
          f"{'tiny' if args.quick else 'full-size'} networks with random weights; batches {batches}")
    with tempfile.TemporaryDirectory(prefix="bench-accel-") as tmp:
        cache = ContentCache(tmp)
        rows = []
        if args.only in (None, "musetalk"):
            try:
                rows += bench_group("MuseTalk UNet + VAE decode", musetalk_networks(args.quick), batches, repeats,
                                    cache)
            except ImportError as exc:
                print(f"MuseTalk skipped: {exc} (needs diffusers)")
        if args.only in (None, "ditto"):
            rows += bench_group("Ditto warp + decoder", ditto_networks(args.quick), batches, repeats, cache)
        if rows:
            print()
            print_table(rows)
    if args.only in (None, "pipeline"):
        pipelined_vs_sequential(3.0 if args.quick else 10.0, args.quick)


if __name__ == "__main__":
    main()
