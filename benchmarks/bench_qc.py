"""QC benchmark: Broadcast QC of a 1080x1920 clip as a multiple of real time (goal >= 10x), side by side with the
decode it cannot avoid. Printed, never pass/fail.

Content: the QC tests' synthetic talking clip (tests/fixtures/qc_clips.py) at 1080x1920 (portrait), 25 fps, 60 s,
mono 48 kHz AAC, with 3 code values of camera-like grain (so it decodes like footage, not like flat graphics),
written by the pack's export writer (libx264 veryfast crf 20) before any timer starts.

Rows, each measured in the same run, alternating, best and median of the repeats:
1. QC: `qc_file` with every check (Whisper off), streaming the file;
2. decode only: PyAV demux + decode of both streams with the same threading, nothing looked at (the floor QC
   stands on);
3. decode to RGB: the Load node's streaming reader (swscale to RGB, chunks discarded), what QC would cost if it
   looked at pictures the way the rest of ComfyUI does.
"x real time" = clip seconds / wall seconds, and clip seconds / CPU seconds (all threads: what one core would take,
the figure least disturbed by a shared machine). Peak RSS growth of the QC row shows that memory does not follow
the clip's length.

    python benchmarks/bench_qc.py              # 60 s clip, 3 repeats (clip generation ~2 min on 2 cores)
    python benchmarks/bench_qc.py --quick      # 8 s clip, 1 repeat (a smoke run)
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engines.export import reader  # noqa: E402
from engines.qc import QCLimits, qc_file  # noqa: E402
from tests.fixtures.qc_clips import talking_clip  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def status_mb(key: str) -> float:
    """A memory line of /proc/self/status (VmRSS: now, VmHWM: peak since the last reset) in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def decode_only(path) -> None:
    import av

    with av.open(str(path)) as c:
        c.streams.video[0].thread_type = "AUTO"
        for packet in c.demux(c.streams.video[0], c.streams.audio[0]):
            for _ in packet.decode():
                pass


def decode_rgb(path) -> None:
    for _ in reader.read_frames(path, chunk_frames=16):
        pass
    reader.read_audio(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="8 s clip, 1 repeat: a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.repeats = 8.0, 1
    with tempfile.TemporaryDirectory(prefix="bench_qc_") as tmp:
        path = Path(tmp) / "talking_1080x1920.mp4"
        t0 = time.perf_counter()
        talking_clip(path, seconds=args.seconds, fps=args.fps, width=1080, height=1920, chunk=8, grain=3)
        print(f"clip: 1080x1920, {args.fps:g} fps, {args.seconds:g} s, {os.path.getsize(path) / 1e6:.1f} MB "
              f"(made in {time.perf_counter() - t0:.0f} s)")
        limits = QCLimits()
        rows = {"QC (all checks)": lambda: qc_file(path, limits), "decode only": lambda: decode_only(path),
                "decode to RGB (Load node reader)": lambda: decode_rgb(path)}
        walls = {k: [] for k in rows}
        cpus = {k: [] for k in rows}
        growth = []
        verdict = None
        for _ in range(args.repeats):
            for name, fn in rows.items():
                base = status_mb("VmRSS")
                reset_peak()
                c0, w0 = cpu(), time.perf_counter()
                out = fn()
                walls[name].append(time.perf_counter() - w0)
                cpus[name].append(cpu() - c0)
                if name.startswith("QC"):
                    growth.append(status_mb("VmHWM") - base)
                    verdict = out
        print(f"{'path':34} {'x real time: best wall / median wall / median CPU':>50} {'CPU s':>7}")
        for name in rows:
            best, med, c = min(walls[name]), statistics.median(walls[name]), statistics.median(cpus[name])
            print(f"{name:34} {args.seconds / best:24.1f} / {args.seconds / med:6.1f} / {args.seconds / c:6.1f}"
                  f" {c:10.2f}")
        qc, dec = statistics.median(walls["QC (all checks)"]), statistics.median(walls["decode only"])
        print(f"QC / decode-only wall time: {qc / dec:.2f}x; QC peak RSS growth {max(growth):.0f} MB; "
              f"verdict {verdict.verdict} {verdict.failed}")
        print(f"QC time split (last run): {verdict.report['seconds']}")


if __name__ == "__main__":
    main()
