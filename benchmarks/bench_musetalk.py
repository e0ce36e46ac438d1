"""MuseTalk benchmark with the tiny random networks on the CPU: ratios measured side by side in one run (printed,
never pass/fail). The networks are tiny, so the stride ratio measures the pack's machinery around them (the VAE
decode of every frame still dominates); benchmarks/gpu_musetalk.py measures the full-size networks on a GPU.

1. audio windowing: one vectorised gather of every frame's 50 tokens against upstream's per-frame slicing loop;
2. paste-back: the window-only resize + blend (torch) against a per-frame reference (OpenCV Lanczos resize of face
   and mask to the whole box, full-box float blend), 1080x1920 frames with 420 px crops;
3. lip-sync: keyframe stride 2 and 3 against 1 (same clip, same audio, batch 4 so the UNet call counts differ);
   adaptive cadence (stride 1..4 from the audio velocity) against them: frames through the UNet, speed, and the
   mouth-region PSNR of each against dense;
4. avatar: loading the precompiled avatar from the cache (memory-mapped) against computing it again;
5. viseme cache on a looped script (the same 30 s read twice): keyframes reused, UNet rows and VAE decodes
   skipped, CPU time against no cache, the exact mode checked bit-identical, the mouth PSNR of the SimHash modes;
6. shipped settings on speech the pack did not make (`--speech`): the Lip Sync settings of the shipped
   workflows/api/musetalk_lipsync.api.json (adaptive cadence, viseme cache) on espeak-ng readings of a news script
   (tests/fixtures/espeak_speech.py: English and Spanish, four voices, 130/175/220 words a minute, pauses): frames
   skipped by the cadence, keyframes reused by the cache, per reading and their spread (counted from the
   pipeline's keyframe choice and cache; one reading is rendered to confirm the counts), and that reading's mouth
   PSNR against dense rendering (stride 1, no cache).

    python benchmarks/bench_musetalk.py            # a few minutes on 2 shared cores
    python benchmarks/bench_musetalk.py --quick    # a smoke run
    python benchmarks/bench_musetalk.py --speech   # only 6 (a few minutes on 2 shared cores)

Ratios are speed ratios (baseline time / our time) in CPU time of this process: above 1 means faster than the
baseline; "fps" is frames per CPU second.
"""
from __future__ import annotations

import argparse
import atexit
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engines.common.cache import ContentCache  # noqa: E402
from engines.musetalk.audio_features import LEFT_PAD_STEPS, WINDOW_STEPS, pad_features, window_features  # noqa: E402
from engines.musetalk.avatar import build_avatar  # noqa: E402
from engines.musetalk.blend import MouthPaster, mouth_mask  # noqa: E402
from engines.musetalk.face_track import HaarDetector, track_faces  # noqa: E402
from engines.musetalk.audio_features import encode_audio, prepare_audio, window_means  # noqa: E402
from engines.musetalk.blend import source_indices  # noqa: E402
from engines.musetalk.cadence import window_velocity  # noqa: E402
from engines.musetalk.lipsync import LipSyncSettings, LipSyncStats, lipsync  # noqa: E402
from engines.musetalk.loader import load_musetalk  # noqa: E402
from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk, speech_like  # noqa: E402


def best_of(fn, repeats: int) -> float:
    """Least CPU time (process time, all threads) over `repeats` runs: on a machine shared with other jobs, wall
    time mostly measures the others; the work done by this process is what the ratios compare."""
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def reference_windows(features: torch.Tensor, n: int, fps: float) -> torch.Tensor:
    """Upstream's loop: pad, then one slice, one check and one append per frame, concatenated at the end."""
    mult = 50 / fps
    padded = torch.cat([features.new_zeros(LEFT_PAD_STEPS, *features.shape[1:]), features,
                        features.new_zeros(WINDOW_STEPS * 3, *features.shape[1:])])
    clips = []
    for i in range(n):
        start = math.floor(i * mult)
        clip = padded[None, start:start + WINDOW_STEPS]
        assert clip.shape[1] == WINDOW_STEPS
        clips.append(clip)
    out = torch.cat(clips, dim=0)
    return out.reshape(n, -1, out.shape[-1])


def bench_windows(seconds: float, repeats: int) -> None:
    fps = 25.0
    n = int(seconds * fps)
    features = torch.randn(int(seconds * 50), 5, 384)
    ours = lambda: window_features(pad_features(features, n, fps), torch.arange(n), fps)  # noqa: E731
    assert torch.equal(ours(), reference_windows(features, n, fps))
    t_ref = best_of(lambda: reference_windows(features, n, fps), repeats)
    t_ours = best_of(ours, repeats)
    print(f"audio windowing, {n} frames ({seconds:.0f} s): per-frame loop {n / t_ref:,.0f} fps, "
          f"vectorised gather {n / t_ours:,.0f} fps -> {t_ref / t_ours:.1f}x")


def reference_paste(frame: np.ndarray, face: np.ndarray, mask: np.ndarray, box) -> np.ndarray:
    """Per-frame upstream-style blending: resize face and mask to the box (Lanczos), blend the whole box in float."""
    import cv2

    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    fg = cv2.resize(face, (w, h), interpolation=cv2.INTER_LANCZOS4)
    a = cv2.resize(mask, (w, h), interpolation=cv2.INTER_LANCZOS4)[..., None]
    bg = frame[y1:y2, x1:x2].astype(np.float32)
    frame[y1:y2, x1:x2] = np.clip((1 - a) * bg + a * fg, 0, 1)
    return frame


def bench_paste(frames_n: int, repeats: int) -> None:
    h, w = 1920, 1080
    rng = np.random.default_rng(0)
    frames = torch.from_numpy(rng.random((4, h, w, 3), dtype=np.float32))
    faces = torch.rand(frames_n, 3, 256, 256)
    mask = mouth_mask()
    boxes = [(330 + 3 * (k % 7), 700 + 2 * (k % 5), 750 + 3 * (k % 7), 1120 + 2 * (k % 5)) for k in range(frames_n)]
    faces_hwc = [f.permute(1, 2, 0).contiguous().numpy() for f in faces]
    mask_np = mask.numpy()

    paster = MouthPaster(mask)
    work = frames.clone()            # both paste in place onto the same frames (the frame copy is common work)

    def ours():
        for k in range(frames_n):
            paster.paste(work[k % 4], faces[k], boxes[k])

    def reference():
        for k in range(frames_n):
            reference_paste(work[k % 4].numpy(), faces_hwc[k], mask_np, boxes[k])

    t_ref = best_of(reference, repeats)
    t_ours = best_of(ours, repeats)
    print(f"paste-back, {frames_n} frames 1080x1920, 420 px crops: per-frame OpenCV reference "
          f"{frames_n / t_ref:.1f} fps, mouth-window paste {frames_n / t_ours:.1f} fps -> {t_ref / t_ours:.1f}x "
          "(in place; copying a 1080x1920 float frame adds the same ~10-20 ms to both)")


def bench_pipeline(seconds: float, loop_frames: int, repeats: int, quick: bool = False) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-musetalk-"))
    atexit.register(shutil.rmtree, work, True)
    nets = load_musetalk(build_tiny_musetalk(work / "tiny"))
    frames, _ = astronaut_loop(loop_frames)
    track = track_faces(frames, HaarDetector(), every=4, proxy_size=192)
    cache = ContentCache(work / "cache")
    t_build = best_of(lambda: build_avatar(nets, frames, track, 25.0), 1)
    avatar = build_avatar(nets, frames, track, 25.0, cache=cache)
    t_load = best_of(lambda: build_avatar(nets, frames, track, 25.0, cache=cache), max(3, repeats))
    assert build_avatar(nets, frames, track, 25.0, cache=cache).from_cache
    print(f"avatar ({loop_frames} frames 192x256): compute {t_build:.2f} s, cache load {t_load * 1000:.1f} ms -> "
          f"{t_build / t_load:.0f}x (the key hashes the pixels inside the crop boxes; full-size VAE encodes cost "
          "far more)")

    audio = speech_like(seconds, 24000)
    n = int(seconds * 25)
    times = {1: float("inf"), 2: float("inf"), 3: float("inf")}
    for _ in range(repeats):            # interleaved, so a busy spell on a shared machine hits every stride
        for stride in times:
            settings = LipSyncSettings(batch_size=4, stride=stride)
            times[stride] = min(times[stride], best_of(lambda: lipsync(nets, avatar, audio, settings), 1))
    line = ", ".join(f"stride {s} {n / t:.1f} fps" for s, t in times.items())
    print(f"lip-sync, {n} frames, tiny networks, batch 4: {line} -> stride 2 {times[1] / times[2]:.2f}x, "
          f"stride 3 {times[1] / times[3]:.2f}x (every frame is still VAE-decoded)")
    bench_adaptive(nets, avatar, audio, repeats)
    bench_viseme(nets, 1.0 if quick else 5.0)


def mouth_region(avatar, n: int, fps: float, loop_mode: str = "wrap") -> torch.Tensor:
    """``[N, H, W, 3]`` bool: the pixels the mouth paste can touch in each output frame."""
    src = source_indices(n, fps, avatar.fps, len(avatar), loop_mode)
    paster, region = MouthPaster(avatar.mask), torch.zeros(n, *avatar.frames.shape[1:])
    for k in range(n):
        paster.paste(region[k], torch.ones(3, 256, 256), avatar.boxes[int(src[k])].tolist())
    return region > 0


def mouth_psnr(a: torch.Tensor, b: torch.Tensor, region: torch.Tensor) -> float:
    mse = float(((a - b) ** 2)[region].mean())
    return float("inf") if mse == 0 else 10 * math.log10(1.0 / mse)


def bench_adaptive(nets, avatar, audio, repeats: int) -> None:
    """Adaptive cadence against fixed strides: UNet frames, speed and mouth PSNR against dense. The tiny random
    Whisper's window velocity sits near 0.15 for any input (its positional embeddings move every step), so the
    threshold is the clip's median velocity here; 0.065 is the posts' figure for the real whisper-tiny."""
    samples, n = prepare_audio(audio, 25.0)
    feats = encode_audio(nets.whisper, nets.feature_extractor, samples, torch.device("cpu"), torch.float32)
    from engines.musetalk.audio_features import pad_features

    threshold = float(window_velocity(window_means(pad_features(feats, n, 25.0), n, 25.0)).median())
    modes = {"dense": LipSyncSettings(batch_size=4), "fixed 2": LipSyncSettings(batch_size=4, stride=2),
             "fixed 3": LipSyncSettings(batch_size=4, stride=3),
             "adaptive 1-4": LipSyncSettings(batch_size=4, stride=1, stride_mode="adaptive", max_stride=4,
                                             velocity_threshold=threshold),
             "adaptive 2-4": LipSyncSettings(batch_size=4, stride=2, stride_mode="adaptive", max_stride=4,
                                             velocity_threshold=threshold)}
    region = mouth_region(avatar, n, 25.0)
    out, stats, times = {}, {}, {k: float("inf") for k in modes}
    for _ in range(repeats):
        for name, settings in modes.items():
            stats[name] = LipSyncStats()
            t = time.process_time()
            out[name] = lipsync(nets, avatar, audio, settings, stats=stats[name])
            times[name] = min(times[name], time.process_time() - t)
    print(f"cadence, {n} frames (velocity threshold {threshold:.4f} = the clip's median):")
    for name in modes:
        psnr = mouth_psnr(out[name], out["dense"], region)
        print(f"  {name:12s}: {stats[name].unet_frames:3d} frames through the UNet "
              f"({n / stats[name].unet_frames:.2f} frames per UNet frame), {n / times[name]:.1f} fps, "
              f"{times['dense'] / times[name]:.2f}x dense, mouth PSNR vs dense {psnr:.2f} dB")


def bench_viseme(nets, fps: float) -> None:
    """The viseme cache on a looped script: 30 s of speech read twice. The tiny random Whisper's features carry
    their position in the 30 s segment (a phrase repeated inside one segment gets unrelated features), so the
    script repeats on the segment boundary, where the features of the second reading equal the first's. The
    output runs at a low rate (`fps`) to keep 60 s of speech cheap on 2 cores; each frame's window is the same
    10 Whisper steps it is at 25 fps. A 10-frame loop at 25 fps puts the same loop frame under both readings."""
    from engines.musetalk.lipsync import lipsync_chunks

    frames, _ = astronaut_loop(10)
    track = track_faces(frames, HaarDetector(), every=4, proxy_size=192)
    avatar = build_avatar(nets, frames, track, 25.0)
    script = speech_like(30.0, 16000)
    audio = {"waveform": torch.cat([script["waveform"]] * 2, dim=-1), "sample_rate": 16000}
    n = int(60 * fps)
    region = mouth_region(avatar, n, fps)
    out: dict = {}
    rows = []
    for name, threshold in (("off", -1), ("exact", 0), ("Hamming <= 2", 2), ("Hamming <= 8", 8)):
        stats = LipSyncStats()
        settings = LipSyncSettings(batch_size=4, fps=fps, viseme_threshold=threshold)
        clip = torch.empty(n, *avatar.frames.shape[1:])
        t = time.process_time()
        k = 0
        for chunk in lipsync_chunks(nets, avatar, audio, settings, stats=stats):
            clip[k:k + chunk.shape[0]] = chunk.float() / 255      # the stream is uint8 (the byte path)
            k += chunk.shape[0]
        elapsed = time.process_time() - t
        out[name] = clip
        rows.append((name, stats, elapsed))
        del clip
    base_t = rows[0][2]
    print(f"viseme cache, looped script (30 s read twice), {n} frames at {fps:g} fps, stride 1, batch 4, CPU time:")
    for name, stats, elapsed in rows:
        if name == "off":
            print(f"  {name:13s}: {stats.unet_frames} UNet rows, {stats.decoded_frames} VAE decodes, {elapsed:.1f} s")
            continue
        same = torch.equal(out[name], out["off"])
        quality = "bit-identical to off" if same else f"mouth PSNR vs off {mouth_psnr(out[name], out['off'], region):.2f} dB"
        print(f"  {name:13s}: {stats.viseme_hits}/{stats.keyframes} keyframes reused "
              f"({100 * stats.viseme_hits / stats.keyframes:.1f} %), {stats.unet_frames} UNet rows, "
              f"{stats.decoded_frames} VAE decodes, {elapsed:.1f} s -> {base_t / elapsed:.2f}x off, "
              f"{100 * (1 - elapsed / base_t):.0f} % time saved; {quality}")


def shipped_lipsync_settings() -> LipSyncSettings:
    """The Lip Sync node's settings in the shipped workflows/api/musetalk_lipsync.api.json (read, not restated)."""
    import json

    prompt = json.loads((REPO / "workflows" / "api" / "musetalk_lipsync.api.json").read_text(encoding="utf-8"))
    (node,) = [n for n in prompt.values() if n["class_type"] == "BroadcastMuseTalkLipSync"]
    v = node["inputs"]
    return LipSyncSettings(batch_size=v["batch_size"], stride=v["stride"], loop_mode=v["loop_mode"],
                           blend=v["blend"], stride_mode=v["stride_mode"], max_stride=v["max_stride"],
                           velocity_threshold=v["velocity_threshold"], viseme_threshold=v["viseme_threshold"],
                           viseme_cache_size=v["viseme_cache_size"])


def _spread(values) -> str:
    v = np.asarray(values, np.float64)
    return f"median {np.median(v):.1f} [{v.min():.1f}-{v.max():.1f}]"


def planned_counts(padded: torch.Tensor, n: int, fps: float, settings: LipSyncSettings) -> tuple[int, int]:
    """(keyframes, keyframes the viseme cache reuses) for a clip, without rendering it: the keyframes the pipeline
    chooses (`lipsync.choose_keyframes`) looked up in a `VisemeCache` in order, as the pipeline does (fuzzy keys:
    the SimHash bits of each frame's window). `bench_speech` checks this against a full render."""
    from engines.musetalk.lipsync import choose_keyframes
    from engines.musetalk.viseme import CachedMouth, VisemeCache, simhash

    keys = choose_keyframes(padded, n, fps, settings).tolist()
    if settings.viseme_threshold <= 0:
        raise ValueError("planned_counts counts fuzzy (SimHash) viseme keys only")
    cache, bits, hits = VisemeCache(settings.viseme_threshold, settings.viseme_cache_size), \
        simhash(window_means(padded, n, fps)), 0
    for f in keys:
        if cache.lookup(bits[f]) is not None:
            hits += 1
        else:
            cache.insert(bits[f], CachedMouth(frame=f))
    return len(keys), hits


def bench_speech(quick: bool) -> None:
    """Section 6: the shipped settings on espeak-ng speech (see the module docstring). Every reading's keyframes
    and cache hits are counted by `planned_counts`; one reading (English, 175 wpm) is also rendered at the shipped
    settings, whose counts must equal the plan's, and densely (stride 1, no cache) for the mouth PSNR."""
    from dataclasses import replace

    from engines.musetalk.audio_features import pad_features
    from tests.fixtures import espeak_speech

    if not espeak_speech.available():
        print("shipped settings on espeak-ng speech: skipped (espeak-ng is not installed; scripts/env.sh installs it)")
        return
    work = Path(tempfile.mkdtemp(prefix="bench-musetalk-speech-"))
    atexit.register(shutil.rmtree, work, True)
    nets = load_musetalk(build_tiny_musetalk(work / "tiny"))
    shipped = shipped_lipsync_settings()
    readings = espeak_speech.CORPUS if not quick else espeak_speech.CORPUS[1::6]
    print(f"shipped Lip Sync settings (musetalk_lipsync.api.json: {shipped.stride_mode} stride {shipped.stride}-"
          f"{shipped.max_stride} at velocity {shipped.velocity_threshold}, viseme Hamming <= "
          f"{shipped.viseme_threshold}, cache {shipped.viseme_cache_size}) on espeak-ng readings, 25 fps, tiny "
          "random networks (the tiny Whisper's features, not whisper-tiny's):")
    skipped, reused, rendered = [], [], False
    for reading in readings:
        audio = espeak_speech.audio_dict(reading)
        samples, n = prepare_audio(audio, 25.0)
        feats = encode_audio(nets.whisper, nets.feature_extractor, samples, torch.device("cpu"), torch.float32)
        padded = pad_features(feats, n, 25.0)
        velocity = window_velocity(window_means(padded, n, 25.0))
        keys, hits = planned_counts(padded, n, 25.0, shipped)
        skip, reuse = 100.0 * (1 - keys / n), 100.0 * hits / keys
        skipped.append(skip)
        reused.append(reuse)
        line = (f"  {reading.language} {reading.name:16s} {n:4d} frames ({n / 25:.1f} s): {keys:4d} keyframes "
                f"({skip:.1f} % of frames skipped), {hits} reused ({reuse:.1f} %); window velocity median "
                f"{float(velocity.median()):.3f}, "
                f"{100.0 * float((velocity < shipped.velocity_threshold).float().mean()):.1f} % of frames below "
                f"{shipped.velocity_threshold}")
        if not rendered and reading.language == "en" and reading.speed == 175:
            rendered = True
            frames, _ = astronaut_loop(8)
            avatar = build_avatar(nets, frames, track_faces(frames, HaarDetector(), every=5, proxy_size=384), 25.0)
            stats = LipSyncStats()
            out = lipsync(nets, avatar, audio, shipped, stats=stats)
            assert (stats.keyframes, stats.viseme_hits, stats.frames) == (keys, hits, n), \
                f"the plan ({keys}, {hits}, {n}) differs from the render ({stats.keyframes}, {stats.viseme_hits})"
            dense = lipsync(nets, avatar, audio, replace(shipped, stride=1, stride_mode="fixed", viseme_threshold=-1))
            psnr = mouth_psnr(out, dense, mouth_region(avatar, n, 25.0, shipped.loop_mode))
            line += (f"; rendered: {stats.unet_frames} UNet rows, the plan's counts confirmed, mouth PSNR vs dense "
                     f"(stride 1, no cache) {psnr:.2f} dB")
            del out, dense
        print(line, flush=True)
    print(f"  over {len(readings)} readings: frames skipped {_spread(skipped)} %, keyframes reused "
          f"{_spread(reused)} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (a smoke run)")
    parser.add_argument("--speech", action="store_true", help="only the shipped settings on espeak-ng speech")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    if args.speech:
        bench_speech(args.quick)
        return
    repeats = 1 if args.quick else 3
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}; windowing and paste-back on 1 thread (both sides), networks on {threads}")
    # One thread for the non-neural comparisons: on a shared machine, thread hand-offs on small tensors swamp the
    # work being measured, for OpenCV and torch alike.
    import cv2

    cv2.setNumThreads(1)
    torch.set_num_threads(1)
    bench_windows(10 if args.quick else 60, repeats)
    bench_paste(8 if args.quick else 25, repeats)
    torch.set_num_threads(threads)
    bench_pipeline(0.4 if args.quick else 1.6, 4 if args.quick else 8, 1 if args.quick else 2, args.quick)
    bench_speech(args.quick)


if __name__ == "__main__":
    main()
