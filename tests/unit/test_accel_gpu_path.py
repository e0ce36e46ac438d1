"""The GPU user's code path, run on the CPU: each family's engine in bf16 (fp16 where CPU kernels allow), through
accelerated runners, and with its weights on another device than its inputs (the device-placement audit).

The audit puts the weights on ``meta`` and lets the engine follow them, as it follows them onto a GPU; any op
mixing devices is recorded (engines/accel/audit.py). A control run (a wrong explicit device) shows the audit
catches what it is for.
"""
import logging

import numpy as np
import pytest
import torch

from engines.accel import AUTO_ORDER, BuildOptions, auto_order, cosine
from engines.accel.audit import audit_devices, move_weights
from engines.common.audio import to_mono
from engines.common.cache import ContentCache
from engines.ditto.avatar import AvatarSettings
from engines.ditto.keypoints import DriveSettings
from engines.ditto.motion import MotionSettings
from engines.ditto.render import RenderSettings
from engines.ditto.accel import accelerate_ditto, networks as ditto_networks
from engines.ditto.pipeline import DittoPipeline
from engines.accel.onnx_export import NAMESPACE as ONNX_NAMESPACE
from engines.musetalk.accel import accelerate_musetalk, networks as musetalk_networks
from engines.musetalk.avatar import build_avatar
from engines.musetalk.face_track import HaarDetector, track_faces
from engines.musetalk.lipsync import LipSyncSettings, lipsync, lipsync_chunks
from engines.musetalk.loader import load_musetalk
from tests.fixtures.tiny_ditto import build_tiny_ditto, portrait, speech
from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk, speech_like

FPS = 10.0


# -- MuseTalk ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mt_dir(tmp_path_factory):
    return build_tiny_musetalk(tmp_path_factory.mktemp("musetalk") / "tiny")


@pytest.fixture(scope="module")
def mt_loop():
    frames, _ = astronaut_loop(4)
    return frames, track_faces(frames, HaarDetector(), every=2, proxy_size=160)


def _mt_render(folder, loop, dtype, backend=None, tmp=None):
    nets = load_musetalk(folder, dtype)
    frames, track = loop
    avatar = build_avatar(nets, frames, track, FPS)
    if backend:
        accelerate_musetalk(nets, backend, BuildOptions(batches=(4,), cache=ContentCache(tmp)))
    return nets, avatar, lipsync(nets, avatar, speech_like(0.6), LipSyncSettings(batch_size=4))


@pytest.fixture(scope="module")
def mt_fp32(mt_dir, mt_loop):
    return _mt_render(mt_dir, mt_loop, torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_musetalk_low_precision_runs_the_gpu_code(mt_dir, mt_loop, mt_fp32, dtype):
    nets, _, frames = _mt_render(mt_dir, mt_loop, dtype)
    assert next(nets.unet.parameters()).dtype == dtype
    assert frames.shape == mt_fp32[2].shape
    diff = (frames.float() - mt_fp32[2].float()).abs()
    # ran in the low precision (not silently fp32) and close to the fp32 frames on average (random tiny networks
    # amplify rounding at a few mouth pixels)
    assert diff.max() > 0 and diff.mean() < 0.01, (diff.max(), diff.mean())


def test_musetalk_pipelined_and_sequential_render_the_same_frames(mt_fp32):
    nets, avatar, frames = mt_fp32                     # LipSyncSettings() is pipelined by default
    times = {}
    chunks = list(lipsync_chunks(nets, avatar, speech_like(0.6), LipSyncSettings(batch_size=4, pipelined=False),
                                 stage_times=times))
    assert torch.equal(torch.cat(chunks).float() / 255, frames)      # uint8 chunks; `lipsync` is their IMAGE
    assert set(times) == {"audio", "unet", "vae", "paste"}


def test_musetalk_onnxruntime_backend_renders_the_eager_frames(mt_dir, mt_loop, mt_fp32, tmp_path):
    nets, _, frames = _mt_render(mt_dir, mt_loop, torch.float32, "onnxruntime", tmp_path)
    assert {r.backend for r in nets.runners.values()} == {"onnxruntime"}
    assert all(r.parity > 0.9999 for r in nets.runners.values())
    assert (frames.float() - mt_fp32[2].float()).abs().max() < 2e-3


def test_musetalk_cpu_auto_runs_eager_with_its_reasons_and_onnxruntime_exports_once(mt_dir, mt_loop, mt_fp32,
                                                                                     tmp_path, caplog):
    """What a user with backend=auto gets on a CPU (eager for both networks, each with the measurement behind it),
    and the ONNX Runtime UNet one explicit choice away: parity with eager fp32 and one cached export reused."""
    with caplog.at_level(logging.INFO, "broadcast_avatar.accel"):
        nets, _, frames = _mt_render(mt_dir, mt_loop, torch.float32, "auto", tmp_path)
    unet, vae = nets.runners["unet"], nets.runners["vae_decode"]
    assert (unet.backend, vae.backend) == ("eager", "eager")
    assert unet.summary.startswith("musetalk_unet: auto picked eager (fp32); auto order on cpu: eager (ONNX Runtime "
                                   "measured 0.79x")
    assert vae.summary.startswith("musetalk_vae_decoder: auto picked eager (fp32); auto order on cpu: eager (ONNX "
                                  "Runtime measured 1.06x")
    logged = [r.getMessage() for r in caplog.records]
    assert sum("musetalk_unet: auto picked eager" in m for m in logged) == 1
    assert not any("exporting to ONNX" in m for m in logged)          # auto on a CPU exports nothing
    assert torch.equal(frames, mt_fp32[2])
    # explicit onnxruntime: parity with eager fp32 (the build's check and a fresh batch of another size), one export
    with caplog.at_level(logging.INFO, "broadcast_avatar.accel"):
        ort = load_musetalk(mt_dir)
        accelerate_musetalk(ort, "onnxruntime", BuildOptions(batches=(4,), cache=ContentCache(tmp_path)))
    runner = ort.runners["unet"]
    assert runner.backend == "onnxruntime" and runner.parity >= 0.9999
    net = musetalk_networks(ort)["unet"]
    lat, audio = torch.randn(3, 8, 32, 32), torch.randn(3, 50, ort.audio_width)
    with torch.inference_mode():
        assert cosine(runner(lat, audio), net.module(lat, audio)) >= 0.9999
    assert sum("musetalk_unet: exporting to ONNX" in r.getMessage() for r in caplog.records) == 1
    # a second load of the same files reuses the export (the content-hash cache, keyed by the files' fingerprint)
    again = load_musetalk(mt_dir)
    accelerate_musetalk(again, "onnxruntime", BuildOptions(batches=(4,), cache=ContentCache(tmp_path)))
    assert again.runners["unet"].backend == "onnxruntime" and ", reused, " in again.runners["unet"].summary
    assert len([p for p in (tmp_path / ONNX_NAMESPACE).iterdir() if not p.name.startswith(".")]) == 2  # UNet + VAE
    # the same networks on a CUDA device keep the GPU order (auto_order reads the device type only)
    for n in musetalk_networks(nets).values():
        assert auto_order(n, torch.device("cuda"))[0] == AUTO_ORDER["cuda"]


def test_musetalk_in_bf16_runs_eager_and_an_onnxruntime_request_names_why(mt_dir):
    nets = load_musetalk(mt_dir, torch.bfloat16)
    accelerate_musetalk(nets, "auto", BuildOptions(batches=(4,)))
    assert {r.backend for r in nets.runners.values()} == {"eager"}
    accelerate_musetalk(nets, "onnxruntime", BuildOptions(batches=(4,)))
    unet = nets.runners["unet"]
    assert unet.backend == "eager" and "onnxruntime has no bf16 kernels" in unet.summary


def test_musetalk_weights_elsewhere_mix_no_devices(mt_dir, mt_loop):
    nets = load_musetalk(mt_dir)
    frames, track = mt_loop
    avatar = build_avatar(nets, frames, track, FPS)
    move_weights(nets, "meta")
    # sequential: a dispatch mode is per thread, and the pipelined order runs the same stage code in worker threads
    with audit_devices() as audit:
        out = lipsync(nets, avatar, speech_like(0.6), LipSyncSettings(batch_size=4, pipelined=False))
    assert dict(audit.mixed) == {} and out.shape[0] == 6
    # control: told the wrong device, the same run mixes devices and the audit (or the op) says so
    with audit_devices() as audit:
        try:
            lipsync(nets, avatar, speech_like(0.6), LipSyncSettings(batch_size=4, pipelined=False),
                    device=torch.device("cpu"))
            caught = False
        except RuntimeError as exc:
            caught = "device" in str(exc)
    assert audit.mixed or caught


# -- Ditto -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dt_dir(tmp_path_factory):
    return build_tiny_ditto(tmp_path_factory.mktemp("ditto") / "tiny")


def _dt_chain(pipeline, seconds=1.0):
    avatar, _ = pipeline.prepare_avatar(portrait(), AvatarSettings(), None)
    wav, _ = to_mono(speech(seconds), 16000)
    feats = pipeline.audio_features(wav, None)
    motion = pipeline.motion(avatar, feats, MotionSettings(steps=4, seed=3, overlap=5), DriveSettings(), wav)
    frames = torch.cat(list(pipeline.render(avatar, motion, RenderSettings(batch_size=4)))).float() / 255   # bytes
    return motion, frames


@pytest.fixture(scope="module")
def dt_fp32(dt_dir):
    return _dt_chain(DittoPipeline(dt_dir))


def test_ditto_pipelined_and_sequential_render_the_same_frames(dt_dir, dt_fp32):
    pipeline = DittoPipeline(dt_dir)
    avatar, _ = pipeline.prepare_avatar(portrait(), AvatarSettings(), None)
    motion = dt_fp32[0]
    motion.avatar_key = avatar.key
    frames = torch.cat(list(pipeline.render(avatar, motion, RenderSettings(batch_size=4, pipelined=False))))
    assert torch.equal(frames.float() / 255, dt_fp32[1])


@pytest.mark.parametrize("cast_weights", [False, True])
def test_ditto_bf16_runs_every_stage(dt_dir, dt_fp32, cast_weights):
    """precision bf16 (the renderer under bf16 autocast), and the networks' weights themselves cast to bf16 (what
    once failed: LMDM fed fp32 samples after its first step, the renderer fed fp32 inputs)."""
    pipeline = DittoPipeline(dt_dir, precision="bf16")
    if cast_weights:
        pipeline.nets.to(torch.bfloat16)
        assert pipeline.weights_dtype == torch.bfloat16
    motion, frames = _dt_chain(pipeline)
    assert frames.shape == dt_fp32[1].shape and frames.dtype == torch.float32
    diff = (frames - dt_fp32[1]).abs()
    corr = np.corrcoef(motion.motion.ravel(), dt_fp32[0].motion.ravel())[0, 1]
    # random tiny networks amplify rounding at a few pixels; on average the frames agree
    assert diff.max() > 0 and diff.mean() < 0.02 and corr > 0.98, (diff.max(), diff.mean(), corr)


def test_ditto_onnxruntime_runners_for_all_six_networks(dt_dir, tmp_path):
    pipeline = DittoPipeline(dt_dir)
    opts = BuildOptions(batches=(2,), cache=ContentCache(tmp_path))
    descriptions = ditto_networks(pipeline.nets, weights_id=pipeline.fingerprint)
    assert set(descriptions) == {"motion_extractor", "appearance", "lmdm", "stitch", "warp", "decoder"}
    summaries = accelerate_ditto(pipeline.nets, "onnxruntime", opts, weights_id=pipeline.fingerprint,
                                 which=tuple(descriptions))
    runners = pipeline.nets.runners
    assert {r.backend for r in runners.values()} == {"onnxruntime"}, summaries
    assert all(r.parity > 0.9999 for r in runners.values()), summaries
    for name, net in descriptions.items():          # another batch than the trace's: the batch axis is dynamic
        x = net.example(3)
        with torch.inference_mode():
            ref = net.module(*x)
        got = runners[name](*x)
        for r, g in zip(ref if isinstance(ref, tuple) else (ref,), got if isinstance(got, tuple) else (got,)):
            assert cosine(r, g) > 0.9999, name


def test_ditto_accelerated_chain_matches_eager(dt_dir, dt_fp32, tmp_path):
    pipeline = DittoPipeline(dt_dir)
    summaries = pipeline.accelerate("onnxruntime", BuildOptions(batches=(1, 4), cache=ContentCache(tmp_path)))
    assert len(summaries) == 4 and all(": onnxruntime" in s for s in summaries)
    motion, frames = _dt_chain(pipeline)
    assert np.abs(motion.motion - dt_fp32[0].motion).max() < 1e-3
    assert (frames - dt_fp32[1]).abs().max() < 5e-3


def test_ditto_weights_elsewhere_mix_no_devices(dt_dir):
    pipeline = DittoPipeline(dt_dir)
    avatar, _ = pipeline.prepare_avatar(portrait(), AvatarSettings(), None)
    wav, _ = to_mono(speech(0.8), 16000)
    feats = pipeline.audio_features(wav, None)
    move_weights(pipeline.nets, "meta")
    pipeline.device = torch.device("meta")           # as a GPU user's pipeline runs on "cuda"
    with audit_devices() as audit:
        motion = pipeline.motion(avatar, feats, MotionSettings(steps=2, seed=3, overlap=5), DriveSettings(),
                                 wav)
        chunks = list(pipeline.render(avatar, motion, RenderSettings(batch_size=4, pipelined=False)))
        pipeline.prepare_avatar(portrait(), AvatarSettings(), None)
    assert dict(audit.mixed) == {}
    assert sum(c.shape[0] for c in chunks) == len(motion.kp_driven)


@pytest.mark.parametrize("guidance", [2.0, 3.5])
def test_ditto_motion_runs_the_lmdm_runner_built_for_this_run(dt_dir, tmp_path, guidance):
    """What the Motion node's handle builds before sampling (`ready_for_motion`): LMDM's runner at batch 1 and this
    run's guidance; the first motion after the build runs through it (before: only a Render built one, at the
    default guidance, so the first Motion ran eager)."""
    pipeline = DittoPipeline(dt_dir)
    summaries = accelerate_ditto(pipeline.nets, "onnxruntime", BuildOptions(batches=(4,), cache=ContentCache(tmp_path)),
                                 guidance=guidance, weights_id=pipeline.fingerprint, which=("lmdm",))
    runner = pipeline.nets.runners["lmdm"]
    assert summaries[0].startswith(f"ditto_lmdm_g{guidance:g}: onnxruntime") and set(pipeline.nets.runners) == {"lmdm"}
    calls = []
    real = runner.fn
    runner.fn = lambda *xs: (calls.append(xs[0].shape[0]), real(*xs))[1]
    avatar, _ = pipeline.prepare_avatar(portrait(), AvatarSettings(), None)
    wav, _ = to_mono(speech(0.6), 16000)
    settings = MotionSettings(steps=2, seed=3, overlap=5, guidance=guidance)
    eager = DittoPipeline(dt_dir).motion(avatar, pipeline.audio_features(wav, None), settings, DriveSettings(), wav)
    motion = pipeline.motion(avatar, pipeline.audio_features(wav, None), settings, DriveSettings(), wav)
    assert calls and set(calls) == {1}
    assert np.abs(motion.motion - eager.motion).max() < 1e-3
