"""Accelerated backends on a GPU, one command, one table (prints numbers, never pass/fail).

MuseTalk (UNet step + VAE decode) and Ditto (warp + decoder) at full size with random weights, batch 1 and 4:
eager fp16 (channels-last), torch.compile, CUDA graphs, ONNX Runtime with the CUDA provider, and TensorRT when it is
installed; each row with ms per call, frames per second, speed against eager fp16, and parity (cosine) against eager
fp32 on the same inputs. A backend that cannot run shows the reason the pack's loader would show.

Needs only PyTorch (CUDA), onnxruntime (onnxruntime-gpu for the CUDA provider; the CPU build gives a named
"not run" row) and onnx. MuseTalk's networks are diffusers classes: without diffusers its rows are skipped with
the reason; it is pure Python, so its wheel can be carried (``pip download --no-deps diffusers==0.42.1``).
Designed to finish in under 8 minutes on an H200 (torch.compile of the UNet is the longest step).

    python benchmarks/gpu_accel.py                        # CUDA, full size
    python benchmarks/gpu_accel.py --device cpu --quick   # the script itself, end to end, on a CPU (tiny networks;
                                                          # torch.compile through aot_eager there, see --compiler)
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.accel_nets import ditto_networks, musetalk_networks  # noqa: E402
from engines.accel import AUTO_ORDER, BuildOptions, accelerate, cosine  # noqa: E402
from engines.accel.network import as_tuple, place  # noqa: E402
from engines.common.cache import ContentCache  # noqa: E402


def variants(device: torch.device):
    low = torch.float16 if device.type == "cuda" else torch.bfloat16      # CPU smoke run: bf16 stands in
    name = "fp16" if low == torch.float16 else "bf16"
    ort_dtype = torch.float16 if device.type == "cuda" else torch.float32  # ORT has no bf16 kernels
    return [(f"eager {name}", "eager", low), (f"compile {name}", "compile", low),
            (f"cudagraphs {name}", "cudagraphs", low),
            (f"onnxruntime {'fp16' if ort_dtype == torch.float16 else 'fp32'}", "onnxruntime", ort_dtype),
            (f"tensorrt {'fp16' if ort_dtype == torch.float16 else 'fp32'}", "tensorrt", ort_dtype)]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, repeats):
    fn()
    fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_group(title, nets, device, batches, repeats, cache, engine_root, rows, compiler="inductor"):
    inputs = {b: [net.example(b) for net in nets] for b in batches}
    for net in nets:
        net.module.to(device, torch.float32)
    with torch.inference_mode():
        refs = {b: [as_tuple(net.module(*place(x, device, torch.float32))) for net, x in zip(nets, inputs[b])]
                for b in batches}
    base = {}
    for label, backend, dtype in variants(device):
        for net in nets:
            net.module.to(device, dtype)
        t0 = time.perf_counter()
        runners = [accelerate(net, backend, BuildOptions(batches=tuple(batches), cache=cache, engine_root=engine_root,
                                                         parity=False, compiler=compiler)) for net in nets]
        build = time.perf_counter() - t0
        fell_back = [r.fallbacks[0] for r in runners if r.backend != backend and r.fallbacks]
        if fell_back:
            rows.append((title, label, "-", "not run: " + fell_back[0][:110], "", "", ""))
            continue
        for b in batches:
            def call():
                with torch.inference_mode():
                    return [as_tuple(r(*x)) for r, x in zip(runners, inputs[b])]
            try:
                t = timed(call, device, repeats)
                outs = call()
            except Exception as exc:          # compile is lazy: its failures come at the first call (a named row)
                msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                rows.append((title, label, b, f"not run: failed with {type(exc).__name__}: {msg}"[:150], "", "", ""))
                break
            cos = min(cosine(o, r) for out, ref in zip(outs, refs[b]) for o, r in zip(out, ref))
            base.setdefault(b, t)              # the first variant (eager in low precision) is the baseline
            rows.append((title, label, b, f"{t * 1000:.1f}", f"{b / t:.1f}", f"{base[b] / t:.2f}x", f"{cos:.6f}"))
        rows.append((title, f"  {label} build", "-", f"{build:.1f} s", "", "", ""))
        del runners
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    for net in nets:
        net.module.to("cpu", torch.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny networks, batch 1 and 2 (a smoke run)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch's CPU threads (default: its own; 1 with --device cpu --quick: on a loaded machine "
                         "two threads syncing on every tiny op ran 50x slower than one)")
    ap.add_argument("--compiler", default=None,
                    help="torch.compile's backend (default inductor; on the CPU with --quick aot_eager: inductor's CPU "
                         "C++ build is not the GPU's Triton path and takes tens of minutes on a loaded 2-core machine)")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --device cpu --quick for a smoke run")
    batches = (1, 2) if args.quick else (1, 4)
    compiler = args.compiler or ("aot_eager" if args.quick and device.type == "cpu" else "inductor")
    threads = args.threads or (1 if args.quick and device.type == "cpu" else None)
    if threads:
        torch.set_num_threads(threads)
    repeats = args.repeats or (2 if args.quick else 10)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"torch {torch.__version__} on {where}; {'tiny' if args.quick else 'full-size'} networks, random weights; "
          f"torch.compile backend {compiler}; {torch.get_num_threads()} CPU threads")
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-accel-") as tmp:
        cache, engines = ContentCache(Path(tmp) / "onnx"), Path(tmp) / "broadcast_tensorrt"
        try:
            run_group("MuseTalk UNet + VAE", musetalk_networks(args.quick), device, batches, repeats, cache,
                      engines, rows, compiler)
        except ImportError as exc:
            rows.append(("MuseTalk UNet + VAE", "all", "-", f"skipped: {exc} (carry the diffusers wheel)", "", "",
                         ""))
        run_group("Ditto warp + decoder", ditto_networks(args.quick), device, batches, repeats, cache, engines,
                  rows, compiler)
    header = ("networks", "backend", "batch", "ms/call", "frames/s", "vs eager low-precision", "cos vs eager fp32")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = " | ".join(h.ljust(w) for h, w in zip(header, widths))
    print("\n" + line + "\n" + "-" * len(line))
    for r in rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    print()
    for title in dict.fromkeys(r[0] for r in rows):
        timed_rows = [r for r in rows if r[0] == title and isinstance(r[2], int) and r[2] == max(batches)]
        if timed_rows:
            best = min(timed_rows, key=lambda r: float(r[3]))
            print(f"fastest for {title} at batch {best[2]}: {best[1]} ({best[5]} eager's speed)")
    print(f"auto's order on {device.type} (engines/accel/backends.py AUTO_ORDER, for every network that declares no "
          f"Preference of its own for {device.type}; on cpu MuseTalk's UNet prefers onnxruntime): "
          f"{' > '.join(AUTO_ORDER.get(device.type, ('eager',)))}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
