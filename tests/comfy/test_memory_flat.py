"""Memory stays flat over repeated runs: each family's shipped workflow queued 20 times through a real server.

Each family's API twin runs on the tiny models (the case's own `prepare`, as the `comfy run` test does) with the
smallest inputs (a few frames, under a second of speech, one sentence). Every run's inputs differ from the run
before, so ComfyUI re-executes everything downstream of the loaders; most runs ask for content the pack has cached
(two spellings of the same content take turns: a target rate equal to the file's own or none, a duration past the
end or none: a hit in the avatar, packet, voice prompt, audio feature or mask cache), and every fourth run asks for
new content (a miss: a new entry is built and stored). The model loaders' inputs never change, so the models stay
loaded as in a user's session.

The server is this module's own, with ComfyUI's classic cache (`--cache-classic`: only the latest prompt's outputs
are kept; 0.3.75's default): 0.33.0's default RAM-pressure cache keeps every earlier run's outputs while RAM allows,
by design, which would grow RSS without any leak. After each run the test reads `/broadcast_avatar/memory?trim=1`
(nodes/comfy_bridge.py): host RSS of the server process after a garbage collection and glibc's malloc_trim (so the
allocator's high-water marks do not count), the models in ComfyUI's model management, the pack's live model
handles.

Checked, per family:
- RSS after the warm-up (the first `WARMUP` runs) stays within `RSS_BOUND` of its peak during the warm-up, and RSS in
  the second half within it of its peak in the first; printed beside it is what a leak of one run's decoded frames and samples would add over the
  runs measured;
- loaded models and live model handles never exceed their number after the warm-up;
- POST /free with ``unload_models`` leaves no model loaded in ComfyUI's model management, and with ``free_memory``
  (ComfyUI drops its outputs) no model handle of the pack stays alive: nothing else holds one.
The figures are printed (`pytest -s` shows them).

Opt-in (`BA_TEST_MEMORY=1`), not in CI yet: on the 2-core CI machine the RSS figure is not yet a stable gate. In
four runs of the same code MuseTalk grew +6.6, +58.2 and +105.7 MiB (RSS) and +4.5 MiB (anonymous memory only): the
large steps are file pages of the cache's memory-mapped frames (cold boots), which RSS counts; anonymous memory in
turn moved +40.9 MiB for TTS in one run. A bound that no leak passes and no noise fails needs a steadier measure
(for example per-run anonymous growth fitted over more runs); until then it runs by hand.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from scripts.workflow_api import apply_overrides, load_workflow
from tests.fixtures.server_memory import free, memory
from tests.workflow_cases import case_for, shipped_api_twin

pytestmark = pytest.mark.skipif(not os.environ.get("BA_TEST_MEMORY"),
                                reason="opt-in (BA_TEST_MEMORY=1): RSS is not yet a stable gate on CI's machine (docstring)")

RUNS = 20
WARMUP = 4                 # runs 0-3, the first miss included
RSS_BOUND = 24 << 20       # bytes of RSS growth allowed after the warm-up
PAST_END = 1000.0          # a duration (s) past the end of every test file: the whole file


@pytest.fixture(scope="module")
def classic(comfy, tmp_path_factory):
    """A server of its own with ComfyUI's classic cache, on the session server's models folder."""
    from scripts.comfy_server import ComfyServer, ServerError

    server = ComfyServer(tmp_path_factory.mktemp("memory"), python=os.environ.get("BA_PYTHON") or sys.executable,
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


def _same_frames(prompt, i: int, file_fps: float, cap) -> None:
    """The loop's frames, spelled two ways on alternate runs (no target rate / the file's own rate), or `cap`
    frames (a new entry) on a miss run."""
    if _miss(i):
        _set(prompt, "BroadcastLoadVideo", {"frame_cap": cap, "target_fps": 0.0})
    else:
        _set(prompt, "BroadcastLoadVideo", {"frame_cap": 0, "target_fps": file_fps if i % 2 else 0.0})


def _same_audio(prompt, i: int, duration: float, new: float) -> None:
    """`duration` seconds of speech (0: the whole file), spelled two ways on alternate runs, or `new` on a miss run."""
    if _miss(i):
        value = new
    elif duration:
        value = duration + (1e-7 if i % 2 else 0.0)       # the same samples: the duration is rounded to samples
    else:
        value = PAST_END if i % 2 else 0.0                # past the end: the whole file
    _set(prompt, "BroadcastLoadAudio", {"duration_seconds": value})


def _export(prompt, i):
    _set(prompt, "BroadcastLoadVideo", {"frame_cap": 6 + i % 5})     # a few frames: no pack cache here


def _wardrobe(prompt, i):
    # The mask video and the clip alike (24 fps files); the mask cache is keyed by the clip's frames.
    _same_frames(prompt, i, 24.0, max(2, 5 - i // 4))
    if not _miss(i):
        _set(prompt, "BroadcastLoadVideo", {"frame_cap": 6})


def _tts(prompt, i):
    _same_audio(prompt, i, 0.0, 2.0 + 0.05 * i)                       # the voice prompt of the reference clip
    _set(prompt, "BroadcastOmniVoiceSpeak", {"seed": i % 2})


def _musetalk(prompt, i):
    _same_frames(prompt, i, 10.0, max(2, 5 - i // 8))                 # the avatar (a 6-frame loop at 10 fps)
    _same_audio(prompt, i, 0.4, 0.3 + 0.01 * i)


def _ditto(prompt, i):
    _same_frames(prompt, i, 25.0, max(2, 9 - i // 8))                 # the packet (a 10-frame loop at 25 fps)
    _same_audio(prompt, i, 0.6, 0.4 + 0.01 * i)                       # HuBERT features


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


@pytest.mark.parametrize("family", list(FAMILIES))
def test_memory_flat_over_repeated_runs(family, classic):
    comfy = classic
    stem, vary, extra = FAMILIES[family]
    info = comfy.object_info()
    base, _ = load_workflow(shipped_api_twin(stem))
    base = apply_overrides(base, {**case_for(stem).prepare(comfy), **extra}, info)
    free(comfy, free_memory=True)          # the previous family's models unloaded, its outputs dropped

    rss, loaded, handles, seconds, leak = [], [], [], [], 0
    for i in range(RUNS):
        prompt = {k: {**n, "inputs": dict(n["inputs"])} for k, n in base.items()}
        vary(prompt, i)
        start = time.monotonic()
        comfy.run(prompt, timeout=300)
        seconds.append(time.monotonic() - start)
        report = memory(comfy, trim=True)
        rss.append(report["rss_bytes"])
        loaded.append(report["loaded_models"])
        handles.append(report["pack_models"])
        leak = max(leak, _decoded_bytes(comfy, prompt))

    measured = RUNS - WARMUP
    # Against the highest RSS before: allocator and library caches settle in the first runs (a dip there is no
    # baseline); a leak grows past any earlier peak with every run.
    growth = max(rss[WARMUP:]) - max(rss[:WARMUP])
    second_half = max(rss[RUNS // 2:]) - max(rss[:RUNS // 2])
    mib = 1 << 20
    print(f"\n[memory] {family} ({stem}): {RUNS} runs in {sum(seconds):.1f} s; RSS peak in the warm-up "
          f"{max(rss[:WARMUP]) / mib:.1f} MiB, growth over the next {measured} runs {growth / mib:+.1f} MiB "
          f"(second half {second_half / mib:+.1f} MiB; bound {max(RSS_BOUND, leak * measured // 2) / mib:.0f} MiB; a leak of one run's inputs "
          f"would add {leak * measured / mib:.1f} MiB); loaded models {loaded}; live pack models {handles}; "
          f"RSS per run (MiB) {[round(r / mib, 1) for r in rss]}")

    assert max(loaded[WARMUP:]) <= loaded[WARMUP - 1], f"{family}: loaded models grew: {loaded}"
    assert max(handles[WARMUP:]) <= handles[WARMUP - 1], f"{family}: live model handles grew: {handles}"
    # The bound is RSS_BOUND, or half of what leaking one run's inputs would add where that is larger (export and
    # wardrobe read hundreds of MiB over the runs): either way such a leak cannot pass, and the allocator's noise
    # (up to ~20 MiB measured on 2 cores) does not fail a family whose runs move that much memory.
    bound = max(RSS_BOUND, leak * measured // 2)
    assert growth <= bound and second_half <= bound, (
        f"{family}: server memory grew {growth / mib:.1f} MiB over {measured} runs after the warm-up "
        f"({second_half / mib:.1f} MiB in the second half), more than {bound / mib:.0f} MiB")

    after_unload = free(comfy)
    assert after_unload["loaded_models"] == 0, f"{family}: /free unload_models left {after_unload}"
    after_free = free(comfy, free_memory=True)
    assert after_free["pack_models"] == 0, (
        f"{family}: after /free free_memory, model handles are still alive: {after_free['pack_model_names']}")
    print(f"[memory] {family}: /free unload_models -> {after_unload['loaded_models']} loaded (had {loaded[-1]}); "
          f"free_memory -> {after_free['pack_models']} live pack models (had {handles[-1]}), "
          f"RSS {after_free['rss_bytes'] / mib:.1f} MiB")
