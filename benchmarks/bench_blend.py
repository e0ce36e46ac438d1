"""Paste-back blends side by side: cost per frame of feather, Reinhard-Lab colour transfer and Poisson
(cv2.seamlessClone) on the MuseTalk mouth window of a 1080x1920 frame, CPU, one run (printed, never pass/fail).

    python benchmarks/bench_blend.py              # 40 frames per mode
    python benchmarks/bench_blend.py --quick      # 5 frames per mode
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.common.blend_modes import MODES  # noqa: E402
from engines.musetalk.blend import MouthPaster, mouth_mask  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--box", type=int, default=420, help="face box side in frame pixels (a 1080p anchor)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    frames = 5 if args.quick else args.frames
    torch.set_num_threads(max(1, torch.get_num_threads()))
    g = torch.Generator().manual_seed(0)
    frame = torch.rand(1920, 1080, 3, generator=g)
    faces = [torch.rand(3, 256, 256, generator=g) for _ in range(4)]
    box = (330, 500, 330 + args.box, 500 + args.box)
    times = {}
    for _ in range(2):  # interleaved rounds: load changes hit every mode alike
        for mode in MODES:
            paster = MouthPaster(mouth_mask(), mode)
            paster.paste(frame.clone(), faces[0], box)  # plan built outside the timing
            work = frame.clone()
            t0 = time.perf_counter()
            for k in range(frames):
                paster.paste(work, faces[k % 4], box)
            times.setdefault(mode, []).append((time.perf_counter() - t0) / frames)
    base = statistics.median(times["feather"])
    print(f"\npaste-back on a {args.box}x{args.box} face box of a 1080x1920 frame, {frames} frames per mode per round")
    print(f"   {'mode':<9} {'ms/frame':>9} {'x feather':>10}")
    for mode in MODES:
        t = statistics.median(times[mode])
        print(f"   {mode:<9} {t * 1000:>9.2f} {t / base:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
