"""The one device check of the accelerated path: every backend against eager fp32, speed per stage and per frame,
time to first frame and peak memory, in one readable table. Prints numbers; pass/fail is only "it ran".

What it runs: each family's per-frame networks at full size with random weights (speed does not depend on the
weights' values; sizes from upstream's configs, ``benchmarks/accel_nets.py``): MuseTalk's UNet step then VAE
decoder, Ditto's warp network then SPADE decoder. For each backend the pack offers, in the precision it runs there
(eager fp32 = the reference; eager bf16 = ``auto`` on Ampere and newer; eager fp16; torch.compile; CUDA graphs;
ONNX Runtime with the CUDA provider; TensorRT, whose engine is fp16 for 16-bit weights, see docs/accel.md), at
each batch size:

- parity: cosine and max absolute error of every network's output against eager fp32 on the same inputs;
- per stage: ms per call and frames per second of each network; end to end: the chain (UNet then VAE, warp then
  decoder) in frames per second;
- time to first frame: building the runners (exports, engine builds, captures) plus the first chained call;
- peak GPU memory while the backend ran (``torch.cuda.max_memory_allocated``; "-" on the CPU).

Fixed-shape backends (TensorRT, torch.compile) are built for ``--static-batches`` only (default 4: each extra
batch size costs a TensorRT profile or a compile of the full UNet, minutes each) and timed at every batch through the
pack's shape policy (short batches padded, long ones split), as a render at another batch would run them.

Runs on a bare machine with a CUDA torch: the other packages (onnx, onnxruntime-gpu, diffusers for MuseTalk's
networks, tensorrt) may be carried as wheels; each missing one is named at the start and its rows say why they did
not run. ``--budget`` (seconds, default 360) skips the variants not started by then, so the check ends inside ten
minutes; ``--variants`` runs only some (e.g. ``"eager fp32,tensorrt"`` for a TensorRT-only rerun).

    python benchmarks/gpu_check.py                         # CUDA, full size
    python benchmarks/gpu_check.py --device cpu --quick    # the same code on the CPU: tiny networks, batch 1 and 2
                                                           # (tests/unit/test_gpu_check.py runs it)
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.accel_nets import ditto_networks, musetalk_networks  # noqa: E402
from engines.accel import BuildOptions, accelerate, cosine  # noqa: E402
from engines.accel import tensorrt as trt_backend  # noqa: E402
from engines.accel.network import as_tuple, place  # noqa: E402
from engines.common.cache import ContentCache  # noqa: E402

HEADER = ("family", "backend", "batch", "stage ms/call", "stage frames/s", "chain frames/s", "1st frame s",
          "peak MiB", "cos vs fp32", "max err vs fp32")


def optional_packages(device: torch.device) -> list[str]:
    """One line per optional package: present (version) or missing, with what that costs."""
    lines = []
    for name, cost in (("onnx", "no ONNX export: onnxruntime and tensorrt rows not run"),
                       ("onnxruntime", "onnxruntime rows not run"),
                       ("diffusers", "MuseTalk's networks not built: MuseTalk rows not run")):
        if importlib.util.find_spec(name) is None:
            lines.append(f"missing: {name} ({cost})")
        else:
            mod = __import__(name)
            lines.append(f"present: {name} {getattr(mod, '__version__', '?')}")
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime as ort
        if device.type == "cuda" and "CUDAExecutionProvider" not in ort.get_available_providers():
            lines.append("missing: onnxruntime's CUDA provider (the CPU build is installed; carry onnxruntime-gpu)")
    try:
        trt = trt_backend.import_tensorrt()
        lines.append(f"present: tensorrt {trt.version}")
    except trt_backend.TensorRTUnavailable as exc:
        lines.append(f"missing: tensorrt ({exc})")
    return lines


def variants(device: torch.device) -> list:
    """(label, backend, weights' dtype), most telling first (the budget may cut the tail)."""
    cuda = device.type == "cuda"
    half = torch.float16 if cuda else torch.bfloat16            # the CPU's stand-in for the GPU's fp16
    out = [("eager fp32", "eager", torch.float32), ("eager bf16", "eager", torch.bfloat16)]
    if cuda:
        out.append(("eager fp16", "eager", torch.float16))
    out += [("tensorrt (bf16 weights)", "tensorrt", torch.bfloat16),
            (f"cudagraphs {'fp16' if cuda else 'bf16'}", "cudagraphs", half),
            (f"onnxruntime {'fp16' if cuda else 'fp32'}", "onnxruntime", torch.float16 if cuda else torch.float32),
            (f"compile {'fp16' if cuda else 'bf16'}", "compile", half)]
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn, device, repeats: int) -> float:
    fn()                                      # warm: graphs captured, autotuning done
    sync(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def chain_inputs(nets, batch: int) -> list:
    """Inputs of the first network; the later ones take the previous output (the chain a render runs)."""
    return list(nets[0].example(batch))


def run_chain(runners, first_inputs):
    """First network on its inputs, each next one on the previous output; returns every network's outputs."""
    outs, x = [], first_inputs
    for r in runners:
        out = as_tuple(r(*x))
        outs.append(out)
        x = out
    return outs


def check_family(family: str, nets: list, device: torch.device, batches, static_batches, repeats, cache, engines,
                 compiler: str, rows: list, deadline: float, only=None) -> None:
    for net in nets:
        net.module.to(device, torch.float32)
    inputs = {b: chain_inputs(nets, b) for b in batches}
    with torch.inference_mode():
        refs = {b: run_chain([lambda *x, n=n: n.module(*place(x, device, torch.float32)) for n in nets], inputs[b])
                for b in batches}
    for label, backend, dtype in variants(device):
        if only and not any(o in label for o in only):
            continue
        if time.perf_counter() > deadline:
            rows.append((family, label, "-", "not run: time budget spent (--budget)", *[""] * 6))
            continue
        for net in nets:
            net.module.to(device, dtype)
        fixed = backend in ("tensorrt", "compile")
        built_for = tuple(static_batches) if fixed else tuple(batches)
        if device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        try:
            runners = [accelerate(net, backend, BuildOptions(batches=built_for, cache=cache, engine_root=engines,
                                                             parity=False, compiler=compiler)) for net in nets]
            missing = [r.fallbacks[0] for r in runners if r.backend != backend and r.fallbacks]
            if missing:
                rows.append((family, label, "-", "not run: " + missing[0][:150], *[""] * 6))
                continue
            with torch.inference_mode():
                run_chain(runners, inputs[batches[0]])
            sync(device)
            first = time.perf_counter() - t0
            for b in batches:
                with torch.inference_mode():
                    chain_s = median_seconds(lambda: run_chain(runners, inputs[b]), device, repeats)
                    outs = run_chain(runners, inputs[b])
                    stage_s = []
                    for r, x in zip(runners, [inputs[b], *[o for o in outs[:-1]]]):
                        stage_s.append(median_seconds(lambda r=r, x=x: r(*x), device, repeats))
                cos = min(cosine(o, f) for out, ref in zip(outs, refs[b]) for o, f in zip(out, ref))
                err = max(float((o.float() - f.float()).abs().max()) for out, ref in zip(outs, refs[b])
                          for o, f in zip(out, ref))
                peak = (f"{torch.cuda.max_memory_allocated(device) / 2**20:.0f}" if device.type == "cuda" else "-")
                stages = " + ".join(f"{s * 1000:.1f}" for s in stage_s)
                fps = " / ".join(f"{b / s:.1f}" for s in stage_s)
                note = "" if b in built_for else f" (built for {'/'.join(map(str, built_for))})"
                rows.append((family, label + note, b, stages, fps, f"{b / chain_s:.1f}", f"{first:.1f}", peak,
                             f"{cos:.6f}", f"{err:.2e}"))
        except Exception as exc:        # a backend's own failure (compile at its first call): a named row, go on
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            rows.append((family, label, "-", f"not run: failed with {type(exc).__name__}: {text}"[:170], *[""] * 6))
        finally:
            runners = None
            gc.collect()
    for net in nets:
        net.module.to("cpu", torch.float32)


RENDER_VARIANTS = (("eager fp32", "eager"), ("tensorrt", "tensorrt"), ("cudagraphs", "cudagraphs"),
                   ("onnxruntime", "onnxruntime"))


def _fell_back(nets, backend: str) -> str:
    """The first reason a runner of `nets` is not `backend` (the render would time eager under its name), or ""."""
    for runner in (getattr(nets, "runners", None) or {}).values():
        if runner.backend != backend:
            return runner.fallbacks[0] if runner.fallbacks else f"{runner.net.name} runs {runner.backend}"
    return ""


def _timed_render(chunks_fn, device):
    """(frames [N, H, W, 3], seconds to the first chunk, total seconds) of one render."""
    t0 = time.perf_counter()
    first, parts = None, []
    for chunk in chunks_fn():
        if first is None:
            sync(device)
            first = time.perf_counter() - t0
        # the renders stream uint8 frames (the byte path); errors are reported in [0, 1] pixel values
        parts.append(chunk.float() / 255.0 if chunk.dtype == torch.uint8 else chunk)
    sync(device)
    return torch.cat(parts), first, time.perf_counter() - t0


def tiny_renders(rows: list, device: torch.device, batch: int, tmp: Path, deadline: float, only=None) -> None:
    """The families' real render loops (lipsync_chunks, DittoPipeline.render) on the tiny test models through each
    backend, at a frame count that is not a multiple of `batch` (the shape policy's case): time to the first chunk,
    frames per second, and the largest pixel difference from the eager fp32 render. Needs the tests' fixtures'
    packages (transformers, opencv, scikit-image for MuseTalk's); a missing one is a named row."""
    try:
        from engines.musetalk.accel import accelerate_musetalk
        from engines.musetalk.avatar import build_avatar
        from engines.musetalk.face_track import HaarDetector, track_faces
        from engines.musetalk.lipsync import LipSyncSettings, lipsync_chunks
        from engines.musetalk.loader import load_musetalk
        from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk, speech_like

        folder = build_tiny_musetalk(tmp / "tiny-musetalk")
        loop, _ = astronaut_loop(4)
        track = track_faces(loop, HaarDetector(), every=2, proxy_size=160)
        audio = speech_like(1.3)                         # 13 frames at 10 fps

        def musetalk(backend):
            nets = load_musetalk(folder, torch.float32).to(device)
            avatar = build_avatar(nets, loop, track, 10.0, device=device)
            if backend != "eager":
                accelerate_musetalk(nets, backend, BuildOptions(batches=(batch,), cache=ContentCache(tmp / "onnx"),
                                                                engine_root=tmp / "trt", parity=False))
            return (lambda: lipsync_chunks(nets, avatar, audio, LipSyncSettings(batch_size=batch), device=device),
                    _fell_back(nets, backend))
    except ImportError as exc:
        musetalk = exc
    try:
        from engines.common.audio import to_mono
        from engines.ditto.avatar import AvatarSettings
        from engines.ditto.keypoints import DriveSettings
        from engines.ditto.motion import MotionSettings
        from engines.ditto.pipeline import DittoPipeline
        from engines.ditto.render import RenderSettings
        from tests.fixtures.tiny_ditto import build_tiny_ditto, portrait, speech

        ditto_folder = build_tiny_ditto(tmp / "tiny-ditto")
        wav, _ = to_mono(speech(0.52), 16000)             # 13 frames at 25 fps

        def ditto(backend):
            pipeline = DittoPipeline(ditto_folder, device=device)
            if backend != "eager":
                pipeline.accelerate(backend, BuildOptions(batches=(batch,), cache=ContentCache(tmp / "onnx"),
                                                          engine_root=tmp / "trt", parity=False))
            fell_back = _fell_back(pipeline.nets, backend)
            avatar, _ = pipeline.prepare_avatar(portrait(), AvatarSettings(), None)
            motion = pipeline.motion(avatar, pipeline.audio_features(wav, None),
                                     MotionSettings(steps=4, seed=3, overlap=5), DriveSettings(), wav)
            return lambda: pipeline.render(avatar, motion, RenderSettings(batch_size=batch)), fell_back
    except ImportError as exc:
        ditto = exc
    for family, make in (("MuseTalk tiny render", musetalk), ("Ditto tiny render", ditto)):
        if isinstance(make, ImportError):
            rows.append((family, "all", "-", f"not run: {make} (carry the wheel)", *[""] * 6))
            continue
        reference = None
        for label, backend in RENDER_VARIANTS:
            if only and not any(o in label for o in only):
                continue
            if time.perf_counter() > deadline:
                rows.append((family, label, "-", "not run: time budget spent (--budget)", *[""] * 6))
                continue
            try:
                t0 = time.perf_counter()
                render, fell_back = make(backend)
                if fell_back:
                    rows.append((family, label, "-", f"not run: {fell_back}"[:170], *[""] * 6))
                    continue
                frames, first, total = _timed_render(render, device)
                first += time.perf_counter() - t0 - total          # builds and set-up count toward the first frame
                if reference is None:
                    reference = frames
                err = float((frames.float() - reference.float()).abs().max())
                rows.append((family, label, batch, f"{len(frames)} frames", "", f"{len(frames) / total:.1f}",
                             f"{first:.1f}", "-", "", f"{err:.2e}"))
            except Exception as exc:
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                rows.append((family, label, "-", f"not run: failed with {type(exc).__name__}: {text}"[:170],
                             *[""] * 6))
            finally:
                gc.collect()


def host_path(rows: list, device: torch.device, quick: bool) -> None:
    """The host path around the networks (loop bytes, window paste, bytes to the encoder's sink), measured by
    benchmarks/bench_host_path.py's `measure_host_path` against its minimal reference (uint8 frame copy + window
    blend) with the networks replaced by instant stand-ins; one row per family and frame size. --quick: one small
    frame, 16 frames, one repeat (the code path, not a figure)."""
    from benchmarks.bench_host_path import BATCH, SIZES, measure_host_path

    sizes, frames, repeats = (((256, 144),), 16, 1) if quick else (SIZES, 96, 3)
    try:
        measured = measure_host_path(device=str(device), sizes=sizes, frames=frames, repeats=repeats)
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        rows.append(("host path", "-", "-", f"not run: failed with {type(exc).__name__}: {text}"[:170], *[""] * 6))
        return
    for m in measured:
        peak = m["gpu_peak_mib"] if m.get("gpu_peak_mib") is not None else m["growth_3x_mib"]
        rows.append((f"host path {m['family']} {m['size']}", f"vs reference ({m['clock']} time)", BATCH,
                     f"{m['ms']:.2f} ms/frame, ref {m['ref_ms']:.2f}, x{m['ratio']:.2f} (goal x{m['goal']})",
                     f"{1000 / m['ms']:.0f}", "", "", f"{peak:.0f}" if peak is not None else "-", "", ""))


def table(rows: list) -> str:
    """The rows as aligned columns; a row that did not run shows a note number, its reason listed below."""
    notes: list = []
    shown = []
    for r in rows:
        if str(r[3]).startswith("not run"):
            if r[3] not in notes:
                notes.append(r[3])
            r = (*r[:3], f"not run [{notes.index(r[3]) + 1}]", *r[4:])
        shown.append(r)
    widths = [max(len(str(r[i])) for r in [HEADER, *shown]) for i in range(len(HEADER))]
    line = " | ".join(h.ljust(w) for h, w in zip(HEADER, widths))
    body = [" | ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in shown]
    return "\n".join([line, "-" * len(line), *body, *(f"[{i + 1}] {n}" for i, n in enumerate(notes))])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny networks, batch 1 and 2 (the suite's CPU run)")
    ap.add_argument("--batches", default=None, help="comma-separated (default 1,4,8,16; --quick 1,2)")
    ap.add_argument("--static-batches", default=None,
                    help="what TensorRT and torch.compile are built for (default 4; --quick 2)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--budget", type=float, default=360.0,
                    help="seconds; variants not started by then are not run (one started before may overrun it: "
                         "a TensorRT build of the full UNet takes minutes)")
    ap.add_argument("--variants", default=None,
                    help="comma-separated parts of the backend labels to run, e.g. 'eager fp32,tensorrt' (default all)")
    ap.add_argument("--compiler", default=None,
                    help="torch.compile's backend (default inductor; aot_eager with --device cpu --quick: inductor's "
                         "CPU C++ build is not the GPU's Triton path and takes many minutes on a small machine)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu --quick for the CPU run", file=sys.stderr)
        return 2
    batches = tuple(int(b) for b in (args.batches or ("1,2" if args.quick else "1,4,8,16")).split(","))
    static = tuple(int(b) for b in (args.static_batches or ("2" if args.quick else "4")).split(","))
    repeats = args.repeats or (2 if args.quick else 10)
    only = [v.strip() for v in args.variants.split(",")] if args.variants else None
    compiler = args.compiler or ("aot_eager" if args.quick and device.type == "cpu" else "inductor")
    if args.quick and device.type == "cpu":
        torch.set_num_threads(1)          # tiny ops: one thread beats two syncing on a loaded machine
    started = time.perf_counter()
    deadline = started + args.budget
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {where}; "
          f"{'tiny' if args.quick else 'full-size'} networks, random weights; batches {batches}, fixed-shape "
          f"backends built for {static}; torch.compile backend {compiler}")
    for line in optional_packages(device):
        print("  " + line)
    rows: list = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        cache, engines = ContentCache(Path(tmp) / "onnx"), Path(tmp) / "broadcast_tensorrt"
        try:
            musetalk = musetalk_networks(args.quick)
        except ImportError as exc:
            rows.append(("MuseTalk UNet > VAE", "all", "-", f"not run: {exc} (carry the diffusers wheel)",
                         *[""] * 6))
        else:
            check_family("MuseTalk UNet > VAE", musetalk, device, batches, static, repeats, cache, engines, compiler,
                         rows, deadline, only)
            del musetalk
        check_family("Ditto warp > decoder", ditto_networks(args.quick), device, batches, static, repeats, cache,
                     engines, compiler, rows, deadline, only)
        tiny_renders(rows, device, static[-1] if not args.quick else 4, Path(tmp) / "renders", deadline, only)
    host_path(rows, device, args.quick)
    print("\n" + table(rows))
    print(f"\nstage columns: one value per network in chain order; 1st frame: runner builds + first chained call at "
          f"batch {batches[0]}; tiny renders: 1st frame = load, avatar, builds and motion up to the first chunk, "
          f"max err in [0, 1] pixel values against the eager fp32 render; total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
