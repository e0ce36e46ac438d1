"""MuseTalk on a GPU at full size with random weights: frames per second and time to first frame (prepared for a
machine with an accelerator; prints numbers, never pass/fail).

Full-size networks (musetalk.json's UNet, sd-vae-ft-mse's VAE, whisper-tiny's encoder; random weights: speed does
not depend on the values) in fp16, run through the pack's real pipeline (`engines.musetalk.lipsync`) on a synthetic
1080x1920 avatar loop held on the GPU, frames streamed to a sink that drops them. Measured:
- components: UNet step, VAE decode and paste-back alone, frames per second at batch 8, 16 and 32;
- end to end: audio -> UNet + SLERP + VAE decode + paste-back, batch 8/16/32 at stride 1, and stride 2/3 at batch 16;
- time to first frame: from the call to the first finished full-size frame.

Needs torch with CUDA plus diffusers (and transformers for the Whisper encoder; without it, random audio features
are used and the Whisper time is left out). The benchmark machine has no diffusers: carry its wheel, e.g.
``pip download --no-deps diffusers==0.42.1 -d wheels/`` here and ``pip install --no-deps wheels/*.whl`` there.

    python benchmarks/gpu_musetalk.py                          # CUDA, fp16, 10 s of audio (250 frames)
    python benchmarks/gpu_musetalk.py --device cpu --tiny --seconds 0.4 --batches 2 --width 320 --height 480
                                                               # smoke run of the script itself on a CPU
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.accel_nets import musetalk_modules  # noqa: E402
from engines.musetalk.avatar import Avatar  # noqa: E402
from engines.musetalk.blend import MouthPaster, mouth_mask  # noqa: E402
from engines.musetalk.lipsync import LipSyncSettings, lipsync_chunks  # noqa: E402
from engines.musetalk.loader import MuseTalkNets  # noqa: E402

class _RandomFeatures(torch.nn.Module):
    """Stands in for the Whisper encoder when transformers is missing: 5 hidden states of [b, 1500, 384]."""

    def forward(self, mel, output_hidden_states=True):
        h = torch.randn(mel.shape[0], 1500, 384, device=mel.device, dtype=mel.dtype)

        class Out:
            hidden_states = (h,) * 5
        return Out()


def networks(device, dtype, tiny: bool) -> MuseTalkNets:
    unet, vae = (m.to(device, dtype) for m in musetalk_modules(tiny))
    try:
        from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperModel

        cfg = WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                            decoder_layers=1, num_mel_bins=80, max_source_positions=1500)
        whisper = WhisperModel(cfg).get_encoder().to(device, dtype).eval()
        extractor = WhisperFeatureExtractor()
    except ImportError:
        whisper, extractor = _RandomFeatures(), None
    nets = MuseTalkNets(unet, vae, whisper, extractor, "v1.5", dtype, "random")
    if extractor is None:                       # feed silence-shaped mel frames straight to the stand-in
        nets.feature_extractor = lambda chunk, **_: type("F", (), {"input_features": torch.zeros(len(chunk), 80, 3000)})
    return nets.requires_grad_(False)


def synthetic_avatar(device, loop: int, width: int, height: int) -> Avatar:
    frames = torch.rand(loop, height, width, 3, device=device)
    side = int(0.36 * width)
    x1, y1 = (width - side) // 2, int(0.3 * height)
    boxes = torch.tensor([[x1 + k % 5, y1 + k % 3, x1 + side + k % 5, y1 + int(side * 1.25) + k % 3]
                          for k in range(loop)], dtype=torch.long)
    latents = torch.randn(loop, 8, 32, 32)
    return Avatar(frames, boxes, latents, mouth_mask().to(device), 25.0, "synthetic")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, repeats=3) -> float:
    fn()
    sync(device)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t)
    return best


@torch.no_grad()
def components(nets, avatar, device, dtype, batch: int) -> str:
    lat = torch.randn(batch, 8, 32, 32, device=device, dtype=dtype)
    cond = torch.randn(batch, 50, 384, device=device, dtype=dtype)
    t0 = torch.zeros(1, dtype=torch.long, device=device)
    t_unet = timed(lambda: nets.unet(lat, t0, encoder_hidden_states=cond).sample, device)
    z = torch.randn(batch, 4, 32, 32, device=device, dtype=dtype)
    t_vae = timed(lambda: nets.vae.decode(z / nets.scaling_factor).sample, device)
    paster = MouthPaster(avatar.mask)
    faces = torch.rand(batch, 3, 256, 256, device=device)
    work = avatar.frames[:1].clone()

    def paste():
        for j in range(batch):
            paster.paste(work[0], faces[j], avatar.boxes[j % len(avatar)].tolist())
    t_paste = timed(paste, device)
    return (f"batch {batch:>2}: UNet {batch / t_unet:7.1f} fps | VAE decode {batch / t_vae:7.1f} fps | "
            f"paste-back {batch / t_paste:7.1f} fps")


def end_to_end(nets, avatar, audio, device, batch: int, stride: int) -> str:
    settings = LipSyncSettings(batch_size=batch, stride=stride)
    for _ in lipsync_chunks(nets, avatar, audio, settings, device=device):      # warm-up (allocator, kernels)
        pass
    sync(device)
    first, count = None, 0
    start = time.perf_counter()
    for chunk in lipsync_chunks(nets, avatar, audio, settings, device=device):
        if first is None:
            sync(device)
            first = time.perf_counter() - start
        count += chunk.shape[0]
    sync(device)
    total = time.perf_counter() - start
    return (f"batch {batch:>2} stride {stride}: {count} frames in {total:6.2f} s = {count / total:7.1f} fps, "
            f"time to first frame {first * 1000:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "fp32"])
    parser.add_argument("--seconds", type=float, default=10.0, help="audio length (25 output frames per second)")
    parser.add_argument("--loop", type=int, default=50, help="avatar loop frames")
    parser.add_argument("--width", type=int, default=1080)
    parser.add_argument("--height", type=int, default=1920)
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--tiny", action="store_true", help="tiny networks (a smoke run of this script)")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        print(f"{torch.cuda.get_device_name(device)}, torch {torch.version.cuda and torch.__version__}, {args.dtype}")
    t = time.perf_counter()
    nets = networks(device, dtype, args.tiny)
    n_params = sum(p.numel() for p in nets.parameters()) / 1e6
    print(f"networks: {n_params:.1f} M parameters, built in {time.perf_counter() - t:.1f} s"
          f"{' (tiny)' if args.tiny else ''}; whisper: {type(nets.whisper).__name__}")
    avatar = synthetic_avatar(device, args.loop, args.width, args.height)
    g = torch.Generator().manual_seed(0)
    audio = {"waveform": 0.1 * torch.randn(1, 1, int(args.seconds * 16000), generator=g), "sample_rate": 16000}
    print(f"avatar: {args.loop} frames {args.width}x{args.height} on {device}; audio {args.seconds:g} s")
    with torch.no_grad():
        for b in args.batches:
            print("  components", components(nets, avatar, device, dtype, b))
    mid = sorted(args.batches)[len(args.batches) // 2]
    for b in args.batches:
        print("  end to end", end_to_end(nets, avatar, audio, device, b, 1))
    for s in (2, 3):
        print("  end to end", end_to_end(nets, avatar, audio, device, mid, s))
    if device.type == "cuda":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
