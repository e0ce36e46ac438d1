"""The host path of MuseTalk's and Ditto's renders (the byte path), side by side with a minimal reference, in one run
(printed, never pass/fail).

Each render runs as shipped for a stream (`lipsync_chunks` / `render` with recycled buffers, blend feather) with its
networks replaced by instant stand-ins returning tensors of the real shapes (MuseTalk: UNet [B, 4, 32, 32], VAE
decode [B, 3, 256, 256]; Ditto: stitch, warp, decoder [B, 3, 512, 512]), so what is timed is everything else: loop
frame copies, the paste of each window, the chunk buffers, and the sink, which takes each frame as the encoder does
(`engines.export.frames.HostRGB`, the writer's own converter: uint8 frames pass through, float ones are converted).

The reference, written here: per frame, the uint8 loop frame copied into a reused buffer and a window blended into
it in place (bytes -> float -> ``bg + a * (fg - bg)`` -> bytes, with `fg` and `a` made beforehand), handed to the
same sink. MuseTalk's window is the 420 px face box at 1080x1920 (scaled at 720x1280), Ditto's the box its 512 crop
covers in the frame (the face, ~560 px). The issue's goal: MuseTalk within 1.5x the reference, Ditto within 2x.

Memory: the peak resident growth of each render over its start (the kernel's VmHWM, reset before the run), at the
clip length and at three times it: flat in the clip's length when the two are equal.

    python benchmarks/bench_host_path.py               # 96 frames, 5 repeats, both sizes
    python benchmarks/bench_host_path.py --quick       # 16 frames, 2 repeats
    bash scripts/bench.sh host_path

`measure_host_path(device, sizes, frames)` is the same measurement for another script (the GPU device check): on a
CUDA device the stand-ins' outputs live there, the windows are computed there and only bytes cross.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.proc_memory import reset_peak, status_mib  # noqa: E402
from engines.common.frames import ByteFrames  # noqa: E402
from engines.ditto import render as ditto_engine  # noqa: E402
from engines.ditto.putback import footprint  # noqa: E402
from engines.export.frames import HostRGB  # noqa: E402
from engines.musetalk.avatar import Avatar as MuseTalkAvatar  # noqa: E402
from engines.musetalk.blend import mouth_mask  # noqa: E402
from engines.musetalk.lipsync import LipSyncSettings, lipsync_chunks  # noqa: E402

SIZES = ((1280, 720), (1920, 1080))     # (height, width): the presenter's portrait frames
LOOP = 8                                 # loop frames (uint8, as the cached loop is)
BATCH = 8                                # frames per network call / chunk
FPS = 25.0
GOALS = {"musetalk": 1.5, "ditto": 2.0}


# -- the sink: what the encoder takes ----------------------------------------------------------------------------------
def drain(chunks, converter: HostRGB) -> int:
    """Hand every frame to the writer's converter and take its output arrays (the encoder's input); frame count."""
    n = 0
    for chunk in chunks:
        for frame in converter.frames(chunk):
            n += frame.shape[0] > 0
    return n


# -- MuseTalk with instant networks ------------------------------------------------------------------------------------
class _Whisper:
    """Stand-in encoder: five zero hidden states ``[b, 1500, 384]`` (Whisper-tiny's layers and width)."""

    def __call__(self, mel, output_hidden_states=True):
        z = torch.zeros(mel.shape[0], 1500, 384, dtype=mel.dtype, device=mel.device)
        return SimpleNamespace(hidden_states=(z,) * 5)


def _features(chunk, sampling_rate, return_tensors):
    return SimpleNamespace(input_features=torch.zeros(len(chunk), 80, 3000))


def musetalk_case(height: int, width: int, device: torch.device):
    """Stand-in networks and an avatar of `LOOP` uint8 frames with a 420 px (at 1080 wide) crop box."""
    g = torch.Generator().manual_seed(0)
    loop = torch.randint(0, 256, (LOOP, height, width, 3), dtype=torch.uint8, generator=g)
    side = round(420 * width / 1080)
    x0, y0 = (width - side) // 2, height // 5
    boxes = torch.tensor([[x0 + (i % 3), y0 + (i % 2), x0 + side + (i % 3), y0 + side + (i % 2)] for i in range(LOOP)],
                         dtype=torch.int64)
    avatar = MuseTalkAvatar(ByteFrames(loop), boxes, torch.zeros(LOOP, 8, 32, 32), mouth_mask(), FPS, "bench")
    faces = (torch.rand(BATCH, 3, 256, 256, generator=g) * 2 - 1).to(device)
    nets = SimpleNamespace(
        whisper=_Whisper(), feature_extractor=_features, compute_dtype=torch.float32,
        vae=SimpleNamespace(device=device, dtype=torch.float32),
        runners={"unet": lambda lat, cond: lat[:, :4], "vae_decode": lambda z: faces[: z.shape[0]]})
    return nets, avatar, (side, side)


def musetalk_render(case, frames: int, device: torch.device, sink: HostRGB) -> int:
    nets, avatar, _ = case
    audio = {"waveform": torch.zeros(1, 1, int(frames / FPS * 16000) + 1), "sample_rate": 16000}
    settings = LipSyncSettings(batch_size=BATCH, pipelined=False)
    return drain(lipsync_chunks(nets, avatar, audio, settings, device=device, reuse_buffers=True), sink)


# -- Ditto with instant networks ---------------------------------------------------------------------------------------
def ditto_case(height: int, width: int, device: torch.device):
    """Stand-in networks and a packet of `LOOP` uint8 frames whose 512 crop covers a ~560 px face (at 1080 wide)."""
    g = torch.Generator().manual_seed(1)
    loop = torch.randint(0, 256, (LOOP, height, width, 3), dtype=torch.uint8, generator=g)
    scale = 1.1 * width / 1080
    m_c2o = np.stack([np.array([[scale, 0.02, (width - 512 * scale) / 2 + i], [-0.02, scale, height / 5 + i],
                                [0, 0, 1]]) for i in range(LOOP)])
    info = {"kp": np.zeros((LOOP, 63), np.float32), "pitch": np.zeros((LOOP, 66), np.float32),
            "yaw": np.zeros((LOOP, 66), np.float32), "roll": np.zeros((LOOP, 66), np.float32),
            "t": np.zeros((LOOP, 3), np.float32), "exp": np.zeros((LOOP, 63), np.float32),
            "scale": np.ones((LOOP, 1), np.float32)}
    avatar = SimpleNamespace(frames=loop, f_s=torch.zeros(LOOP, 32, 16, 64, 64, dtype=torch.float16), info=info,
                             m_c2o=m_c2o, m_o2c=np.linalg.inv(m_c2o))
    crops = torch.rand(BATCH, 3, 512, 512, generator=g).to(device)
    feat = torch.zeros(BATCH, 256, 64, 64, device=device)
    nets = SimpleNamespace(runners={"stitch": lambda x_s, x_d: x_d, "warp": lambda f_s, x_s, x_d: feat[: len(f_s)],
                                    "decoder": lambda f: crops[: len(f)]})
    x0, y0, x1, y1 = footprint(m_c2o[0], width, height)
    return nets, avatar, (y1 - y0, x1 - x0)


def ditto_inputs(case, frames: int, device: torch.device, sink=None) -> int:
    """Ditto's network-input staging alone (`render.CropRenderer` with the stand-ins: each batch's f_s, 4 MB a frame,
    and the decoder's crops clamped), the part of its host path that is not the putback. The batches here are runs of
    consecutive loop frames (the loop played forward), whose f_s is a view of the avatar's table; a batch that
    crosses the loop's seam is gathered into a staging buffer instead."""
    nets, avatar, _ = case
    renderer = ditto_engine.CropRenderer(nets, avatar, device, torch.float32)
    src = np.arange(frames) % LOOP
    kp = np.zeros((frames, 21, 3), np.float32)
    for s in range(0, frames, BATCH):
        renderer(src[s:s + BATCH], kp[s:s + BATCH])
    return frames


def ditto_render(case, frames: int, device: torch.device, sink: HostRGB) -> int:
    nets, avatar, _ = case
    src = np.arange(frames) % LOOP
    kp = np.zeros((frames, 21, 3), np.float32)
    settings = ditto_engine.RenderSettings(batch_size=BATCH, pipelined=False)
    return drain(ditto_engine.render(nets, avatar, src, kp, None, settings, device, reuse_buffers=True), sink)


# -- the minimal reference ---------------------------------------------------------------------------------------------
def reference_render(loop: torch.Tensor, window: tuple, frames: int, device: torch.device, sink: HostRGB) -> int:
    """Per frame: the uint8 loop frame copied into a reused chunk buffer, a window blended into it in place."""
    wh, ww = window
    _, height, width, _ = loop.shape
    y0, x0 = height // 5, (width - ww) // 2
    g = torch.Generator().manual_seed(2)
    fg = torch.rand(wh, ww, 3, generator=g).to(device)
    alpha = torch.rand(wh, ww, 1, generator=g).to(device)
    buf = torch.empty((BATCH, height, width, 3), dtype=torch.uint8)

    def chunks():
        for start in range(0, frames, BATCH):
            out = buf[: min(BATCH, frames - start)]
            for j in range(out.shape[0]):
                out[j].copy_(loop[(start + j) % loop.shape[0]])
                region = out[j, y0:y0 + wh, x0:x0 + ww]
                bg = region.to(device).float().div_(255.0)
                mixed = bg.add_(alpha * (fg - bg)).mul_(255.0).add_(0.5).clamp_(0, 255).to(torch.uint8)
                region.copy_(mixed)
            yield out

    return drain(chunks(), sink)


# -- measuring ---------------------------------------------------------------------------------------------------------
def _timed(fn, device: torch.device) -> tuple[float, float]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    w, c = time.perf_counter(), time.process_time()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - w, time.process_time() - c


FAMILIES = {"musetalk": (lambda h, w, d: musetalk_case(h, w, d), lambda *a: musetalk_render(*a)),
            "ditto": (lambda h, w, d: ditto_case(h, w, d), lambda *a: ditto_render(*a))}


def memory_child(family: str, height: int, width: int, frames: int, device: str) -> dict:
    """In a fresh process: one render of `frames` frames after a one-chunk warm-up; the resident growth over the
    start of that render (VmHWM after it, reset before it), and on CUDA the device's peak allocation."""
    device = torch.device(device)
    make, render = FAMILIES[family]
    case = make(height, width, device)
    sink = HostRGB(8)
    render(case, BATCH, device, sink)
    start = status_mib("VmRSS")
    if not reset_peak():
        return {"growth_mib": float("nan"), "gpu_peak_mib": None}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    render(case, frames, device, sink)
    sink.close()
    gpu = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {"growth_mib": status_mib("VmHWM") - start, "gpu_peak_mib": gpu}


def _memory(family: str, height: int, width: int, frames: int, device: torch.device) -> dict:
    cmd = [sys.executable, __file__, "--memory-child", family, str(height), str(width), str(frames),
           "--device", str(device), "--threads", str(torch.get_num_threads())]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_host_path(device="cpu", sizes=SIZES, frames: int = 96, repeats: int = 5) -> list[dict]:
    """Per family and size: ms per frame (CPU time of this process and wall time, median and range over `repeats`,
    each repeat timing ours and the reference back to back), the ratio of the medians to the reference's, and the
    peak resident growth of our render at `frames` and 3 x `frames` frames (MiB; plus the device's peak allocation
    on CUDA); each memory figure comes from a fresh process (`memory_child`). For Ditto, ``inputs_ms``: the
    network-input staging alone (`ditto_inputs`), timed in the same repeats. The ratio is of CPU time on the CPU and
    of wall time on a GPU."""
    with torch.inference_mode():
        return _measure(torch.device(device), sizes, frames, repeats)


def _measure(device: torch.device, sizes, frames: int, repeats: int) -> list[dict]:
    rows = []
    for height, width in sizes:
        for family, (make, render) in FAMILIES.items():
            case = make(height, width, device)
            loop = case[1].frames.data if family == "musetalk" else case[1].frames
            sink = HostRGB(8)
            try:
                ours = lambda n=frames: render(case, n, device, sink)                           # noqa: E731
                ref = lambda n=frames: reference_render(loop, case[2], n, device, sink)         # noqa: E731
                ours(BATCH), ref(BATCH)                                                         # warm-up
                t_ours, t_ref, t_inputs = [], [], []
                for _ in range(repeats):
                    t_ours.append(_timed(ours, device))
                    t_ref.append(_timed(ref, device))
                    if family == "ditto":
                        t_inputs.append(_timed(lambda: ditto_inputs(case, frames, device), device))
            finally:
                sink.close()
            memory = [_memory(family, height, width, n, device) for n in (frames, 3 * frames)]
            pick = 0 if device.type == "cuda" else 1
            ms = lambda ts: [t[pick] * 1000 / frames for t in ts]                               # noqa: E731
            wall = lambda ts: statistics.median(t[0] * 1000 / frames for t in ts)              # noqa: E731
            ours_ms, ref_ms = ms(t_ours), ms(t_ref)
            rows.append({"family": family, "size": f"{width}x{height}", "window": f"{case[2][1]}x{case[2][0]}",
                         "ms": statistics.median(ours_ms), "ms_range": (min(ours_ms), max(ours_ms)),
                         "ref_ms": statistics.median(ref_ms), "ref_range": (min(ref_ms), max(ref_ms)),
                         "wall_ms": wall(t_ours), "ref_wall_ms": wall(t_ref),
                         "ratio": statistics.median(ours_ms) / statistics.median(ref_ms), "goal": GOALS[family],
                         "inputs_ms": statistics.median(ms(t_inputs)) if t_inputs else None,
                         "growth_mib": memory[0]["growth_mib"], "growth_3x_mib": memory[1]["growth_mib"],
                         "gpu_peak_mib": memory[1]["gpu_peak_mib"],
                         "clock": "wall" if device.type == "cuda" else "cpu"})
    return rows


def print_table(rows: list[dict], frames: int, repeats: int, device) -> None:
    print(f"host path, {frames} frames per run ({3 * frames} for the second memory figure), {repeats} repeats, "
          f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} torch thread(s), "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}, {platform.processor() or platform.machine()}")
    head = (f"{'family':<9} {'frame':>9} {'window':>8} {'ours ms/f':>16} {'ref ms/f':>16} {'ratio':>6} {'goal':>5} "
            f"{'wall ours/ref':>14} {'peak MiB':>9} {'x3 clip':>8} {'net inputs':>10}")
    print(head)
    for r in rows:
        gpu = f"  gpu peak {r['gpu_peak_mib']:.0f} MiB" if r["gpu_peak_mib"] is not None else ""
        print(f"{r['family']:<9} {r['size']:>9} {r['window']:>8} "
              f"{r['ms']:>6.2f} ({r['ms_range'][0]:.2f}-{r['ms_range'][1]:.2f}) "
              f"{r['ref_ms']:>6.2f} ({r['ref_range'][0]:.2f}-{r['ref_range'][1]:.2f}) {r['ratio']:>6.2f} "
              f"{r['goal']:>5.1f} {r['wall_ms']:>6.2f}/{r['ref_wall_ms']:<6.2f} {r['growth_mib']:>9.0f} "
              f"{r['growth_3x_mib']:>8.0f} {'' if r['inputs_ms'] is None else format(r['inputs_ms'], '.2f'):>10}{gpu}")
    print(f"ms/f: {rows[0]['clock']} time per frame, median (min-max) over the repeats; ratio: ours / reference "
          "(medians); peak MiB: resident growth during one render at the clip length, x3 clip: at three times it; "
          "net inputs: of ours, Ditto's network-input staging (ms/f)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: the work, not the machine)")
    ap.add_argument("--quick", action="store_true", help="16 frames, 2 repeats (a smoke run)")
    ap.add_argument("--memory-child", nargs=4, metavar=("FAMILY", "HEIGHT", "WIDTH", "FRAMES"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        torch.set_num_threads(args.threads)
        family, height, width, frames = args.memory_child
        with torch.inference_mode():
            print(json.dumps(memory_child(family, int(height), int(width), int(frames), args.device)))
        return 0
    if args.quick:
        args.frames, args.repeats = 16, 2
    torch.set_num_threads(args.threads)
    rows = measure_host_path(args.device, SIZES, args.frames, args.repeats)
    print_table(rows, args.frames, args.repeats, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
