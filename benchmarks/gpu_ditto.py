"""Ditto on a GPU at full size with random weights: frames per second and time to first frame (prepared for a
machine with an accelerator; prints numbers, never pass/fail).

Full-size networks (upstream's sizes, random weights: speed does not depend on the values), fp16 autocast for the
renderer, batch 8. The avatar is a synthetic 1080x1920 loop registered through the real extractors on crops placed
by a fixed affine (no face models are needed for timing). Measured:
- motion: LMDM over the clip at 10 and 50 DDIM steps (fp32, as upstream);
- render: stitch + warp + decode + putback, batch 8, at cadence stride 1 and 2, frames per second after warm-up;
- time to first frame: from the start of motion generation to the first finished full-size frame (10 steps).

    python benchmarks/gpu_ditto.py                       # CUDA, 250 frames (10 s)
    python benchmarks/gpu_ditto.py --device cpu --frames 4 --steps 2 --batch 2   # smoke run on a CPU
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engines.ditto import avatar as av  # noqa: E402
from engines.ditto import keypoints as kps  # noqa: E402
from engines.ditto import motion as mo  # noqa: E402
from engines.ditto import nets  # noqa: E402
from engines.ditto import render as rd  # noqa: E402
from engines.ditto.loader import DittoNetworks  # noqa: E402


def full_size_networks(device) -> DittoNetworks:
    torch.manual_seed(0)
    modules = {
        "appearance_extractor_cfg": nets.AppearanceFeatureExtractor(), "motion_extractor_cfg": nets.MotionExtractor(),
        "warp_network_cfg": nets.WarpingNetwork(), "decoder_cfg": nets.SPADEDecoder(),
        "stitch_network_cfg": nets.StitchingNetwork(), "audio2motion_cfg": nets.MotionDecoder(),
    }
    with torch.no_grad():
        for m in modules.values():
            for name, t in m.state_dict().items():
                if t.dtype.is_floating_point and "running_var" in name:
                    t.uniform_(0.5, 1.5)
            m.eval().requires_grad_(False)
    modules["decoder_cfg"].fold_spectral_norm()
    return DittoNetworks(modules).to(device)


def synthetic_avatar(networks, device, n_frames: int, width: int, height: int) -> av.Avatar:
    """A loop registered through the real extractors; the crop affine is fixed instead of coming from landmarks."""
    frames = torch.randint(0, 255, (n_frames, height, width, 3), dtype=torch.uint8)
    s = 512 / (0.45 * width)
    m_o2c = np.array([[s, 0, 256 - s * width / 2], [0, s, 256 - s * height * 0.35], [0, 0, 1]])
    crops = torch.rand(n_frames, 3, 256, 256, device=device)
    with torch.inference_mode():
        outs = networks.motion_extractor(crops)
        f_s = networks.appearance(crops).half().cpu()
    info = {k: v.float().cpu().numpy() for k, v in zip(av.MOTION_KEYS, outs)}
    info["eye_open"] = np.full((n_frames, 2), 0.3, np.float32)
    info["eye_ball"] = np.zeros((n_frames, 6), np.float32)
    return av.Avatar(key="synthetic", frames=frames, f_s=f_s, info=info, m_c2o=np.stack([np.linalg.inv(m_o2c)] * n_frames),
                     m_o2c=np.stack([m_o2c] * n_frames), has_face=np.ones(n_frames, bool))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--frames", type=int, default=250)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10, help="DDIM steps for the time-to-first-frame run")
    ap.add_argument("--precision", choices=("fp16", "fp32"), default="fp16")
    ap.add_argument("--width", type=int, default=1080)
    ap.add_argument("--height", type=int, default=1920)
    args = ap.parse_args()
    device = torch.device(args.device)
    dtype = torch.float16 if args.precision == "fp16" and device.type == "cuda" else torch.float32
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        print(f"GPU: {torch.cuda.get_device_name(device)}; torch {torch.__version__}")
    networks = full_size_networks(device)
    avatar = synthetic_avatar(networks, device, 8, args.width, args.height)
    feats = np.random.default_rng(0).standard_normal((args.frames, 1024)).astype(np.float32)
    drive = kps.DriveSettings()

    def motion(steps):
        seq = mo.generate(networks.lmdm, feats, avatar.info, mo.MotionSettings(steps=steps), device=device)
        src, kp = kps.driven_keypoints(seq, avatar.info, drive)
        return src, kp

    for steps in sorted({args.steps, 50} if args.frames >= 80 else {args.steps}):
        sync(device)
        t = time.perf_counter()
        motion(steps)
        sync(device)
        print(f"motion: {steps} steps over {args.frames} frames: {time.perf_counter() - t:.2f} s")

    src, kp = motion(args.steps)
    settings = rd.RenderSettings(batch_size=args.batch, stride=1, silence_bypass=False)
    for _ in rd.render(networks, avatar, src[: args.batch], kp[: args.batch], None, settings, device, dtype):
        pass                                                    # warm-up (cuDNN autotuning, allocator)
    for stride in (1, 2):
        settings = rd.RenderSettings(batch_size=args.batch, stride=stride, silence_bypass=False)
        sync(device)
        t = time.perf_counter()
        for _ in rd.render(networks, avatar, src, kp, None, settings, device, dtype):
            pass
        sync(device)
        dt = time.perf_counter() - t
        print(f"render: stride {stride}, batch {args.batch}, {str(dtype).replace('torch.', '')}, "
              f"{args.width}x{args.height}: {args.frames / dt:.2f} fps ({dt:.2f} s)")

    sync(device)
    t = time.perf_counter()
    src, kp = motion(args.steps)
    settings = rd.RenderSettings(batch_size=args.batch, stride=1, silence_bypass=False)
    first = next(rd.render(networks, avatar, src, kp, None, settings, device, dtype))
    sync(device)
    print(f"time to first frame ({args.steps} steps, batch {args.batch}): {time.perf_counter() - t:.2f} s "
          f"(first chunk {tuple(first.shape)})")
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated(device) / 2 ** 30:.2f} GiB")


if __name__ == "__main__":
    main()
