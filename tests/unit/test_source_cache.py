"""Cold boots: avatars and packets found from the source file's identity, never from stale entries.

engines/common/fingerprint.source_identity, prompt_graph.source_signature, source_cache (links), and the MuseTalk
avatar and Ditto packet lookups that use them (on tiny random MuseTalk networks, and Ditto's `prepare` with a
counting build).
"""
import os

import numpy as np
import pytest
import torch

from engines.common import source_cache
from engines.common.cache import ContentCache
from engines.common.errors import InputError
from engines.common.fingerprint import source_identity
from engines.common.frames import ByteFrames, frames_to_uint8
from engines.common.prompt_graph import source_signature
from engines.ditto import avatar as ditto_avatar
from engines.musetalk import avatar as mt_avatar
from engines.musetalk.face_track import track_from_box
from engines.musetalk.lipsync import LipSyncSettings, lipsync
from engines.musetalk.loader import load_musetalk
from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk, speech_like

FPS = 10.0


# -- the identity of a picked file --------------------------------------------------------------------------------
def _clip(path, data: bytes):
    path.write_bytes(data)
    return path


def test_identity_changes_with_size_mtime_and_content(tmp_path):
    f = _clip(tmp_path / "loop.mp4", bytes(range(256)) * 1024)
    first = source_identity(f, "loop.mp4")
    assert first == source_identity(f, "loop.mp4")                   # stable while nothing changes
    assert first["name"] == "loop.mp4" and first["size"] == 256 * 1024
    st = os.stat(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert source_identity(f, "loop.mp4") != first                    # touched: another mtime
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert source_identity(f, "loop.mp4") == first
    # the same size and the old mtime restored, other bytes at the start: the edge digest still differs
    _clip(f, b"x" + (bytes(range(256)) * 1024)[1:])
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert source_identity(f, "loop.mp4")["size"] == first["size"]
    assert source_identity(f, "loop.mp4") != first
    with open(f, "ab") as out:
        out.write(b"more")
    assert source_identity(f, "loop.mp4")["size"] == first["size"] + 4
    assert source_identity(f, "other.mp4")["name"] == "other.mp4"


# -- the graph that produced the frames -------------------------------------------------------------------------
def _prompt(video="loop.mp4", detect_every=5, producer="LoadVideo"):
    return {
        "1": {"class_type": producer, "inputs": {"video": video, "frame_cap": 0}},
        "4": {"class_type": "FaceTrack", "inputs": {"images": ["1", 0], "detect_every": detect_every}},
        "5": {"class_type": "Avatar", "inputs": {"images": ["1", 0], "face_track": ["4", 0], "fps": ["1", 2],
                                                 "crop_top": 0.08}},
    }


def _identify(folder):
    def identify(class_type, inputs):
        if class_type == "LoadVideo":
            path = folder / inputs["video"]
            return {**inputs, "video": source_identity(path, inputs["video"])} if path.is_file() else None
        if class_type == "FaceTrack":
            return dict(inputs)
        return None
    return identify


def test_signature_follows_files_and_settings_and_refuses_unknown_producers(tmp_path):
    _clip(tmp_path / "loop.mp4", b"a" * 1000)
    _clip(tmp_path / "other.mp4", b"b" * 1000)
    ident = _identify(tmp_path)
    lazy = ("images", "face_track", "fps")
    sig = source_signature(_prompt(), "5", lazy, ident)
    assert sig is not None and set(sig) == set(lazy)
    assert sig == source_signature(_prompt(), "5", lazy, ident)
    assert sig != source_signature(_prompt(video="other.mp4"), "5", lazy, ident)
    assert sig != source_signature(_prompt(detect_every=3), "5", lazy, ident)
    st = os.stat(tmp_path / "loop.mp4")
    os.utime(tmp_path / "loop.mp4", ns=(st.st_atime_ns, st.st_mtime_ns + 5))
    assert sig != source_signature(_prompt(), "5", lazy, ident)
    # a node that is not a known source anywhere upstream, a missing file, no prompt: no signature (key by content)
    assert source_signature(_prompt(producer="KSampler"), "5", lazy, ident) is None
    assert source_signature(_prompt(video="gone.mp4"), "5", lazy, ident) is None
    assert source_signature(None, "5", lazy, ident) is None
    # an identify that fails is an unknown source, never an error
    assert source_signature(_prompt(), "5", lazy, lambda c, i: 1 / 0) is None
    # a widget value is its own signature
    prompt = _prompt()
    prompt["5"]["inputs"]["fps"] = 25
    assert source_signature(prompt, "5", ("fps",), ident) == {"fps": 25.0}


# -- links ---------------------------------------------------------------------------------------------------------
def test_a_link_never_returns_a_missing_or_different_entry(tmp_path):
    cache = ContentCache(tmp_path / "cache")
    meta = {"frames": 2, "width": 4, "height": 3}
    cache.store("things", "k1", 1, {"x": torch.ones(2)}, meta)
    source_cache.store_link(cache, "things", "s1", 1, "k1", meta)
    link, entry = source_cache.resolve(cache, "things", "s1", 1)
    assert link.meta["target"] == "k1" and torch.equal(entry.tensors["x"], torch.ones(2))
    assert source_cache.resolve(cache, "things", "s1", 2) is None          # another format version
    assert source_cache.resolve(cache, "things", "other", 1) is None
    assert source_cache.resolve(cache, "things", None, 1) is None
    assert source_cache.resolve(None, "things", "s1", 1) is None
    # the content entry rewritten with another shape under the same key: the link's record no longer agrees
    cache.store("things", "k1", 1, {"x": torch.ones(3)}, {**meta, "frames": 3})
    assert source_cache.resolve(cache, "things", "s1", 1) is None
    # the content entry evicted: a miss, not an error
    source_cache.store_link(cache, "things", "s2", 1, "k1", {**meta, "frames": 3})
    assert source_cache.resolve(cache, "things", "s2", 1) is not None
    cache.clear("things")
    assert source_cache.resolve(cache, "things", "s2", 1) is None


def test_byte_frames_read_as_float_frames():
    images = torch.randint(0, 256, (3, 5, 7, 3), dtype=torch.uint8).float() / 255.0
    data = frames_to_uint8(images)
    assert torch.equal(data.float() / 255.0, images)                   # lossless for decoded frames
    frames = ByteFrames(data)
    assert frames.shape == images.shape and frames.dtype == torch.float32 and len(frames) == 3
    assert torch.equal(frames[1], images[1]) and torch.equal(frames[1:], images[1:])
    assert torch.equal(frames[torch.tensor([2, 0])], images[[2, 0]]) and torch.equal(frames.float(), images)
    with pytest.raises(ValueError):
        ByteFrames(images)


# -- MuseTalk: an avatar found by source ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    return load_musetalk(build_tiny_musetalk(tmp_path_factory.mktemp("musetalk") / "tiny"))


def _loop():
    frames, _ = astronaut_loop(4)
    frames = frames_to_uint8(frames).float() / 255.0            # what Load Video hands on: k/255
    return frames, track_from_box((40, 50, 140, 150), 4, int(frames.shape[2]), int(frames.shape[1]))


def test_musetalk_hit_by_source_needs_no_frames_and_renders_the_same(nets, tmp_path):
    frames, track = _loop()
    cache = ContentCache(tmp_path / "cache")
    settings = mt_avatar.CropSettings()
    key = mt_avatar.source_key({"images": {"file": "loop.mp4", "mtime_ns": 1}}, settings, nets.vae_id,
                               nets.compute_dtype)
    assert mt_avatar.load_from_source(cache, key) is None
    with pytest.raises(InputError, match="images"):                  # a miss with nothing to build from
        mt_avatar.build_avatar(nets, None, None, None, settings, cache=cache, source_key=key)
    built = mt_avatar.build_avatar(nets, frames, track, FPS, settings, cache=cache, source_key=key)
    assert not built.from_cache
    hit = mt_avatar.build_avatar(nets, None, None, None, settings, cache=cache, source_key=key)
    assert hit.from_cache and hit.key == built.key and hit.fps == FPS and len(hit) == 4
    assert isinstance(hit.frames, ByteFrames) and torch.equal(hit.frames.float(), frames)
    assert torch.equal(hit.latents, built.latents) and torch.equal(hit.boxes, built.boxes)
    audio = speech_like(0.5, 16000)
    ls = LipSyncSettings(batch_size=4)
    assert torch.equal(lipsync(nets, hit, audio, ls), lipsync(nets, built, audio, ls))
    # other settings, another source (a changed file), no source: each its own key, so never this entry
    assert mt_avatar.source_key({"images": {"file": "loop.mp4", "mtime_ns": 2}}, settings, nets.vae_id,
                                nets.compute_dtype) != key
    assert mt_avatar.source_key({"images": {"file": "loop.mp4", "mtime_ns": 1}}, mt_avatar.CropSettings(top=0.1),
                                nets.vae_id, nets.compute_dtype) != key
    assert mt_avatar.source_key(None, settings, nets.vae_id, nets.compute_dtype) is None
    # the avatar entry evicted: the link alone is a miss (the frames are decoded again)
    cache.clear(mt_avatar.CACHE_NAMESPACE)
    assert mt_avatar.load_from_source(cache, key) is None


# -- Ditto: a packet found by source --------------------------------------------------------------------------------
def _packet(n=3):
    frames = torch.randint(0, 256, (n, 8, 6, 3), dtype=torch.uint8)
    tensors = {f"info.{k}": torch.zeros(n, 2) for k in ditto_avatar.INFO_KEYS}
    tensors.update({"frames": frames, "f_s": torch.zeros(n, 2, 1, 1, 1, dtype=torch.float16),
                    "m_o2c": torch.eye(3, dtype=torch.float64).repeat(n, 1, 1),
                    "m_c2o": torch.eye(3, dtype=torch.float64).repeat(n, 1, 1),
                    "has_face": torch.ones(n, dtype=torch.bool)})
    return frames, tensors


def test_ditto_packet_hit_by_source_runs_no_registration(tmp_path):
    cache = ContentCache(tmp_path / "cache")
    frames, tensors = _packet()
    settings = ditto_avatar.AvatarSettings()
    builds = []

    def build():
        builds.append(1)
        return tensors

    key = ditto_avatar.source_key({"images": {"file": "loop.mp4", "size": 10}}, settings, "model")
    first, hit = ditto_avatar.prepare(frames, settings, cache, "model", build, source_key=key)
    assert not hit and builds == [1]
    second, hit = ditto_avatar.prepare(None, settings, cache, "model", build, source_key=key)
    assert hit and builds == [1] and second.key == first.key
    assert torch.equal(second.frames, frames) and np.array_equal(second.m_c2o, first.m_c2o)
    with pytest.raises(InputError, match="images"):
        ditto_avatar.prepare(None, settings, cache, "model", build,
                             source_key=ditto_avatar.source_key({"images": {"size": 11}}, settings, "model"))
    assert ditto_avatar.source_key({"images": {"file": "loop.mp4", "size": 10}},
                                   ditto_avatar.AvatarSettings(smooth_k=5), "model") != key
    assert ditto_avatar.source_key({"images": {"file": "loop.mp4", "size": 10}}, settings, "other") != key
    # the packet cleared: a miss that registers again and links anew
    cache.clear(ditto_avatar.NAMESPACE)
    third, hit = ditto_avatar.prepare(frames, settings, cache, "model", build, source_key=key)
    assert not hit and builds == [1, 1]
    assert ditto_avatar.prepare(None, settings, cache, "model", build, source_key=key)[1]
