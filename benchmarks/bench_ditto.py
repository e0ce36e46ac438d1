"""Ditto benchmark with the tiny random networks on the CPU: ratios measured side by side in one run (printed, never
pass/fail). The networks are tiny, so these ratios measure the pack's own machinery (sampling loop, cadence plan,
packet I/O, putback), not the full-size networks' cost; benchmarks/gpu_ditto.py measures those on a GPU.

1. motion: DDIM steps 4 and 10 against 50 (upstream's default), same clip, same seed;
2. render: cadence stride 2 and 3 against 1 (silence bypass off, so every frame needs a face);
3. avatar: loading the packet (memory-mapped) against registering the frames again;
4. putback: one batched grid_sample against upstream's per-frame OpenCV (two warpAffine + blend), 1080x1920 frames
   with 512 crops.

    python benchmarks/bench_ditto.py            # a few minutes on 2 cores
    python benchmarks/bench_ditto.py --quick    # a smoke run

Ratios are speed ratios (baseline time / our time): above 1 means faster than the baseline.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engines.common.audio import to_mono  # noqa: E402
from engines.common.cache import ContentCache  # noqa: E402
from engines.ditto import avatar as ditto_avatar  # noqa: E402
from engines.ditto import keypoints  # noqa: E402
from engines.ditto import motion as ditto_motion  # noqa: E402
from engines.ditto import putback  # noqa: E402
from engines.ditto import render as ditto_render  # noqa: E402
from engines.ditto.pipeline import DittoPipeline  # noqa: E402
from tests.fixtures.tiny_ditto import build_tiny_ditto, portrait, speech  # noqa: E402


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) if len(times) < 3 else statistics.median(times)


def opencv_putback(frames, crops, m_c2o):
    import cv2

    mask = putback.feather_mask(512)
    out = []
    for f, c, m in zip(frames, crops, m_c2o):
        h, w = f.shape[:2]
        mw = cv2.warpAffine(mask, m[:2], (w, h), flags=cv2.INTER_LINEAR).clip(0, 1)[:, :, None]
        cw = cv2.warpAffine(c, m[:2], (w, h), flags=cv2.INTER_LINEAR)
        out.append(np.clip(mw * cw + (1 - mw) * f, 0, 255).astype(np.uint8))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seconds", type=float, default=6.0, help="speech length (25 frames per second)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: the tiny networks are too small to gain from more, and on a "
                         "shared machine OpenMP threads waiting on each other dominate the timings)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seconds, repeats = (2.0, 1) if args.quick else (args.seconds, args.repeats)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        pipe = DittoPipeline(build_tiny_ditto(Path(tmp) / "tiny"))
        cache = ContentCache(Path(tmp) / "cache")
        loop = portrait(height=320, width=256, n_frames=8)
        avatar, _ = pipe.prepare_avatar(loop, ditto_avatar.AvatarSettings(), cache)
        wav, _ = to_mono(speech(seconds), 16000)
        feats = pipe.audio_features(wav, None)
        n = len(feats)
        print(f"tiny Ditto on {torch.get_num_threads()} CPU threads; {n} frames ({seconds:g} s), loop of "
              f"{avatar.num_frames} frames {avatar.size[0]}x{avatar.size[1]}")

        # 1. motion steps
        drive = keypoints.DriveSettings()
        t = {s: best(lambda s=s: pipe.motion(avatar, feats, ditto_motion.MotionSettings(steps=s, overlap=5), drive),
                     repeats)
             for s in (50, 10, 4)}
        print(f"motion  50 steps {t[50]:.3f} s | 10 steps {t[10]:.3f} s ({t[50] / t[10]:.2f}x) | "
              f"4 steps {t[4]:.3f} s ({t[50] / t[4]:.2f}x)")

        # 2. cadence stride
        motion = pipe.motion(avatar, feats, ditto_motion.MotionSettings(steps=4, overlap=5), drive)

        def render(stride):
            for _ in pipe.render(avatar, motion, ditto_render.RenderSettings(batch_size=8, stride=stride,
                                                                             silence_bypass=False)):
                pass
        r = {s: best(lambda s=s: render(s), repeats) for s in (1, 2, 3)}
        print(f"render  stride 1 {r[1]:.3f} s ({n / r[1]:.1f} fps) | stride 2 {r[2]:.3f} s ({r[1] / r[2]:.2f}x) | "
              f"stride 3 {r[3]:.3f} s ({r[1] / r[3]:.2f}x)")

        # 3. packet load vs registration
        reg = best(lambda: pipe.prepare_avatar(loop, ditto_avatar.AvatarSettings(), None), repeats)
        load = best(lambda: pipe.prepare_avatar(loop, ditto_avatar.AvatarSettings(), cache), max(repeats, 3))
        print(f"avatar  register {reg:.3f} s | packet load {load * 1000:.1f} ms ({reg / load:.1f}x)")

        # 4. putback at 1080x1920
        b = 8
        rng = np.random.default_rng(0)
        frames = rng.integers(0, 255, (b, 1920, 1080, 3), dtype=np.uint8)
        crops = rng.integers(0, 255, (b, 512, 512, 3), dtype=np.uint8)
        m_c2o = np.stack([np.array([[1.1, 0.05, 300 + i], [-0.05, 1.1, 400], [0, 0, 1]]) for i in range(b)])
        m_o2c = np.linalg.inv(m_c2o)
        ft = torch.from_numpy(frames)
        ct = torch.from_numpy(crops).permute(0, 3, 1, 2).float() / 255
        out = torch.empty((b, 1920, 1080, 3), dtype=torch.float32)
        ours = best(lambda: putback.putback(ft, ct, m_o2c, m_c2o, out=out), max(repeats, 3))
        cv = best(lambda: opencv_putback(frames, crops, m_c2o), max(repeats, 3))
        print(f"putback batch of {b} at 1080x1920: per-frame OpenCV {cv * 1000 / b:.1f} ms/frame | batched "
              f"grid_sample {ours * 1000 / b:.1f} ms/frame ({cv / ours:.2f}x)")


if __name__ == "__main__":
    main()
