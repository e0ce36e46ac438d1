"""The whole engine chain on tiny networks: avatar packet, features, motion, render; bad inputs."""
import numpy as np
import pytest
import torch

from engines.common.audio import to_mono
from engines.common.cache import ContentCache
from engines.common.errors import InputError
from engines.ditto import avatar as ditto_avatar
from engines.ditto import keypoints
from engines.ditto import motion as ditto_motion
from engines.ditto import render as ditto_render
from engines.ditto.pipeline import DittoPipeline
from tests.fixtures.tiny_ditto import build_tiny_ditto, portrait, speech


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    return DittoPipeline(build_tiny_ditto(tmp_path_factory.mktemp("ditto") / "tiny"))


def _mapped_from(tensor, path) -> bool:
    """True when the tensor's memory lies in a mapping of `path` (Linux /proc/self/maps)."""
    ptr = tensor.untyped_storage().data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[-1] == str(path):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= ptr < hi:
                    return True
    return False


def _entries(cache):
    root = cache.root / ditto_avatar.NAMESPACE
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_chain_renders_full_frames_deterministically(pipeline, tmp_path):
    cache = ContentCache(tmp_path / "cache")
    avatar, hit = pipeline.prepare_avatar(portrait(), ditto_avatar.AvatarSettings(), cache)
    assert not hit and avatar.num_frames == 1 and avatar.f_s.shape[1:] == (4, 4, 16, 16)
    wav, _ = to_mono(speech(1.3), 16000)
    feats = pipeline.audio_features(wav, cache)
    assert feats.shape == (33, 1024)
    settings = ditto_motion.MotionSettings(steps=4, seed=7, overlap=5)
    m1 = pipeline.motion(avatar, feats, settings, keypoints.DriveSettings(), wav)
    m2 = pipeline.motion(avatar, feats, settings, keypoints.DriveSettings(), wav)
    np.testing.assert_array_equal(m1.motion, m2.motion)
    m3 = pipeline.motion(avatar, feats, ditto_motion.MotionSettings(steps=4, seed=8, overlap=5),
                         keypoints.DriveSettings(), wav)
    assert not np.array_equal(m1.motion, m3.motion)
    assert m1.motion.shape == (33, 265) and m1.kp_driven.shape == (33, 21, 3)
    chunks = list(pipeline.render(avatar, m1, ditto_render.RenderSettings(batch_size=4, stride=2)))
    assert sum(map(len, chunks)) == 33 and max(map(len, chunks)) <= 4   # in order, at most one batch at a time
    frames = torch.cat(chunks)
    assert frames.shape == (33, 160, 128, 3) and frames.dtype == torch.uint8     # the byte path: bytes to the encoder
    frames = frames.float() / 255
    # the face region changed, the corners (outside the crop) are the portrait's own pixels
    src = portrait()[0]
    torch.testing.assert_close(frames[:, 0, 0], src[0, 0].expand(33, 3), atol=1 / 255, rtol=0)
    assert (frames[5] - src).abs().max() > 0.01


def test_silence_shows_the_avatar_frame(pipeline, tmp_path):
    avatar, _ = pipeline.prepare_avatar(portrait(), ditto_avatar.AvatarSettings(), None)
    wav, _ = to_mono(speech(1.2, silence_from=0.4), 16000)
    feats = pipeline.audio_features(wav, None)
    m = pipeline.motion(avatar, feats, ditto_motion.MotionSettings(steps=2, overlap=5), keypoints.DriveSettings(),
                        wav)
    # The bypass is opt-in (dense evaluation is the default): with it on, deep silence shows the avatar frame itself.
    frames = pipeline.render_frames(avatar, m, ditto_render.RenderSettings(silence_bypass=True))
    expected = avatar.frames[0].float() / 255
    assert torch.equal(frames[-1], expected)                     # deep in the silence: the avatar frame itself
    assert (frames[2] - expected).abs().max() > 0.01             # speech: rendered


def test_packet_round_trip_is_memory_mapped_and_skips_registration(pipeline, tmp_path, monkeypatch):
    cache = ContentCache(tmp_path / "cache")
    images = portrait(n_frames=3)
    first, hit = pipeline.prepare_avatar(images, ditto_avatar.AvatarSettings(), cache)
    assert not hit

    def refuse(*a, **k):
        raise AssertionError("registration ran again")
    monkeypatch.setattr(ditto_avatar, "register", refuse)
    second, hit = pipeline.prepare_avatar(images, ditto_avatar.AvatarSettings(), cache)
    assert hit and second.key == first.key
    packet = cache.entry_path(ditto_avatar.NAMESPACE, second.key) / "tensors.safetensors"
    for name in ("frames", "f_s"):
        assert _mapped_from(getattr(second, name), packet), name      # a view of the mapped file, not a copy
    torch.testing.assert_close(second.f_s, first.f_s)
    np.testing.assert_array_equal(second.m_c2o, first.m_c2o)
    assert second.meta["frames"] == 3 and second.meta["missing_faces"] == []
    np.testing.assert_allclose(second.m_c2o @ second.m_o2c, np.broadcast_to(np.eye(3), (3, 3, 3)), atol=1e-9)


def test_loop_frames_without_a_face_are_interpolated(pipeline):
    images = portrait(n_frames=5)
    images[2] = portrait(dark=True)[0]
    avatar, _ = pipeline.prepare_avatar(images, ditto_avatar.AvatarSettings(smooth_k=1), None)
    assert avatar.has_face.tolist() == [True, True, False, True, True]
    np.testing.assert_allclose(avatar.m_o2c[2], (avatar.m_o2c[1] + avatar.m_o2c[3]) / 2, atol=1e-9)
    np.testing.assert_allclose(avatar.info["exp"][2], (avatar.info["exp"][1] + avatar.info["exp"][3]) / 2,
                               rtol=1e-5, atol=1e-6)


def test_no_face_anywhere_is_an_error_and_nothing_is_written(pipeline, tmp_path):
    cache = ContentCache(tmp_path / "cache")
    with pytest.raises(InputError, match="images: expected frames showing a face"):
        pipeline.prepare_avatar(portrait(n_frames=2, dark=True), ditto_avatar.AvatarSettings(), cache)
    assert _entries(cache) == []


def test_motion_for_another_avatar_is_refused(pipeline):
    a, _ = pipeline.prepare_avatar(portrait(), ditto_avatar.AvatarSettings(), None)
    b, _ = pipeline.prepare_avatar(portrait(n_frames=2), ditto_avatar.AvatarSettings(), None)
    wav, _ = to_mono(speech(0.5), 16000)
    m = pipeline.motion(a, pipeline.audio_features(wav, None), ditto_motion.MotionSettings(steps=1, overlap=5),
                        keypoints.DriveSettings(), wav)
    with pytest.raises(InputError, match="motion"):
        next(pipeline.render(b, m, ditto_render.RenderSettings()))


def test_fp16_on_cpu_is_refused(pipeline):
    with pytest.raises(InputError, match="precision"):
        DittoPipeline(pipeline.files.folder, device=torch.device("cpu"), precision="fp16")
