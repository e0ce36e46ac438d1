"""Export benchmark: three ratios measured side by side in one run (printed, never pass/fail).

Content: a 1080x1920 (portrait) clip, 175 frames at 24 fps (7.29 s) with 48 kHz stereo audio of the same length:
drifting gradients, moving shapes and fresh per-frame noise, made before any timer starts. Every path encodes
libx264 (preset veryfast, crf 19, GOP 1 s, frame+slice threads, yuv420p BT.601 limited) plus AAC, on the CPU.

1. ours vs a bare PyAV loop with identical settings (goal >= 0.95x). Ours starts from ComfyUI's IMAGE form (float32
   [N, H, W, 3], converted and clamped inside the writer); the bare loop gets ready uint8 frames, so the ratio
   charges the whole conversion to us. For context the bare loop fed from the float IMAGE with ComfyUI's usual
   per-frame `(x * 255).clamp(0, 255).byte()` is printed too.
2. ours vs pipe-into-ffmpeg + a second mux pass (goal >= 1.0x; one file instead of two): frames converted per frame
   as video nodes commonly do, piped as rgb24 to the ffmpeg CLI (imageio-ffmpeg's binary, or one on PATH), then a
   second ffmpeg run muxes the audio (video copied, AAC encoded) into the final file.
3. peak memory added by the export engine, 4x frames vs 1x frames (700 vs 175; goal <= 1.2x): each length in a fresh
   subprocess; frames come from a generator a few at a time; growth = peak RSS during the export (the kernel's
   VmHWM, reset just before) - RSS just before the writer opens.

    python benchmarks/bench_export.py            # full size, 5 repeats (about 5 minutes on an idle 2-core machine)
    python benchmarks/bench_export.py --quick    # 30 frames, one repeat (a smoke run)
    python benchmarks/bench_export.py --frames 96 --repeats 3

Ratios are speed ratios (baseline time / our time): above 1 means ours is faster; memory is growth(4x) / growth(1x).
Each speed ratio is printed three ways: from the best wall time of each path, from the median wall time, and from the
median CPU time (all threads and child processes), which a machine shared with other work disturbs least.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.proc_memory import reset_peak, status_mib  # noqa: E402
from engines.export import AudioTrack, EncodeSettings, VideoWriter  # noqa: E402

W, H, FPS, RATE = 1080, 1920, 24, 48000
PRESET, CRF = "veryfast", 19
SETTINGS = EncodeSettings(encoder="x264", preset=PRESET, quality=CRF, gop_seconds=1.0)


# -- content ----------------------------------------------------------------------------------------------------------
def synth_frame(i: int, rng: np.random.Generator, yy, xx) -> np.ndarray:
    """One float32 [H, W, 3] frame in 0-1: drifting gradients, two moving discs, a bar, fresh noise."""
    t = i / FPS
    img = np.empty((H, W, 3), np.float32)
    img[..., 0] = 0.25 + 0.2 * np.sin(xx * 3.0 + t)
    img[..., 1] = 0.35 + 0.2 * np.cos(yy * 2.0 - 0.7 * t)
    img[..., 2] = 0.45 + 0.15 * np.sin((xx + yy) * 2.5 + 0.3 * t)
    for k, (cx, cy, r, c) in enumerate(((0.3, 0.3, 0.12, (0.9, 0.65, 0.5)), (0.7, 0.6, 0.09, (0.1, 0.2, 0.7)))):
        px = cx + 0.15 * np.sin(t * (0.8 + 0.3 * k))
        disc = (xx - px) ** 2 + ((yy - cy) * H / W) ** 2 < r * r
        img[disc] = c
    bar = (yy > 0.82) & (yy < 0.86)
    img[bar] = ((np.floor((xx[bar] + 0.1 * t) * 60) % 2) * 0.9 + 0.05)[:, None]
    img += rng.random((H, W, 1), dtype=np.float32) * (4.0 / 255.0)
    return img


def make_content(n: int):
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    yy /= H
    xx /= W
    images = torch.empty((n, H, W, 3), dtype=torch.float32)
    for i in range(n):
        images[i] = torch.from_numpy(synth_frame(i, rng, yy, xx))
    samples = int(round(n / FPS * RATE))
    t = np.arange(samples) / RATE
    audio = np.stack([0.3 * np.sin(2 * np.pi * 220 * t) + 0.1 * np.sin(2 * np.pi * 660 * t),
                      0.3 * np.sin(2 * np.pi * 330 * t)]).astype(np.float32)
    return images, audio


# -- the paths under test -------------------------------------------------------------------------------------------
def ours(images, audio, out: Path):
    track = AudioTrack.from_array(audio, RATE)
    with VideoWriter(out, FPS, settings=SETTINGS, audio=track) as writer:
        for start in range(0, images.shape[0], 8):  # the export node's chunking
            writer.write(images[start:start + 8])


def bare_pyav(frames, audio, out: Path, from_float: bool = False):
    """PyAV's encode loop with the same encoder settings, audio encoded after the video, no extras."""
    import av

    with av.open(str(out), "w", format="mp4", options={"movflags": "+faststart"}) as container:
        vs = container.add_stream("libx264", rate=FPS)
        vs.width, vs.height, vs.pix_fmt = W, H, "yuv420p"
        vs.codec_context.gop_size = FPS
        vs.codec_context.thread_type = "AUTO"
        vs.options = {"preset": PRESET, "crf": str(CRF)}
        aus = container.add_stream("aac", rate=RATE, layout="stereo")
        aus.bit_rate = 192000
        for i in range(frames.shape[0]):
            f = frames[i]
            arr = (f * 255).clamp(0, 255).byte().numpy() if from_float else f
            frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
            frame.pts = i
            container.mux(vs.encode(frame))
        container.mux(vs.encode(None))
        af = av.AudioFrame.from_ndarray(audio, format="fltp", layout="stereo")
        af.sample_rate, af.pts = RATE, 0
        container.mux(aus.encode(af))
        container.mux(aus.encode(None))


def ffmpeg_exe() -> str:
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:
        found = shutil.which("ffmpeg")
        if not found:
            raise SystemExit("no ffmpeg: pip install imageio-ffmpeg (scripts/env/test.txt has it)")
        return found


def pipe_two_pass(images, audio, out: Path, ffmpeg: str):
    silent = out.with_name(out.stem + "_silent.mp4")
    enc = subprocess.Popen([ffmpeg, "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{W}x{H}",
                            "-r", str(FPS), "-i", "-", "-c:v", "libx264", "-preset", PRESET, "-crf", str(CRF),
                            "-g", str(FPS), "-pix_fmt", "yuv420p", str(silent)], stdin=subprocess.PIPE)
    for i in range(images.shape[0]):
        enc.stdin.write((images[i] * 255).clamp(0, 255).byte().numpy().tobytes())
    enc.stdin.close()
    if enc.wait() != 0:
        raise RuntimeError("ffmpeg pass 1 failed")
    mux = subprocess.Popen([ffmpeg, "-v", "error", "-y", "-i", str(silent), "-f", "f32le", "-ar", str(RATE), "-ac", "2",
                            "-i", "-", "-c:v", "copy", "-c:a", "aac", "-b:a", "192k", "-movflags", "+faststart",
                            "-shortest", str(out)], stdin=subprocess.PIPE)
    mux.communicate(np.ascontiguousarray(audio.T).tobytes())
    if mux.returncode != 0:
        raise RuntimeError("ffmpeg pass 2 failed")
    return [silent, out]


# -- memory (run in a fresh subprocess per length) ------------------------------------------------------------------
def memory_child(n: int, out: Path) -> dict:
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    yy /= H
    xx /= W
    base = [torch.from_numpy(synth_frame(i, rng, yy, xx)) for i in range(4)]
    audio = np.zeros((2, int(round(n / FPS * RATE))), np.float32)
    audio[0] = 0.2 * np.sin(np.arange(audio.shape[1]) * (2 * np.pi * 220 / RATE))

    def chunks():  # a renderer handing over 4 fresh frames at a time
        for start in range(0, n, 4):
            k = min(4, n - start)
            yield torch.stack([base[(start + j) % 4] for j in range(k)]).add_(0.001 * (start % 7))

    warm = next(chunks())  # the generator's own chunk-sized memory is in the baseline, not in the growth
    del warm
    baseline = status_mib("VmRSS")
    if not reset_peak():
        raise SystemExit("cannot reset the peak-RSS mark (/proc/self/clear_refs); no memory ratio on this system")
    track = AudioTrack.from_array(audio, RATE)
    with VideoWriter(out, FPS, settings=SETTINGS, audio=track) as writer:
        for chunk in chunks():
            writer.write(chunk)
    peak = status_mib("VmHWM")
    return {"frames": n, "baseline_mib": baseline, "peak_mib": peak, "growth_mib": peak - baseline}


def measure_memory(n: int, folder: Path) -> dict:
    cmd = [sys.executable, __file__, "--memory-child", str(n), "--out", str(folder / f"mem_{n}.mp4")]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- driver -----------------------------------------------------------------------------------------------------------
def cpu_seconds() -> float:
    """CPU time of this process (all threads) plus its waited-for children (the ffmpeg runs)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, *args, **kwargs) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0, cpu_seconds() - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=175, help="frames per clip (memory runs use this and 4x this)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per path (min and median are printed)")
    ap.add_argument("--quick", action="store_true", help="30 frames, 1 repeat: a smoke run")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        print(json.dumps(memory_child(args.memory_child, Path(args.out))))
        return 0
    if args.quick:
        args.frames, args.repeats = 30, 1
    n = args.frames
    ffmpeg = ffmpeg_exe()
    print(f"export benchmark: {W}x{H}, {n} frames at {FPS} fps ({n / FPS:.2f} s) + {RATE} Hz stereo; libx264 "
          f"{PRESET} crf {CRF}; torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
    t0 = time.perf_counter()
    images, audio = make_content(n)
    uint8 = (images * 255).add_(0.5).clamp_(0, 255).to(torch.uint8).numpy()
    print(f"content made in {time.perf_counter() - t0:.1f} s (not timed)")
    times: dict[str, list[float]] = {"ours": [], "bare_uint8": [], "bare_float": [], "pipe_2pass": []}
    cpus: dict[str, list[float]] = {k: [] for k in times}
    loads = [os.getloadavg()[0]]
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="bench_export_") as tmp:
        folder = Path(tmp)
        timed(ours, images[:12], audio[:, :RATE // 2], folder / "warm.mp4")  # warm-up, not counted
        order = list(times)
        for r in range(args.repeats):
            for name in order[r % len(order):] + order[:r % len(order)]:  # rotate to spread machine noise
                out = folder / f"{name}.mp4"
                if name == "ours":
                    wall, cpu = timed(ours, images, audio, out)
                elif name == "bare_uint8":
                    wall, cpu = timed(bare_pyav, uint8, audio, out)
                elif name == "bare_float":
                    wall, cpu = timed(bare_pyav, images, audio, out, from_float=True)
                else:
                    wall, cpu = timed(pipe_two_pass, images, audio, out, ffmpeg)
                    sizes["pipe_files"] = len([p for p in folder.iterdir() if p.name.startswith("pipe_2pass")])
                times[name].append(wall)
                cpus[name].append(cpu)
                sizes[name] = out.stat().st_size
            loads.append(os.getloadavg()[0])
        del images, uint8
        mem = {k: measure_memory(k, folder) for k in (n, 4 * n)}

    def stat(name):
        return min(times[name]), statistics.median(times[name])

    print(f"\nmachine load average during the runs (1 min, {os.cpu_count()} cpus): "
          + ", ".join(f"{x:.1f}" for x in loads))
    print("path                                 wall s (min / median)   CPU s (min / median)   fps (best)   file bytes")
    for name, label in (("ours", "ours (float IMAGE in)"), ("bare_uint8", "bare PyAV loop (uint8 in)"),
                        ("bare_float", "bare PyAV loop (float in, per frame)"),
                        ("pipe_2pass", "pipe + second mux pass")):
        lo, med = stat(name)
        print(f"{label:36s} {lo:7.2f} / {med:7.2f}       {min(cpus[name]):7.2f} / {statistics.median(cpus[name]):7.2f}"
              f"       {n / lo:7.1f}     {sizes[name]:>10,}")
    print(f"(pipe + second pass left {sizes['pipe_files']} files: the silent intermediate and the final one; "
          f"ours writes 1)")

    def ratio(base, ours_):
        return stat(base)[0] / stat(ours_)[0], stat(base)[1] / stat(ours_)[1]

    def cpu_ratio(base, ours_):
        return statistics.median(cpus[base]) / statistics.median(cpus[ours_])

    r1, r1f, r2 = ratio("bare_uint8", "ours"), ratio("bare_float", "ours"), ratio("pipe_2pass", "ours")
    c1, c1f, c2 = cpu_ratio("bare_uint8", "ours"), cpu_ratio("bare_float", "ours"), cpu_ratio("pipe_2pass", "ours")
    growth = mem[4 * n]["growth_mib"] / max(mem[n]["growth_mib"], 1e-9)
    print("\nratios (speed = baseline time / our time): wall min-based / wall median-based / CPU median-based")
    print(f"1. ours vs bare PyAV loop, identical settings (uint8 in):   {r1[0]:.3f}x / {r1[1]:.3f}x / {c1:.3f}x"
          "   (goal >= 0.95)")
    print(f"   ours vs bare PyAV loop fed the float IMAGE (context):   {r1f[0]:.3f}x / {r1f[1]:.3f}x / {c1f:.3f}x")
    print(f"2. ours vs pipe + second mux pass:                          {r2[0]:.3f}x / {r2[1]:.3f}x / {c2:.3f}x"
          "   (goal >= 1.0)")
    print(f"3. peak memory added, {4 * n} vs {n} frames from a generator: {growth:.3f}x "
          f"({mem[4 * n]['growth_mib']:.0f} MiB vs {mem[n]['growth_mib']:.0f} MiB)   (goal <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
