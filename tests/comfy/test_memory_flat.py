"""Memory stays flat over repeated runs: each family's shipped workflow queued 32 times through a real server.

Each family's API twin runs on the tiny models (the case's own `prepare`, as the `comfy run` test does) with the
smallest inputs (a few frames, under a second of speech, one sentence). Every run's inputs differ from the run
before, so ComfyUI re-executes everything downstream of the loaders; most runs ask for content the pack has cached
(two spellings of the same content take turns: a target rate equal to the file's own or none, a duration past the
end or none: a hit in the avatar, packet, voice prompt, audio feature or mask cache), and every fourth run asks for
content of the same size as the misses before it (frames and samples from another start: a miss, a new entry is
built and stored; once a short loop's windows are used up, the least recently used ones come back). The model
loaders' inputs never change, so the models stay loaded as in a user's session.

The server is this module's own, with ComfyUI's classic cache (`--cache-classic`: only the latest prompt's outputs
are kept; 0.3.75's default): 0.33.0's default RAM-pressure cache keeps every earlier run's outputs while RAM allows,
by design, which would grow RSS without any leak. For the same reason ComfyUI's history (every prompt's entry, up
to 10000) is cleared after each run. Its allocator settings are a user's (no MALLOC_ARENA_MAX, no oneDNN or torch
cache setting). After each run the test reads `/broadcast_avatar/memory?trim=1` (nodes/comfy_bridge.py): after a
garbage collection and glibc's malloc_trim (free heap pages handed back, so the allocator's high-water marks do
not count; live memory cannot be trimmed, so this hides no leak), the server process's anonymous memory (RssAnon
of /proc/<pid>/status), its RSS, the models in ComfyUI's model management and the pack's live model handles.

The gate, per family:
- anonymous memory over the runs after the warm-up (runs `WARMUP`..31) grows by less than `BOUND_FRACTION` (half)
  of one run's inputs (its decoded float32 frames and samples) per run, as the median of the slopes between every
  two runs (Theil-Sen), which the allocator's run-to-run scatter and one step in the middle (a cache filling once:
  about S/22 for a step of S over 24 runs) move little, while a leak moves every pair;
- loaded models and live model handles never exceed their number after the warm-up;
- POST /free with ``unload_models`` leaves no model loaded in ComfyUI's model management, and with ``free_memory``
  (ComfyUI drops its outputs) no model handle of the pack stays alive: nothing else holds one.
The figures are printed (`pytest -s` shows them, and tests/conftest.py repeats them at the end of every run).

Measured (2-core machine, load about 2, 2026-12-02), KiB/run over runs 8-31:

| family | bound | 0.33.0 | 0.3.75 | 0.33.0, one run's inputs leaked per run |
|---|---|---|---|---|
| export | 4032 | -46.2 | -209.5 | +8067.0 (8064 injected) |
| wardrobe | 8064 | +71.6 | +2.8 | +16135.0 (16128) |
| tts | 140.6 | +2.0 | +0.7 | +283.3 (281.2) |
| musetalk | 1745 | +23.7 | +8.6 | +3938.2 (3490.5) |
| ditto | 1228 | +85.0 | +50.2 | +2419.6 (2456.2) |

The whole file took 190 s on 0.33.0 and 167 s on 0.3.75 (server start, tiny models and fixtures included).

What was found on the way:
- MuseTalk grew in every earlier run (+1.9 to +2.7 MiB/run over runs 8-19, up to 0.78 of one run's inputs; its bound
  was two runs' inputs then): its pipelined stages started three new threads every clip, and glibc gives new
  threads new arenas (up to 8 per core), each keeping its own free pages: 640 -> 700 MiB over 20 runs, scattering
  +-15 MiB. Run without threads it stayed within 2 MiB from the fourth run on. The stages now run on long-lived
  workers (engines/accel/stages.py). Ditto's one-off steps (+11 MiB at run 13 once) had the same cause.
- Misses of a new size grew anonymous memory on every miss (TTS: +1.8 MiB per new reference length, 1.4 MiB of it
  oneDNN's primitive cache, which keeps kernels per input shape up to 1024 of them: bounded, a user has it too,
  yet indistinguishable from a leak over a few runs). So misses keep one size.
- RSS as a whole is no gate: it counts file pages (shared libraries, weights and the cache's memory-mapped
  entries), which the kernel drops and reads back at will (MuseTalk's RSS once stepped +105.7 MiB between runs).
- The server hung (no answer for over a minute) in 4 of about 16 wardrobe passes, in runs whose Load Video frame
  cap ended the decode early. gdb: the worker freeing the H.264 decoder (avcodec_free_context, holding the GIL)
  while the decoder's frame thread "av:h264:df0" waited for the GIL in PyAV's Python log callback, which `import
  torchvision` turns on (av.logging.set_level(ERROR)). The pack now routes FFmpeg's logs to PyAV's no-op callback
  before it opens a codec (`engines.export.reader.quiet_ffmpeg_logs`; tests/unit/test_export_libav_logging.py).

Proof that it fails a leak: with ``BA_TEST_MEMORY_LEAK=<fraction>`` the server gets the test-only custom node of
`tests/fixtures/leak_probe` (never part of the pack) and every prompt one node keeping that fraction of one run's
inputs alive per run (the table's last column: 1.0 fails every family by about twice its bound).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from scripts.workflow.api import apply_overrides, load_workflow
from tests.fixtures.server_memory import free, memory
from tests.workflow_cases import case_for, shipped_api_twin

RUNS = 32
WARMUP = 8                 # runs 0-7 (two misses among them): kernel, allocator and library caches settle
BOUND_FRACTION = 0.5       # slope bound: half of one run's inputs, per run (a leak of one run's inputs reads ~0.75-1x)
LEAK_ENV = "BA_TEST_MEMORY_LEAK"   # a fraction of one run's inputs leaked per run on purpose (the gate must fail)
PAST_END = 1000.0          # a duration (s) past the end of every test file: the whole file
LEAK_PROBE = Path(__file__).resolve().parents[1] / "fixtures" / "leak_probe"


def _injected_leak() -> float:
    value = os.environ.get(LEAK_ENV, "")
    return float(value) if value else 0.0


@pytest.fixture(scope="module")
def classic(comfy, tmp_path_factory):
    """A server of its own with ComfyUI's classic cache, on the session server's models folder; with the test-only
    leaking node of `tests/fixtures/leak_probe` in its custom_nodes when a leak is injected."""
    from scripts.comfyui.server import ComfyServer, ServerError

    base = tmp_path_factory.mktemp("memory")
    if _injected_leak():
        (base / "custom_nodes").mkdir(parents=True, exist_ok=True)
        (base / "custom_nodes" / "broadcast_test_leak_probe").symlink_to(LEAK_PROBE, target_is_directory=True)
    server = ComfyServer(base, python=os.environ.get("BA_PYTHON") or sys.executable,
                         models_dir=comfy.models_dir, extra_args=("--cache-classic",))
    try:
        server.start()
    except ServerError as exc:
        pytest.fail(f"ComfyUI did not start: {exc}")
    yield server
    server.stop()


def _ids(prompt: dict, class_type: str) -> list[str]:
    return sorted((k for k, n in prompt.items() if n["class_type"] == class_type), key=int)


def _set(prompt: dict, class_type: str, values: dict) -> None:
    for node_id in _ids(prompt, class_type):
        prompt[node_id]["inputs"].update(values)


def _miss(i: int) -> bool:
    return i % 4 == 3


def _same_frames(prompt, i: int, file_fps: float, cap: int, frames: int = 0) -> None:
    """The loop's frames, spelled two ways on alternate runs (no target rate / the file's own rate), or on a miss
    run `cap` frames from a new start (new content, the same size every miss). A loop of `frames` frames has
    ``frames - cap + 1`` such windows: once each was asked for, the next misses ask for the first ones again (by
    then the least recently used entries)."""
    if _miss(i):
        windows = frames - cap + 1 if frames else RUNS
        _set(prompt, "BroadcastLoadVideo", {"frame_cap": cap, "skip_first_frames": (i // 4) % windows,
                                            "target_fps": 0.0})
    else:
        _set(prompt, "BroadcastLoadVideo", {"frame_cap": 0, "target_fps": file_fps if i % 2 else 0.0})


def _same_audio(prompt, i: int, duration: float, new: float, step: float) -> None:
    """`duration` seconds of speech (0: the whole file), spelled two ways on alternate runs, or on a miss run `new`
    seconds from a new start (`step` later every miss: new samples, the same length every miss)."""
    if _miss(i):
        _set(prompt, "BroadcastLoadAudio", {"start_seconds": step * (i // 4), "duration_seconds": new})
        return
    if duration:
        value = duration + (1e-7 if i % 2 else 0.0)       # the same samples: the duration is rounded to samples
    else:
        value = PAST_END if i % 2 else 0.0                # past the end: the whole file
    _set(prompt, "BroadcastLoadAudio", {"start_seconds": 0.0, "duration_seconds": value})


def _export(prompt, i):
    _set(prompt, "BroadcastLoadVideo", {"frame_cap": 6 + i % 4})     # a few frames: no pack cache here


def _wardrobe(prompt, i):
    # The mask video and the clip alike (24 fps files); the mask cache is keyed by the clip's frames. Its misses
    # take the first 5, 4, 3, 2 and 7 frames, then again (hits: 6): the few new sizes weigh little against its
    # 16 MiB of inputs per run.
    if _miss(i):
        _set(prompt, "BroadcastLoadVideo", {"frame_cap": (5, 4, 3, 2, 7)[(i // 4) % 5], "target_fps": 0.0})
    else:
        _same_frames(prompt, i, 24.0, 0)
        _set(prompt, "BroadcastLoadVideo", {"frame_cap": 6})


def _tts(prompt, i):
    _same_audio(prompt, i, 0.0, 2.0, 0.1)                            # the voice prompt of the reference clip
    _set(prompt, "BroadcastOmniVoiceSpeak", {"seed": i % 2})


def _musetalk(prompt, i):
    _same_frames(prompt, i, 10.0, 2, frames=6)                       # the avatar (a 6-frame loop at 10 fps)
    _same_audio(prompt, i, 0.4, 0.3, 0.02)


def _ditto(prompt, i):
    _same_frames(prompt, i, 25.0, 4, frames=10)                      # the packet (a 10-frame loop at 25 fps)
    _same_audio(prompt, i, 0.6, 0.4, 0.04)                           # HuBERT features


# family -> (shipped workflow, what changes between runs, overrides on top of the case's: the smallest inputs)
FAMILIES = {
    "export": ("demo_export", _export, {}),
    "wardrobe": ("wardrobe_mask_check", _wardrobe, {}),
    "tts": ("tts_master", _tts, {"Script.text": "Buenas noches, estas son las noticias de hoy.",
                                 "Speak.preset": "custom", "Speak.steps": 2}),
    "musetalk": ("musetalk_lipsync", _musetalk, {}),
    "ditto": ("ditto_talking_head", _ditto, {"Ditto Motion.steps_preset": "4"}),
}


def _decoded_bytes(comfy, prompt) -> int:
    """Bytes one run decodes (float32 frames and samples): what a leak of one run's inputs would add."""
    from engines.export import clips, reader

    total = 0
    for node_id in _ids(prompt, "BroadcastLoadVideo"):
        inputs = prompt[node_id]["inputs"]
        info = reader.probe(comfy.input_dir / inputs["video"])
        n = reader.planned_count(info, int(inputs["frame_cap"]), int(inputs["skip_first_frames"]),
                                 float(inputs["target_fps"]))
        total += n * info.width * info.height * 3 * 4
    for node_id in _ids(prompt, "BroadcastLoadAudio"):
        inputs = prompt[node_id]["inputs"]
        audio = clips.load_audio(comfy.input_dir / inputs["audio_file"], inputs["audio_file"],
                                 start_seconds=float(inputs["start_seconds"]),
                                 duration_seconds=float(inputs["duration_seconds"]) or None)
        total += audio["waveform"].numel() * 4
    return total


def theil_sen(values: list) -> float:
    """Median of the slopes between every two runs (bytes per run): one late jump or drop of a library's cache
    moves it little, a leak moves every pair."""
    pairs = sorted((values[b] - values[a]) / (b - a) for a in range(len(values)) for b in range(a + 1, len(values)))
    mid = len(pairs) // 2
    return pairs[mid] if len(pairs) % 2 else (pairs[mid - 1] + pairs[mid]) / 2


@pytest.mark.parametrize("family", list(FAMILIES))
def test_memory_flat_over_repeated_runs(family, classic):
    comfy = classic
    stem, vary, extra = FAMILIES[family]
    info = comfy.object_info()
    base, _ = load_workflow(shipped_api_twin(stem))
    base = apply_overrides(base, {**case_for(stem).prepare(comfy), **extra}, info)
    free(comfy, free_memory=True)          # the previous family's models unloaded, its outputs dropped

    first = {k: {**n, "inputs": dict(n["inputs"])} for k, n in base.items()}
    vary(first, 0)
    per_run = _decoded_bytes(comfy, first)   # one (hit) run's decoded frames and samples
    leak = int(_injected_leak() * per_run)
    anon, rss, loaded, handles, seconds = [], [], [], [], []
    for i in range(RUNS):
        prompt = {k: {**n, "inputs": dict(n["inputs"])} for k, n in base.items()}
        vary(prompt, i)
        if leak:
            prompt["leak"] = {"class_type": "BroadcastTestLeak", "inputs": {"nbytes": leak, "run": i}}
        start = time.monotonic()
        comfy.run(prompt, timeout=300)
        seconds.append(time.monotonic() - start)
        comfy.post("/history", {"clear": True})   # core keeps every prompt's entry (up to 10000): not the pack's
        report = memory(comfy, trim=True)
        rss.append(report["rss_bytes"])
        anon.append(report.get("rss_anon_bytes", report["rss_bytes"]))   # no /proc: RSS as a whole
        loaded.append(report["loaded_models"])
        handles.append(report["pack_models"])

    later = anon[WARMUP:]
    growth = theil_sen(later)
    fraction = BOUND_FRACTION
    bound = fraction * per_run
    kib, mib = 1 << 10, 1 << 20
    print(f"\n[memory] {family} ({stem}): {RUNS} runs in {sum(seconds):.1f} s; anonymous memory after the "
          f"{WARMUP}-run warm-up grows {growth / kib:+.1f} KiB/run (median pair slope), bound {bound / kib:.1f} KiB/run = {fraction} x one run's inputs "
          f"({per_run / kib:.0f} KiB){f'; injected leak {leak / kib:.1f} KiB/run' if leak else ''}; "
          f"{(later[-1] - later[0]) / mib:+.1f} MiB over runs {WARMUP}-{RUNS - 1}; "
          f"loaded models {loaded}; live pack models {handles}")
    print(f"[memory] {family}: anonymous MiB per run {[round(a / mib, 1) for a in anon]}; "
          f"RSS MiB per run {[round(r / mib, 1) for r in rss]}")

    assert max(loaded[WARMUP:]) <= loaded[WARMUP - 1], f"{family}: loaded models grew: {loaded}"
    assert max(handles[WARMUP:]) <= handles[WARMUP - 1], f"{family}: live model handles grew: {handles}"
    assert growth <= bound, (
        f"{family}: the server's anonymous memory grows {growth / kib:.1f} KiB per run after the warm-up, more "
        f"than {bound / kib:.1f} KiB ({fraction} x one run's {per_run / kib:.0f} KiB of inputs): "
        f"{[round(a / mib, 1) for a in anon]} MiB")

    after_unload = free(comfy)
    assert after_unload["loaded_models"] == 0, f"{family}: /free unload_models left {after_unload}"
    after_free = free(comfy, free_memory=True)
    assert after_free["pack_models"] == 0, (
        f"{family}: after /free free_memory, model handles are still alive: {after_free['pack_model_names']}")
    print(f"[memory] {family}: /free unload_models -> {after_unload['loaded_models']} loaded (had {loaded[-1]}); "
          f"free_memory -> {after_free['pack_models']} live pack models (had {handles[-1]}), "
          f"RSS {after_free['rss_bytes'] / mib:.1f} MiB")
