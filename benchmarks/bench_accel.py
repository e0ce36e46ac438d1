"""Accelerated backends on this CPU, side by side in one run (printed, never pass/fail).

1. networks at the real architectures' full size with random weights (speed does not depend on the values):
   eager fp32 vs eager bf16 vs torch.compile (inductor) vs ONNX Runtime, for MuseTalk's UNet step and VAE decode
   and Ditto's warp network and decoder, at batch 1 and 4 (``--batches``). Each network is timed on its own, with
   every variant built first and the variants' calls interleaved round by round, so a change in the machine's load
   falls on all of them alike; each pair's row (UNet + VAE, warp + decoder) is the sum of its networks' medians.
   Each row: ms per call, frames per second, speed against eager fp32, the variant's resident size, the peak extra
   memory of a call, and parity (cosine of the outputs against eager fp32's on the same inputs);
2. pipelined vs sequential wall time for a 10 s MuseTalk clip on the tiny models (see ``engines/musetalk/lipsync.py``),
   with the UNet and VAE on eager and on what `auto` picks here (on a CPU: ONNX Runtime for the UNet), runs
   interleaved: the pipelined wall against the slowest stage timed alone (in the sequential run), each stage's wall
   and CPU time, the cores the process got, and the wall a core per stage would give.

    bash scripts/bench.sh accel                # full size (not yet timed on an idle machine; hours under load:
                                               # split it with --nets, see docs/accel.md)
    bash scripts/bench.sh accel --quick        # tiny networks: a smoke run of the script itself
    bash scripts/bench.sh accel --only musetalk --variants "eager fp32,onnxruntime fp32" --ort-threads 2

Ratios are eager fp32 time / variant time: above 1 means faster. Warm-up: one call per variant at the first batch,
and one more per batch for compile (``dynamic=False`` builds a graph per batch size), before the timed rounds.
"""
from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.accel_nets import ditto_networks, musetalk_networks  # noqa: E402
from engines.accel import BuildOptions, accelerate, cosine  # noqa: E402
from engines.accel.network import as_tuple  # noqa: E402
from engines.common.cache import ContentCache  # noqa: E402

# label -> (backend, weights dtype)
VARIANTS = {"eager fp32": ("eager", torch.float32), "eager bf16": ("eager", torch.bfloat16),
            "compile fp32": ("compile", torch.float32), "onnxruntime fp32": ("onnxruntime", torch.float32),
            "auto fp32": ("auto", torch.float32)}     # what the loader's auto picks per network here (the row says)
BASELINE = "eager fp32"


class PeakRSS:
    """Peak resident memory above the level at start, sampled every 5 ms (CPU allocations are not tracked by torch)."""

    def __init__(self):
        import psutil

        self.proc = psutil.Process()

    def rss(self) -> int:
        return self.proc.memory_info().rss

    def __enter__(self):
        self.base = self.peak = self.rss()
        self.running = True
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def _poll(self):
        while self.running:
            self.peak = max(self.peak, self.rss())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def extra_mb(self) -> float:
        return (self.peak - self.base) / 2 ** 20


@dataclass
class Measured:
    """One variant of one network: its runner, and per batch the call times, peak memory and parity."""

    label: str
    runner: object = None
    picked: str = ""                                 # auto: the backend it picked
    build_s: float = 0.0
    resident_mb: float = 0.0
    error: str = ""
    times: dict = field(default_factory=dict)        # batch -> [seconds]
    peak_mb: dict = field(default_factory=dict)      # batch -> max MB over the calls
    cos: dict = field(default_factory=dict)          # batch -> cosine against eager fp32
    refs: dict = None                                # eager fp32's outputs per batch (the parity reference)

    def median(self, b):
        return statistics.median(self.times[b]) if self.times.get(b) else None


def build_variant(net, label: str, cache: ContentCache, batches, ort_threads) -> Measured:
    """The variant's runner through the pack's own `accelerate` (bf16: a bf16 copy of the weights)."""
    backend, dtype = VARIANTS[label]
    m = Measured(label)
    mem = PeakRSS()
    before = mem.rss()
    t0 = time.perf_counter()
    try:
        target = net if dtype == torch.float32 else replace(net, module=copy.deepcopy(net.module).to(dtype))
        opts = BuildOptions(batches=tuple(batches), cache=cache, parity=False, ort_threads=ort_threads)
        m.runner = accelerate(target, backend, opts)
        if backend == "auto":
            m.picked = m.runner.backend
        elif m.runner.backend != backend:
            raise RuntimeError("; ".join(m.runner.fallbacks) or f"ran {m.runner.backend}")
    except Exception as exc:              # a variant that cannot run here is a row saying why
        m.error = f"not run: {type(exc).__name__}: {exc}".replace("\n", " ")[:160]
        m.runner = None
    m.build_s = time.perf_counter() - t0
    m.resident_mb = (mem.rss() - before) / 2 ** 20
    return m


def call(runner, inputs):
    with torch.inference_mode():
        return as_tuple(runner(*inputs))


def failed(m: Measured, exc: Exception) -> None:
    """A variant whose call fails (compile is lazy: its errors come at the first call) becomes a row saying why."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    m.error = f"not run: failed with {type(exc).__name__}: {msg}"[:160]
    m.runner = None
    print(f"  {m.label}: {m.error}", flush=True)


def bench_network(net, labels, batches, rounds: int, cache: ContentCache, ort_threads, budget,
                  one_at_a_time: bool = False) -> list:
    """Build every variant of `net`, warm each up, then time them interleaved: round by round, batch by batch.
    `one_at_a_time`: each variant built, timed and freed before the next (memory: the full UNet in fp32 is 3.4 GB
    and its ONNX Runtime session as much again), eager fp32 first; not interleaved."""
    inputs = {b: net.example(b) for b in batches}       # the same inputs for every variant (parity)
    if one_at_a_time:
        done, refs = [], None
        for label in labels:
            done += _bench_variants(net, inputs, [label], batches, rounds, cache, ort_threads, budget, refs)
            refs = done[0].refs if done and done[0].label == BASELINE else refs
        return done
    return _bench_variants(net, inputs, labels, batches, rounds, cache, ort_threads, budget, None)


def _bench_variants(net, inputs, labels, batches, rounds, cache, ort_threads, budget, refs) -> list:
    built = {}
    # ONNX Runtime first: its export holds a second copy of the graph's weights for a while, so it runs before
    # the bf16 copy exists (the full UNet is 3.4 GB in fp32)
    for label in sorted(labels, key=lambda v: VARIANTS[v][0] != "onnxruntime"):
        if budget.spent():
            built[label] = Measured(label, error="not run: over the time budget (--budget-min)")
            continue
        m = build_variant(net, label, cache, batches, ort_threads)
        print(f"  {net.name}: {label}{f' (picked {m.picked})' if m.picked else ''} "
              f"{'built' if not m.error else m.error} in {m.build_s:.1f} s "
              f"(+{m.resident_mb:.0f} MB resident)", flush=True)
        built[label] = m
        gc.collect()
    variants = [built[label] for label in labels]
    live = [m for m in variants if m.runner is not None]
    warm = set()
    for i, b in enumerate(batches):                   # warm-up: first-call allocations, compile's graph per batch
        for m in live:
            if i == 0 or VARIANTS[m.label][0] == "compile":
                if budget.spent():
                    continue                          # not warmed up at this batch: not timed there either
                t = time.perf_counter()
                try:
                    call(m.runner, inputs[b])
                except Exception as exc:
                    failed(m, exc)
                    continue
                print(f"  {net.name}: {m.label} warm-up at batch {b}: {time.perf_counter() - t:.1f} s", flush=True)
            warm.add((m.label, b))
        live = [m for m in live if m.runner is not None]
    refs = dict(refs or {})
    for r in range(rounds):
        for b in batches:
            for m in live:
                if (m.label, b) not in warm or (budget.spent() and m.times.get(b)):
                    continue                              # over budget: at least one timed call per warm cell
                if m.runner is None:
                    continue
                try:
                    with PeakRSS() as mem:
                        t = time.perf_counter()
                        out = call(m.runner, inputs[b])
                        dt = time.perf_counter() - t
                except Exception as exc:
                    failed(m, exc)
                    continue
                m.times.setdefault(b, []).append(dt)
                m.peak_mb[b] = max(m.peak_mb.get(b, 0.0), mem.extra_mb)
                if m.label == BASELINE and b not in refs:
                    refs[b] = out
                if b in refs and b not in m.cos:
                    m.cos[b] = min(cosine(o, ref) for o, ref in zip(out, refs[b]))
                print(f"  {net.name}: round {r + 1} batch {b} {m.label}: {dt * 1000:.0f} ms"
                      f"{f', cos {m.cos[b]:.6f} vs eager fp32' if b in m.cos else ''}", flush=True)
    for m in variants:
        m.runner = None
        m.refs = refs if m.label == BASELINE else None
    gc.collect()
    return variants


def rows_for(title: str, per_net: list, batches) -> list:
    """Rows of a pair of networks: each variant's summed medians; parity the worse of the two networks."""
    rows = []
    labels = [m.label for m in per_net[0]]
    base = {}
    for k, label in enumerate(labels):
        ms = [variants[k] for variants in per_net]
        if any(m.picked for m in ms):
            label = f"{label} ({' + '.join(m.picked or '-' for m in ms)})"
        err = next((m.error for m in ms if m.error), "")
        if err:
            rows.append((title, label, "-", err, "", "", "", "", ""))
            continue
        for b in batches:
            meds = [m.median(b) for m in ms]
            if any(t is None for t in meds):
                rows.append((title, label, b, "not timed (time budget)", "", "", "", "", ""))
                continue
            t = sum(meds)
            if label == BASELINE:
                base[b] = t
            ratio = f"{base[b] / t:.2f}x" if b in base else "-"
            cos = min((m.cos[b] for m in ms if b in m.cos), default=float("nan"))
            n = min(len(m.times[b]) for m in ms)
            rows.append((title, label, b, f"{t * 1000:.0f}", f"{b / t:.3f}", ratio,
                         f"{sum(m.resident_mb for m in ms):.0f}", f"{max(m.peak_mb[b] for m in ms):.0f}",
                         f"{cos:.6f}", n))
        rows.append((title, f"  {label} build", "-", f"{sum(m.build_s for m in ms):.1f} s", "", "", "", "", ""))
    return rows


def bench_pair(title: str, nets, labels, batches, rounds, cache, ort_threads, budget, names=None,
               one_at_a_time=False) -> list:
    per_net, timed = [], []
    for net in nets:
        if names and net.name not in names:
            continue
        per_net.append(bench_network(net, labels, batches, rounds, cache, ort_threads, budget, one_at_a_time))
        timed.append(net.name)
        print_table(rows_for(net.name, per_net[-1:], batches))
    if len(per_net) < 2:                  # one network of the pair (--nets): its rows were printed above
        return rows_for(", ".join(timed), per_net, batches) if per_net else []
    return rows_for(title, per_net, batches)


HEADER = ("networks", "variant", "batch", "ms/call", "frames/s", "vs eager fp32", "resident MB", "peak MB",
          "cos vs fp32", "calls")


def print_table(rows, header=HEADER) -> None:
    widths = [max(len(str(r[i])) if i < len(r) else 0 for r in [header, *rows]) for i in range(len(header))]
    line = " | ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    sys.stdout.flush()


def _render(nets, avatar, audio, pipelined: bool) -> dict:
    from engines.accel.stages import StageTimes
    from engines.musetalk.lipsync import LipSyncSettings, lipsync_chunks

    stages = StageTimes()
    frames = chunks = 0
    t, c = time.perf_counter(), time.process_time()
    for chunk in lipsync_chunks(nets, avatar, audio, LipSyncSettings(batch_size=8, pipelined=pipelined),
                                stage_times=stages):
        frames += chunk.shape[0]          # frames dropped: the encoder's share is measured in bench_export
        chunks += 1
    return {"wall": time.perf_counter() - t, "cpu": time.process_time() - c, "stages": dict(stages),
            "stage_cpu": dict(stages.cpu), "frames": frames, "chunks": chunks}


def _median_run(runs: list) -> dict:
    return sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]


def _stages(run: dict) -> str:
    return ", ".join(f"{k} {v:.2f} s ({run['stage_cpu'].get(k, 0.0):.2f} CPU-s)" for k, v in run["stages"].items())


def replay_with_own_cores(per_chunk: dict, chunks: int) -> float:
    """The same stage chain (engines/accel/stages.threaded, depth 2) with each stage's work replaced by a sleep of
    its measured CPU time per chunk: stages that do not compete for cores, as a GPU stage's thread waits on its GPU.
    Returns the wall time: what the queues and threads give where each stage has its own core."""
    from engines.accel.stages import threaded

    def stage(source, seconds):
        for item in source:
            time.sleep(seconds)
            yield item

    t = time.perf_counter()
    time.sleep(per_chunk.get("audio", 0.0) * chunks)          # the audio features come first, whole
    chain = iter(range(chunks))
    for name in ("unet", "vae", "paste"):
        chain = threaded(stage(chain, per_chunk.get(name, 0.0)), name=f"replay-{name}")
    for _ in chain:
        pass
    return time.perf_counter() - t


def pipelined_vs_sequential(seconds: float, rounds: int = 2, backends=("eager", "auto")) -> None:
    """A MuseTalk clip on the tiny models, the same render with and without overlapped stages, for the UNet and
    VAE on eager and on what `auto` picks on this machine; sequential and pipelined runs interleaved round by round
    (the load moves), the median round of each reported, with each stage's wall and CPU time and the process's CPU
    time over the wall (the cores it got)."""
    from engines.musetalk.accel import accelerate_musetalk
    from engines.musetalk.avatar import build_avatar
    from engines.musetalk.face_track import HaarDetector, track_faces
    from engines.musetalk.loader import load_musetalk
    from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk, speech_like

    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_musetalk(Path(tmp) / "tiny")
        for backend in backends:
            nets = load_musetalk(folder)
            summaries = ["eager (no runners: lipsync's own calls)"]
            if backend != "eager":
                threads = torch.get_num_threads()
                summaries = accelerate_musetalk(nets, backend, BuildOptions(batches=(8,), cache=ContentCache(
                    Path(tmp) / "cache"), ort_threads=threads))
            frames, _ = astronaut_loop(8)
            track = track_faces(frames, HaarDetector(), every=2, proxy_size=160)
            avatar = build_avatar(nets, frames, track, 25.0)
            audio = speech_like(seconds)
            _render(nets, avatar, audio, True)                    # warm-up (first calls, ORT's first run)
            runs = {"sequential": [], "pipelined": []}
            for _ in range(rounds):
                for name in runs:
                    runs[name].append(_render(nets, avatar, audio, name == "pipelined"))
            seq, pipe = _median_run(runs["sequential"]), _median_run(runs["pipelined"])
            name, slowest = max(seq["stages"].items(), key=lambda kv: kv[1])
            print(f"\nMuseTalk tiny, backend {backend}: {'; '.join(s.split('; not used')[0] for s in summaries)}")
            print(f"  {seconds:g} s clip ({seq['frames']} frames at 25 fps, batch 8, {seq['chunks']} chunks), "
                  f"{torch.get_num_threads()} torch threads, median of {rounds} interleaved rounds, load average "
                  f"{os.getloadavg()[0]:.1f}")
            for label, run in (("sequential", seq), ("pipelined ", pipe)):
                print(f"  {label} wall {run['wall']:.2f} s, process {run['cpu']:.2f} CPU-s "
                      f"({run['cpu'] / run['wall']:.2f} cores); stages {_stages(run)}")
            cpu, alone = pipe["stage_cpu"], seq["stage_cpu"]
            top, work = max(cpu.values()), sum(cpu.values())
            # a core per stage: the slowest stage's own work, plus the first chunk's way through the other stages
            free = top + (work - top) / max(1, pipe["chunks"])
            print(f"  pipelined / sequential {pipe['wall'] / seq['wall']:.2f}; pipelined wall / slowest stage alone "
                  f"({name} {slowest:.2f} s) {pipe['wall'] / slowest:.2f}; sum of stages alone / slowest "
                  f"{sum(seq['stages'].values()) / slowest:.2f}")
            print(f"  in CPU time: the stages' work sums to {work:.2f} s, the slowest's ({name}) to {top:.2f} s "
                  f"({alone.get(name, 0.0):.2f} s alone), so overlapping fully needs {work / top:.2f} cores free; the "
                  f"process got {pipe['cpu'] / pipe['wall']:.2f}. With a core per stage the wall would be ~{free:.2f} "
                  f"s = {free / max(alone.get(name, top), 1e-9):.2f}x the slowest stage alone")
            n = max(1, pipe["chunks"])
            replay = replay_with_own_cores({k: v / n for k, v in alone.items()}, n)
            slow_cpu = max(v for k, v in alone.items() if k != "audio")
            print(f"  replayed with each stage's CPU time as a sleep (stages that do not share cores): wall "
                  f"{replay:.2f} s against the stages' sum {sum(alone.values()):.2f} s and the slowest "
                  f"{slow_cpu:.2f} s (+ audio {alone.get('audio', 0.0):.2f} s, before the chain): "
                  f"{replay / (slow_cpu + alone.get('audio', 0.0)):.2f}x")
            sys.stdout.flush()
            del nets


class Budget:
    def __init__(self, minutes):
        self.start, self.limit = time.perf_counter(), (minutes * 60 if minutes else None)

    def spent(self) -> bool:
        return self.limit is not None and time.perf_counter() - self.start > self.limit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny networks, batch 1-2, 3 s clip")
    ap.add_argument("--batches", default=None, help="comma-separated batch sizes (default 1,4; quick 1,2)")
    ap.add_argument("--rounds", type=int, default=None, help="timed calls per variant and batch (default 2; "
                    "quick 2)")
    ap.add_argument("--only", choices=("musetalk", "ditto", "pipeline"), default=None)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of: {', '.join(VARIANTS)}")
    ap.add_argument("--nets", default=None, help="comma-separated network names to time (default all: "
                    "musetalk_unet, musetalk_vae_decoder, ditto_warp, ditto_decoder)")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="build, time and free each variant in turn (less memory; not interleaved)")
    ap.add_argument("--cache", default=None, help="keep the ONNX exports in this folder (default: a temporary one)")
    ap.add_argument("--threads", type=int, default=None, help="torch's intra-op threads (default: its own)")
    ap.add_argument("--ort-threads", type=int, default=None, help="ONNX Runtime intra-op threads (default: its own)")
    ap.add_argument("--budget-min", type=float, default=None,
                    help="stop building and re-timing after this many minutes (every built cell keeps one timed "
                         "call); the rows say what was not measured")
    args = ap.parse_args()
    batches = [int(b) for b in (args.batches or ("1,2" if args.quick else "1,4")).split(",")]
    rounds = args.rounds or 2
    labels = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in labels if v not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    if BASELINE not in labels:
        labels.insert(0, BASELINE)
    names = {n.strip() for n in args.nets.split(",") if n.strip()} if args.nets else None
    if args.threads:
        torch.set_num_threads(args.threads)
    budget = Budget(args.budget_min)
    started = time.perf_counter()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; {'tiny' if args.quick else 'full-size'} networks with random weights; "
          f"batches {batches}, {rounds} timed rounds", flush=True)
    if args.only in (None, "pipeline"):           # cheap (tiny models): first, so it is never cut by the budget
        pipelined_vs_sequential(3.0 if args.quick else 10.0, rounds)
    with tempfile.TemporaryDirectory(prefix="bench-accel-") as tmp:
        cache = ContentCache(args.cache or tmp)
        rows = []
        if args.only in (None, "musetalk"):
            try:
                nets = musetalk_networks(args.quick, names)
            except ImportError as exc:
                print(f"MuseTalk skipped: {exc} (needs diffusers)")
            else:
                rows += bench_pair("MuseTalk UNet + VAE decode", nets, labels, batches, rounds, cache,
                                   args.ort_threads, budget, names, args.one_at_a_time)
                del nets
                gc.collect()
        if args.only in (None, "ditto"):
            rows += bench_pair("Ditto warp + decoder", ditto_networks(args.quick), labels, batches, rounds, cache,
                               args.ort_threads, budget, names, args.one_at_a_time)
        if rows:
            print()
            print_table(rows)
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
