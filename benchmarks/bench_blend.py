"""Paste-back blends side by side: cost per frame of feather, Reinhard-Lab colour transfer and Poisson
(cv2.seamlessClone) in the three compositors, on 1080x1920 frames, CPU, one thread, one run (printed, never
pass/fail):

1. MuseTalk: the mouth window of a 420 px face box (`MouthPaster`);
2. Ditto: the putback of a 512 crop covering a ~560 px face (reinhard recolours the mouth box only, poisson
   clones the whole face);
3. wardrobe: Subject Uncrop of a torso-sized garment box (640x864) (reinhard fits on the ring of context around the garment).

    python benchmarks/bench_blend.py              # 40 MuseTalk frames, 8 Ditto and wardrobe frames per mode
    python benchmarks/bench_blend.py --quick      # 5 / 2
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
from engines.ditto import putback  # noqa: E402
from engines.musetalk.blend import MouthPaster, mouth_mask  # noqa: E402
from engines.wardrobe import crop as wardrobe_crop  # noqa: E402


def report(title: str, times: dict) -> None:
    base = statistics.median(times["feather"])
    print(f"\n{title}")
    print(f"   {'mode':<9} {'ms/frame':>9} {'x feather':>10}")
    for mode in MODES:
        t = statistics.median(times[mode])
        print(f"   {mode:<9} {t * 1000:>9.2f} {t / base:>10.1f}")


def bench_ditto(frames: int) -> dict:
    g = torch.Generator().manual_seed(1)
    frame = (torch.rand(1, 1920, 1080, 3, generator=g) * 255).to(torch.uint8)
    crop = torch.rand(1, 3, 512, 512, generator=g)
    m_c2o = torch.tensor([[1.1, 0.02, 260.0], [-0.02, 1.1, 420.0], [0, 0, 1]], dtype=torch.float64).numpy()[None]
    m_o2c = torch.linalg.inv(torch.from_numpy(m_c2o[0])).numpy()[None]
    out = torch.empty(1, 1920, 1080, 3)
    times = {}
    for _ in range(2):
        for mode in MODES:
            putback.putback(frame, crop, m_o2c, m_c2o, out=out, blend=mode)
            t0 = time.perf_counter()
            for _ in range(frames):
                putback.putback(frame, crop, m_o2c, m_c2o, out=out, blend=mode)
            times.setdefault(mode, []).append((time.perf_counter() - t0) / frames)
    return times


def bench_wardrobe(frames: int) -> dict:
    g = torch.Generator().manual_seed(2)
    images = torch.rand(frames, 1920, 1080, 3, generator=g)
    masks = torch.zeros(frames, 1920, 1080)
    masks[:, 900:1700, 260:820] = 1.0                       # a torso-sized garment
    masks[:, 1100:1250, 400:520] = 0.0                      # a hand cut out of it
    crops, _, record = wardrobe_crop.crop(images, masks, padding=32, multiple=32, feather=16)
    gen = (crops * 0.9 + 0.05).clamp(0, 1)                  # an "inpainted" crop with a cast
    times = {}
    for _ in range(2):
        for mode in MODES:
            t0 = time.perf_counter()
            wardrobe_crop.uncrop(images, gen, record, blend=mode)
            times.setdefault(mode, []).append((time.perf_counter() - t0) / frames)
    print(f"\n(wardrobe box {record.box_size[1]}x{record.box_size[0]}; every mode includes the frame copies)")
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--box", type=int, default=420, help="face box side in frame pixels (a 1080p anchor)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    frames = 5 if args.quick else args.frames
    big = 2 if args.quick else 8
    # One thread for every mode (torch and OpenCV): on a shared machine, thread hand-offs on these small tensors
    # swamp the work being measured (a 2-thread run under load gave Reinhard 3.4x to 12.9x feather from run to run).
    import cv2

    cv2.setNumThreads(1)
    torch.set_num_threads(1)
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
    report(f"MuseTalk paste-back on a {args.box}x{args.box} face box of a 1080x1920 frame, {frames} frames per mode "
           "per round", times)
    report(f"Ditto putback of a 512 crop (~560 px face) into a 1080x1920 frame, {big} frames per mode per round",
           bench_ditto(big))
    report(f"wardrobe Subject Uncrop, 1080x1920 frames, {big} frames per mode per round", bench_wardrobe(big))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
