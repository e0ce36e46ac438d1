"""Wardrobe mask chain benchmark: the radius-independent shield against r passes of a 3x3 dilation, side by side,
and the whole decoupled chain's time and peak memory.

    $BA_PYTHON benchmarks/bench_wardrobe.py            # 175 frames of 1080x1920 (the posts' loop; ~16 GB RAM)
    $BA_PYTHON benchmarks/bench_wardrobe.py --quick    # 24 frames of 540x960
    options: --frames N --height H --width W --radius R --device cpu|cuda

Prints ratios measured in this run; nothing here passes or fails.
"""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.wardrobe import crop as C  # noqa: E402
from engines.wardrobe import morphology as M  # noqa: E402
from engines.wardrobe import repaste as R  # noqa: E402
from engines.wardrobe import tokengrid as TG  # noqa: E402


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def synthetic(frames: int, height: int, width: int, device: str, with_images: bool = True):
    """A garment panel and a hand with finger gaps sweeping across it, at any size (like tests/fixtures)."""
    g = torch.Generator().manual_seed(0)
    ys = torch.arange(height)[:, None]
    xs = torch.arange(width)[None, :]
    panel = (ys > height * 0.35) & (xs > width * 0.2) & (xs < width * 0.8)
    images = torch.empty(frames, height, width, 3, device=device) if with_images else None
    garment = torch.empty(frames, height, width, device=device)
    hands = torch.empty(frames, height, width, device=device)
    unit = max(1, width // 128)
    for f in range(frames):
        hx = int(width * (0.2 + 0.5 * f / max(1, frames - 1)))
        hy = int(height * 0.45)
        hand = torch.zeros(height, width, dtype=torch.bool)
        x = hx
        for fw, gap in ((6, 3), (5, 4), (6, 5), (5, 6)):
            hand[hy:hy + 22 * unit, x:x + fw * unit] = True
            x += (fw + gap) * unit
        hand[hy + 22 * unit:hy + 36 * unit, hx:x] = True
        if with_images:
            frame = torch.rand(height, width, 3, generator=g) * 0.1 + 0.4
            frame[panel] = torch.tensor([0.45, 0.08, 0.16])
            frame[hand] = torch.tensor([0.92, 0.72, 0.60])
            images[f] = frame.to(device)
        garment[f] = (panel & ~hand).float().to(device)
        hands[f] = hand.float().to(device)
    return images, garment, hands


CPU_TIMES: dict = {}  # last call's process CPU time by function name: steadier than wall time on a shared machine


def timed(fn, device: str, name: str = ""):
    if device == "cuda":
        torch.cuda.synchronize()
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    CPU_TIMES[name] = time.process_time() - c
    return out, time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="24 frames of 540x960")
    ap.add_argument("--frames", type=int)
    ap.add_argument("--height", type=int)
    ap.add_argument("--width", type=int)
    ap.add_argument("--radius", type=int, default=8)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--shield-only", action="store_true", help="only the shield comparison (masks only: less RAM)")
    ap.add_argument("--repeat", type=int, default=0, help="timing repeats, best kept (default 3 quick, 1 full)")
    args = ap.parse_args(argv)
    frames = args.frames or (24 if args.quick else 175)
    height = args.height or (960 if args.quick else 1920)
    width = args.width or (540 if args.quick else 1080)
    dev = args.device
    args.repeat = args.repeat or (3 if args.quick else 1)
    torch.set_grad_enabled(False)
    print(f"wardrobe benchmark: {frames} frames of {width}x{height}, shield r={args.radius}, device {dev}, "
          f"{torch.get_num_threads()} threads")
    images, garment, hands = synthetic(frames, height, width, dev, with_images=not args.shield_only)
    base_rss = peak_rss_gb()

    # 1. Shield: running counts (cost independent of r) against r passes of a 3x3 max filter, same masks, same result.
    # The two are timed alternately, best of --repeat, so a busy machine slows both alike.
    ref = torch.empty_like(garment)

    def repeated():
        for a, b in ((a, min(frames, a + M.CHUNK)) for a in range(0, frames, M.CHUNK)):
            d = M.dilate_square_repeated((garment[a:b] >= 0.45).float(), args.radius)
            e = 1.0 - M.dilate_square_repeated(1.0 - d, 2)  # erosion by 2 as two more 3x3 passes
            ref[a:b] = (e >= 0.5).float()
        return ref

    t_fast = t_slow = c_fast = c_slow = float("inf")
    for _ in range(args.repeat):
        shield, t = timed(lambda: M.shield(garment, args.radius, 2, 0.45), dev, "fast")
        t_fast, c_fast = min(t_fast, t), min(c_fast, CPU_TIMES["fast"])
        _, t = timed(repeated, dev, "slow")
        t_slow, c_slow = min(t_slow, t), min(c_slow, CPU_TIMES["slow"])
    same = torch.equal(shield, ref)
    print(f"shield r={args.radius}: running counts {t_fast:.2f} s, {args.radius}x repeated 3x3 {t_slow:.2f} s "
          f"-> {t_slow / t_fast:.1f}x faster (identical output: {same}); CPU time {c_fast:.2f} s vs {c_slow:.2f} s "
          f"-> {c_slow / c_fast:.1f}x")
    r2 = args.radius * 4
    c_fast4 = float("inf")
    for _ in range(args.repeat):
        timed(lambda: M.shield(garment, r2, 2, 0.45), dev, "fast4")
        c_fast4 = min(c_fast4, CPU_TIMES["fast4"])
    print(f"shield r={r2}: running counts CPU time {c_fast4:.2f} s ({c_fast4 / c_fast:.2f}x the r={args.radius} CPU time: "
          "cost does not grow with the radius)")
    del ref, shield
    gc.collect()
    if args.shield_only:
        return 0

    # 2. The whole decoupled chain (the stand-in for the sampler is the identity: only the mask work is timed).
    stages = {}
    t0 = time.perf_counter()
    grown, stages["grow hands 6 (tapered)"] = timed(lambda: M.grow(hands, 6, tapered=True), dev)
    sub, stages["garment - hands"] = timed(lambda: M.combine(garment, grown, "subtract"), dev)
    del grown
    pixel, stages["refine (feather 4)"] = timed(lambda: M.refine(sub, 0, 4.0), dev)
    del sub
    (crops, crop_mask, record), stages["subject crop"] = timed(lambda: C.crop(images, pixel, 32, 32), dev)
    del pixel
    sampler, stages["shield"] = timed(lambda: M.shield(crop_mask, args.radius, 2, 0.45), dev)
    grid = TG.PRESETS["minimax-h3"]
    T = grid.latent_frames_for(frames)
    h, w = crops.shape[1] // grid.spatial_stride, crops.shape[2] // grid.spatial_stride
    try:
        _, stages["token grid (H3)"] = timed(lambda: TG.snap_to_grid(sampler, grid, T, h, w), dev)
    except ValueError as exc:  # a frame count off the H3 grid: fall back to Wan's
        grid = TG.PRESETS["wan2.1"]
        T = grid.latent_frames_for(frames)
        h, w = crops.shape[1] // grid.spatial_stride, crops.shape[2] // grid.spatial_stride
        _, stages["token grid (Wan)"] = timed(lambda: TG.snap_to_grid(sampler, grid, T, h, w), dev)
        print(f"  ({exc})")
    out, stages["uncrop"] = timed(lambda: C.uncrop(images, crops, record), dev)
    out2, stages["re-paste hands"] = timed(lambda: R.repaste(out, images, hands, 4.0), dev)
    total = time.perf_counter() - t0
    for name, t in stages.items():
        print(f"  {name:<26} {t:7.2f} s")
    clip_gb = images.numel() * 4 / 1024 ** 3
    print(f"whole chain: {total:.2f} s ({frames / total:.1f} frames/s); crop {crops.shape[2]}x{crops.shape[1]}; "
          f"peak RSS {peak_rss_gb():.2f} GB (after inputs: {base_rss:.2f} GB; one clip = {clip_gb:.2f} GB)")
    if dev == "cuda":
        print(f"peak CUDA memory {torch.cuda.max_memory_allocated() / 1024 ** 3:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
