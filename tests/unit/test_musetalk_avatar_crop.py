"""The avatar's reference latents come from crops made as upstream makes them.

Upstream MuseTalk (TMElyralab/MuseTalk, scripts/realtime_inference.py, `Avatar.prepare_material`) takes the 8-bit
frame, crops ``frame[y1:y2, x1:x2]`` and resizes it with ``cv2.resize(crop, (256, 256),
interpolation=cv2.INTER_LANCZOS4)`` before the VAE. That recipe is written out here on the uint8 loop and fed to
the same VAE: the avatar's latents must match it (the former triangle-filter crop differs by far more).
"""
import cv2
import numpy as np
import pytest
import torch

from engines.musetalk.avatar import build_avatar, encode_crops
from engines.musetalk.blend import crop_resize
from engines.musetalk.face_track import HaarDetector, track_faces
from engines.musetalk.loader import load_musetalk
from tests.fixtures.tiny_musetalk import astronaut_loop, build_tiny_musetalk


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    return load_musetalk(build_tiny_musetalk(tmp_path_factory.mktemp("musetalk") / "tiny"))


def _upstream_crop(frame_u8: np.ndarray, box) -> torch.Tensor:
    x1, y1, x2, y2 = (int(v) for v in box)
    crop = cv2.resize(frame_u8[y1:y2, x1:x2], (256, 256), interpolation=cv2.INTER_LANCZOS4)
    return torch.from_numpy(crop.astype(np.float32) / 255.0).permute(2, 0, 1)


def test_avatar_latents_are_those_of_upstreams_lanczos_crop(nets):
    frames, _ = astronaut_loop(2)
    track = track_faces(frames, HaarDetector(), every=1, proxy_size=160)
    avatar = build_avatar(nets, frames, track, 25.0)
    frames_u8 = (frames.numpy() * 255.0).round().astype(np.uint8)
    upstream = torch.stack([_upstream_crop(frames_u8[i], avatar.boxes[i].tolist()) for i in range(len(frames))])
    with torch.no_grad():
        expected = encode_crops(nets.vae, upstream, nets.scaling_factor)
    assert torch.allclose(avatar.latents, expected, atol=1e-5), float((avatar.latents - expected).abs().max())
    # the check can tell the filters apart: the triangle-filter crop encodes to other latents
    triangle = torch.stack([crop_resize(frames[i], avatar.boxes[i].tolist()) for i in range(len(frames))])
    with torch.no_grad():
        other = encode_crops(nets.vae, triangle, nets.scaling_factor)
    assert float((other - expected).abs().max()) > 100 * 1e-5
