"""The whole engine on tiny random networks in the upstream layout: loading, avatar cache, lip-sync."""
import shutil

import pytest
import torch

from engines.common.cache import ContentCache
from engines.common.errors import InputError, ModelFilesMissing
from engines.common.frames import frames_to_uint8
from engines.musetalk.avatar import build_avatar, crop_boxes, CropSettings
from engines.musetalk.blend import resize_matrix
from engines.musetalk.face_track import track_from_box, track_faces, HaarDetector
from engines.musetalk.lipsync import LipSyncSettings, frame_count, lipsync, lipsync_chunks, run_padded
from engines.musetalk.loader import load_musetalk
from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk, speech_like

FPS = 10.0   # fewer frames per second of audio keeps the tiny runs short


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_musetalk(tmp_path_factory.mktemp("musetalk") / "tiny")


@pytest.fixture(scope="module")
def nets(model_dir):
    return load_musetalk(model_dir)


@pytest.fixture(scope="module")
def loop():
    frames, _ = astronaut_loop(4)
    return frames, track_faces(frames, HaarDetector(), every=2, proxy_size=160)


@pytest.fixture(scope="module")
def avatar(nets, loop):
    frames, track = loop
    return build_avatar(nets, frames, track, FPS)


def test_loader_builds_the_three_networks_from_the_upstream_layout(nets):
    assert nets.version == "v1.5"
    assert nets.unet.config.in_channels == 8 and nets.unet.config.cross_attention_dim == 384
    assert nets.scaling_factor == pytest.approx(0.18215)      # absent from sd-vae's config: the SD default
    assert nets.whisper.config.d_model == 384
    assert not any(p.is_meta for p in nets.parameters())


def test_weights_come_from_the_files_including_legacy_vae_keys(nets, model_dir):
    vae = torch.load(model_dir / "sd-vae" / "diffusion_pytorch_model.bin", weights_only=True)
    assert "encoder.mid_block.attentions.0.query.weight" in vae          # SD-era names, renamed on load
    assert torch.equal(nets.vae.state_dict()["encoder.mid_block.attentions.0.to_q.weight"],
                       vae["encoder.mid_block.attentions.0.query.weight"])
    unet = torch.load(model_dir / "musetalkV15" / "unet.pth", weights_only=True)
    assert all(torch.equal(v, unet[k]) for k, v in nets.unet.state_dict().items())
    whisper = torch.load(model_dir / "whisper" / "pytorch_model.bin", weights_only=True)
    assert torch.equal(nets.whisper.state_dict()["layers.3.fc2.weight"], whisper["model.encoder.layers.3.fc2.weight"])


def test_loader_accepts_a_subfolder_of_the_layout(model_dir):
    assert load_musetalk(model_dir / "whisper").version == "v1.5"


def test_missing_model_files_are_all_named(model_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    (broken / "musetalkV15" / "unet.pth").unlink()
    (broken / "whisper" / "preprocessor_config.json").unlink()
    with pytest.raises(ModelFilesMissing) as err:
        load_musetalk(broken)
    assert "musetalkV15/unet.safetensors or musetalkV15/unet.pth" in str(err.value)
    assert "whisper/preprocessor_config.json" in str(err.value)
    assert err.value.input_name == "model_name"


def test_a_feature_extractor_at_another_sample_rate_is_refused(model_dir, tmp_path):
    import json

    other = tmp_path / "other-rate"
    shutil.copytree(model_dir, other)
    cfg_path = other / "whisper" / "preprocessor_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["sampling_rate"] = 22050
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="model_name.*16000 Hz.*22050"):
        load_musetalk(other)


def test_avatar_latents_and_boxes(avatar, loop):
    frames, track = loop
    assert avatar.latents.shape == (4, 8, 32, 32) and torch.isfinite(avatar.latents).all()
    assert avatar.boxes.dtype == torch.int64 and avatar.boxes.shape == (4, 4)
    b = avatar.boxes
    assert (b[:, 0] >= 0).all() and (b[:, 2] <= 192).all() and (b[:, 3] <= 256).all()
    # the crop reaches below the face box (the chin) and a little above it
    assert (b[:, 3] > track.boxes[:, 3]).all() and (b[:, 1] < track.boxes[:, 1]).all()
    # masked and reference halves differ (the masked one lost its lower half)
    assert not torch.allclose(avatar.latents[:, :4], avatar.latents[:, 4:])


def test_second_avatar_run_loads_from_the_cache(nets, loop, tmp_path):
    frames, track = loop
    cache = ContentCache(tmp_path / "cache")
    first = build_avatar(nets, frames, track, FPS, cache=cache)
    second = build_avatar(nets, frames, track, FPS, cache=cache)
    assert not first.from_cache and second.from_cache
    assert torch.equal(first.latents, second.latents) and torch.equal(first.boxes, second.boxes)
    x1, y1, x2, y2 = first.boxes[2].tolist()
    inside = frames.clone()
    inside[2, (y1 + y2) // 2, (x1 + x2) // 2, 0] += 0.01
    assert not build_avatar(nets, inside, track, FPS, cache=cache).from_cache
    # pixels outside every crop do not enter the latents: still a hit, and the avatar shows the new frames
    outside = frames.clone()
    outside[:, 0, 0, :] = 1.0
    assert (first.boxes[:, :2] > 0).all()
    hit = build_avatar(nets, outside, track, FPS, cache=cache)
    assert hit.from_cache and torch.equal(hit.frames.data, frames_to_uint8(outside))   # the loop kept as bytes


def test_avatar_refuses_a_track_of_other_frames(nets, loop):
    frames, _ = loop
    with pytest.raises(InputError, match="face_track"):
        build_avatar(nets, frames, track_from_box((10, 10, 60, 60), 5, 192, 256), FPS)


def test_lipsync_length_follows_the_audio_and_keeps_pixels_outside_the_mouth(nets, avatar):
    audio = speech_like(0.85, 24000)                       # 24 kHz speech: resampled; 0.85 s at 10 fps = 8 frames
    out = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4))
    assert out.shape == (8, 256, 192, 3) and out.dtype == torch.float32
    assert torch.isfinite(out).all() and out.min() >= 0 and out.max() <= 1
    for k in range(8):
        s = k % len(avatar)                                # video time modulo the loop
        x1, y1, x2, y2 = avatar.boxes[s].tolist()
        alpha = resize_matrix(256, y2 - y1) @ avatar.mask @ resize_matrix(256, x2 - x1).T
        outside = torch.ones(256, 192, dtype=torch.bool)
        outside[y1:y2, x1:x2] = alpha == 0
        assert torch.equal(out[k][outside], avatar.frames[s][outside])
        assert not torch.equal(out[k], avatar.frames[s])


def test_batch_size_and_padding_do_not_change_the_result(nets, avatar):
    audio = speech_like(0.5, 16000)                        # 5 frames: batches of 2 leave a partial last batch
    a = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=2))
    b = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=5))
    assert a.shape[0] == 5
    assert torch.allclose(a, b, atol=2e-4)


def test_stride_keeps_keyframes_and_returns_exactly_n_frames(nets, avatar):
    audio = speech_like(0.64, 16000)                       # 8 frames at 12.5 fps; stride 3 -> keyframes 0 3 6 7
    # (also runs ping-pong over the 4-frame loop, at an output rate other than the loop's)
    dense = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4, stride=1, fps=12.5, loop_mode="ping-pong"))
    sparse = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4, stride=3, fps=12.5, loop_mode="ping-pong"))
    assert sparse.shape == dense.shape == (8, 256, 192, 3)
    for k in (0, 3, 6, 7):
        assert torch.allclose(sparse[k], dense[k], atol=2e-4)
    assert not torch.allclose(sparse[4], dense[4], atol=1e-3)


def test_chunk_generator_yields_the_same_frames_in_order(nets, avatar):
    audio = speech_like(0.5, 16000)
    whole = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=3))
    chunks = list(lipsync_chunks(nets, avatar, audio, LipSyncSettings(batch_size=3)))
    assert [c.shape[0] for c in chunks] == [3, 2]
    assert frame_count(audio, LipSyncSettings(batch_size=3), avatar) == 5
    assert torch.cat(chunks).dtype == torch.uint8 and torch.equal(torch.cat(chunks).float() / 255, whole)


def test_bad_lipsync_inputs(nets, avatar):
    with pytest.raises(InputError, match="audio.*at least one video frame"):
        lipsync(nets, avatar, {"waveform": torch.zeros(1, 1, 800), "sample_rate": 16000})   # 50 ms < 100 ms
    with pytest.raises(InputError, match="stride"):
        lipsync(nets, avatar, speech_like(0.5), LipSyncSettings(stride=4))
    with pytest.raises(InputError, match="audio"):
        lipsync(nets, avatar, {"waveform": torch.zeros(1, 1, 100)})


def test_run_padded_pads_with_the_last_row_and_drops_it():
    seen = []

    def fn(x):
        seen.append(x.shape[0])
        return x * 2

    out = run_padded(fn, 4, torch.tensor([[1.0], [2.0]]))
    assert seen == [4] and out.tolist() == [[2.0], [4.0]]


def test_crop_settings_move_the_crop(loop):
    _, track = loop
    tight = crop_boxes(track, CropSettings(top=0.0, bottom=0.0))
    assert torch.allclose(tight.float(), track.boxes.round(), atol=1)


class _Cancelled(Exception):
    pass


def _cancel_after(steps: int):
    from engines.common.progress import Progress

    progress = Progress()

    def check():
        if progress.done >= steps:
            raise _Cancelled()
    progress._check_cancel = check
    return progress


def test_cancelling_the_avatar_leaves_no_cache_entry(nets, loop, tmp_path):
    frames, track = loop
    cache = ContentCache(tmp_path / "cache")
    with pytest.raises(_Cancelled):
        build_avatar(nets, frames, track, FPS, cache=cache, batch_size=2, progress=_cancel_after(2))
    root = tmp_path / "cache"
    assert not root.exists() or not any(p for p in root.rglob("*") if p.is_file())


def test_cancelling_lipsync_stops_the_stream(nets, avatar):
    chunks = []
    with pytest.raises(_Cancelled):
        for chunk in lipsync_chunks(nets, avatar, speech_like(0.8, 16000), LipSyncSettings(batch_size=2),
                                    progress=_cancel_after(3)):
            chunks.append(chunk)
    assert sum(c.shape[0] for c in chunks) < 8


# --- adaptive cadence on the tiny model -----------------------------------------------------------------------
from engines.musetalk.lipsync import LipSyncStats  # noqa: E402


def _mouth_psnr(avatar, a, b, settings):
    """PSNR (dB) of `a` against `b` over the pixels the mouth paste can touch (mask > 0 at each frame's box)."""
    from engines.musetalk.blend import MouthPaster, source_indices

    n = a.shape[0]
    src = source_indices(n, FPS, avatar.fps, len(avatar), settings.loop_mode)
    paster, region = MouthPaster(avatar.mask), torch.zeros(n, *avatar.frames.shape[1:])
    for k in range(n):
        paster.paste(region[k], torch.ones(3, 256, 256), avatar.boxes[int(src[k])].tolist())
    inside = region > 0
    mse = ((a - b) ** 2)[inside].mean().item()
    return float("inf") if mse == 0 else 10 * torch.log10(torch.tensor(1.0 / mse)).item()


def test_adaptive_cadence_against_dense_in_the_mouth_region(nets, avatar):
    audio = speech_like(1.2, 16000)                                    # 12 frames
    dense = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4))
    # the tiny random Whisper's velocity is ~0.15 per frame: threshold it at the clip's median so both strides occur
    from engines.musetalk.audio_features import encode_audio, pad_features, prepare_audio, window_means
    from engines.musetalk.cadence import adaptive_keyframe_indices, window_velocity

    samples, n = prepare_audio(audio, FPS)
    feats = encode_audio(nets.whisper, nets.feature_extractor, samples, torch.device("cpu"), torch.float32)
    velocity = window_velocity(window_means(pad_features(feats, n, FPS), n, FPS))
    threshold = float(velocity.median())
    adaptive = LipSyncSettings(batch_size=4, stride=1, stride_mode="adaptive", max_stride=4,
                               velocity_threshold=threshold)
    stats = LipSyncStats()
    out = lipsync(nets, avatar, audio, adaptive, stats=stats)
    keys = adaptive_keyframe_indices(velocity, 1, 4, threshold)
    assert stats.frames == n == 12 and stats.unet_frames == keys.numel() < n
    gaps = set((keys[1:] - keys[:-1]).tolist())
    assert 4 in gaps and 1 in gaps                                     # both strides were chosen
    for k in keys.tolist():                                            # keyframes are the UNet's own frames
        assert torch.allclose(out[k], dense[k], atol=2e-4)
    wide = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4, stride=3))
    p_adaptive, p_wide = _mouth_psnr(avatar, out, dense, adaptive), _mouth_psnr(avatar, wide, dense, adaptive)
    assert 25.0 < p_adaptive < float("inf") and p_wide > 20.0
    # more keyframes where the audio moves: closer to dense than the widest fixed stride, for more UNet frames
    assert p_adaptive > p_wide


def test_adaptive_bounds_are_checked(nets, avatar):
    with pytest.raises(InputError, match="max_stride"):
        lipsync(nets, avatar, speech_like(0.5), LipSyncSettings(stride=3, stride_mode="adaptive", max_stride=2))
    with pytest.raises(InputError, match="stride_mode"):
        lipsync(nets, avatar, speech_like(0.5), LipSyncSettings(stride_mode="sometimes"))
    with pytest.raises(InputError, match="velocity_threshold"):
        lipsync(nets, avatar, speech_like(0.5), LipSyncSettings(stride_mode="adaptive", velocity_threshold=-1.0))


# --- viseme cache on the tiny model ---------------------------------------------------------------------------
PERIOD_STEPS = 40          # 0.8 s of Whisper steps = 8 frames at 10 fps = two turns of the 4-frame loop


@pytest.fixture
def looped_script(monkeypatch):
    """Speech whose Whisper features repeat every 0.8 s exactly (a looped script cut on whole windows): the real
    tiny Whisper's features carry their position in the 30 s segment, so its repeats are never exact."""
    import engines.musetalk.lipsync as lipsync_module

    real = lipsync_module.encode_audio

    def looped(*args, **kwargs):
        f = real(*args, **kwargs)
        reps = f.shape[0] // PERIOD_STEPS + 1
        return torch.cat([f[:PERIOD_STEPS]] * reps)[:f.shape[0]].contiguous()

    monkeypatch.setattr(lipsync_module, "encode_audio", looped)
    return speech_like(2.0, 16000)                         # 20 frames


@pytest.mark.parametrize("stride,pipelined", [(1, True), (2, False)])
def test_exact_viseme_cache_is_bit_identical_and_skips_the_networks(nets, avatar, looped_script, stride, pipelined):
    base = LipSyncSettings(batch_size=4, stride=stride, pipelined=pipelined)
    plain_stats, cached_stats = LipSyncStats(), LipSyncStats()
    plain = lipsync(nets, avatar, looped_script, base, stats=plain_stats)
    cached = lipsync(nets, avatar, looped_script, LipSyncSettings(**{**base.__dict__, "viseme_threshold": 0}),
                     stats=cached_stats)
    assert torch.equal(cached, plain)
    assert cached_stats.viseme_hits > 0
    assert cached_stats.unet_frames == plain_stats.unet_frames - cached_stats.viseme_hits
    assert cached_stats.decoded_frames == plain_stats.decoded_frames - cached_stats.viseme_hits
    assert cached_stats.unet_calls < plain_stats.unet_calls
    assert "viseme cache (exact)" in cached_stats.summary() and plain_stats.viseme == ""
    assert cached_stats.saved_seconds() > 0 and "s saved" in cached_stats.summary()   # calls it made unnecessary


def test_a_tiny_cache_stays_bounded_and_exact(nets, avatar, looped_script):
    plain = lipsync(nets, avatar, looped_script, LipSyncSettings(batch_size=4))
    stats = LipSyncStats()
    out = lipsync(nets, avatar, looped_script, LipSyncSettings(batch_size=4, viseme_threshold=0,
                                                               viseme_cache_size=3), stats=stats)
    assert torch.equal(out, plain)
    assert "3 mouths held (cap 3)" in stats.viseme and "0 dropped" not in stats.viseme


def test_fuzzy_viseme_cache_reuses_more_and_keeps_the_frame_count(nets, avatar):
    audio = speech_like(1.2, 16000)                        # real tiny-Whisper features: no exact repeats
    exact, loose = LipSyncStats(), LipSyncStats()
    plain = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4))
    a = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4, viseme_threshold=0), stats=exact)
    b = lipsync(nets, avatar, audio, LipSyncSettings(batch_size=4, viseme_threshold=32), stats=loose)
    assert exact.viseme_hits == 0 and torch.equal(a, plain)
    assert loose.viseme_hits > 0 and loose.unet_frames < 12 and b.shape == plain.shape
    # outside the mouth windows every frame is still its loop frame: only the mouth can differ
    from engines.musetalk.blend import MouthPaster, source_indices

    src = source_indices(12, FPS, avatar.fps, len(avatar), "wrap")
    for k in range(12):
        region = torch.zeros(avatar.frames.shape[1:])
        MouthPaster(avatar.mask).paste(region, torch.ones(3, 256, 256), avatar.boxes[int(src[k])].tolist())
        outside = region == 0
        assert torch.equal(b[k][outside], avatar.frames[int(src[k])][outside])


def test_viseme_settings_are_checked(nets, avatar):
    with pytest.raises(InputError, match="viseme_threshold"):
        lipsync(nets, avatar, speech_like(0.5), LipSyncSettings(viseme_threshold=33))
    with pytest.raises(InputError, match="viseme_cache_size"):
        lipsync(nets, avatar, speech_like(0.5), LipSyncSettings(viseme_threshold=2, viseme_cache_size=0))
