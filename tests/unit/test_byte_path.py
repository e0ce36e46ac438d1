"""The byte path (issue 29): MuseTalk's and Ditto's frames, now uint8 from the cached loop to the encoder with only the
pasted window in float, equal what the encoder got before the change to within one 8-bit level, in every blend
mode, at odd sizes, over loops whose frames have different crop boxes.

The oracle is the PRE-CHANGE REFERENCE below: a copy of the old float paths (MuseTalk's float-frame paste-back, Ditto's
whole-frame float putback and silence mix), kept here verbatim in logic and independent of the new code, followed by
the export's own float -> bytes conversion (engines/export/frames.HostRGB, what the encoder was handed before).
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engines.common import blend_modes
from engines.common.frames import ByteFrames, FrameRing, collect_frames
from engines.ditto import cadence
from engines.ditto import putback as ditto_putback
from engines.ditto import render as ditto_render
from engines.export.frames import HostRGB
from engines.musetalk.avatar import Avatar
from engines.musetalk.blend import MouthEllipse, mouth_mask, resize_matrix, source_indices
from engines.musetalk.lipsync import LipSyncSettings, _pasted, lipsync, lipsync_chunks

MODES = blend_modes.MODES


# ---- PRE-CHANGE REFERENCE (copied from the float paths before issue 29; do not route it through the new code) -------
def _old_span(weights):
    hits = torch.nonzero(weights > 0).flatten()
    return (int(hits[0]), int(hits[-1]) + 1) if hits.numel() else (0, 0)


def old_musetalk_paste(frame, face, mask, box, mode):
    """The old `MouthPaster.paste`: float frame ``[H, W, 3]`` in place, window of the mask's support only."""
    x1, y1, x2, y2 = (int(v) for v in box)
    h, w = y2 - y1, x2 - x1
    r0, r1 = _old_span(mask.amax(dim=1))
    c0, c1 = _old_span(mask.amax(dim=0))
    ry, rx = resize_matrix(mask.shape[0], h), resize_matrix(mask.shape[1], w)
    a0, a1 = _old_span(ry[:, r0:r1].sum(dim=1))
    b0, b1 = _old_span(rx[:, c0:c1].sum(dim=1))
    s0, s1 = _old_span(ry[a0:a1].sum(dim=0))
    t0, t1 = _old_span(rx[b0:b1].sum(dim=0))
    ry, rx = ry[a0:a1, s0:s1], rx[b0:b1, t0:t1]
    alpha = ry @ mask[s0:s1, t0:t1] @ rx.T
    src = face[:, s0:s1, t0:t1].to(torch.float32).clamp(0, 1)
    fg = torch.matmul(torch.matmul(ry, src), rx.T)
    region = frame[y1 + a0:y1 + a1, x1 + b0:x1 + b1]
    bg = region.permute(2, 0, 1).to(torch.float32)
    region.copy_(blend_modes.composite(fg, bg, alpha, mode).permute(1, 2, 0))


def old_musetalk_frames(loop_float, boxes, src, faces, mask, mode):
    """The old `_pasted`: each output frame a float copy of its loop frame with the mouth pasted in."""
    out = torch.empty((len(src), *loop_float.shape[1:]))
    for k in range(len(src)):
        s = int(src[k])
        out[k].copy_(loop_float[s])
        old_musetalk_paste(out[k], faces[k], mask, boxes[s], mode)
    return out


def old_putback(frames, crops, m_o2c, m_c2o, blend):
    """The old whole-frame putback: float copies of the frames with the warped crops blended in."""
    b, h, w = frames.shape[:3]
    out = torch.empty((b, h, w, 3), dtype=torch.float32)
    out.copy_(frames)
    if frames.dtype == torch.uint8:
        out.mul_(1.0 / 255.0)
    boxes = [ditto_putback.footprint(m_c2o[i], w, h) for i in range(b)]
    bw = max(1, max(x1 - x0 for x0, _, x1, _ in boxes))
    bh = max(1, max(y1 - y0 for _, y0, _, y1 in boxes))
    crop = ditto_putback.CROP
    norm = np.array([[2.0 / crop, 0, 1.0 / crop - 1], [0, 2.0 / crop, 1.0 / crop - 1], [0, 0, 1]])
    affines = np.stack([(norm @ m_o2c[i] @ np.array([[1.0, 0, x0], [0, 1, y0], [0, 0, 1]]))[:2]
                        for i, (x0, y0, _, _) in enumerate(boxes)])
    ys, xs = torch.meshgrid(torch.arange(bh, dtype=torch.float32), torch.arange(bw, dtype=torch.float32),
                            indexing="ij")
    base = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1).reshape(1, -1, 3)
    grid = torch.matmul(base, torch.from_numpy(affines).float().transpose(1, 2)).reshape(b, bh, bw, 2)
    side = crops.shape[-1]
    layers = [crops.float(), torch.from_numpy(ditto_putback.feather_mask(side))[None, None].expand(b, 1, side, side)]
    if blend == "reinhard":
        layers.append(torch.from_numpy(ditto_putback.mouth_weight(side))[None, None].expand(b, 1, side, side))
    warped = F.grid_sample(torch.cat(layers, dim=1), grid, mode="bilinear", padding_mode="zeros",
                           align_corners=False).permute(0, 2, 3, 1).contiguous().clamp_(0, 1)
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        if x1 <= x0 or y1 <= y0:
            continue
        piece = warped[i, : y1 - y0, : x1 - x0]
        region = out[i, y0:y1, x0:x1]
        fg = piece[..., :3]
        if blend == "poisson":
            mixed = blend_modes.composite(fg.permute(2, 0, 1), region.permute(2, 0, 1), piece[..., 3], "poisson")
            region.copy_(mixed.permute(1, 2, 0))
            continue
        if blend == "reinhard":
            fg = blend_modes.transfer_colour(fg.permute(2, 0, 1), region.permute(2, 0, 1), piece[..., 4])
            fg = fg.permute(1, 2, 0)
        region.lerp_(fg, piece[..., 3:4].expand(-1, -1, 3))
    return out


def old_ditto_frames(loop_u8, source_index, crops_of, weights, m_o2c, m_c2o, blend):
    """The old render's frames (stride 1): the loop frame as float, the putback mixed in by the silence weight."""
    n = len(source_index)
    frames = loop_u8[torch.as_tensor(source_index.astype(np.int64))]
    out = frames.float() / 255.0
    active = weights > 0
    if active.any():
        sel = np.flatnonzero(active)
        src = source_index[sel]
        composed = old_putback(frames[torch.from_numpy(active)], torch.stack([crops_of[i] for i in sel]), m_o2c[src],
                               m_c2o[src], blend)
        w = torch.from_numpy(weights[sel]).view(-1, 1, 1, 1)
        base = out[torch.from_numpy(active)]
        out[torch.from_numpy(active)] = base + w * (composed - base)
    assert out.shape[0] == n
    return out


def encoder_bytes(frames_float):
    """What the export handed the encoder for float frames before the change (its own converter, rounding)."""
    conv = HostRGB(8)
    try:
        h, w = frames_float.shape[1:3]
        return torch.stack([torch.from_numpy(f[:h, :w].copy()) for f in conv.frames(frames_float)])
    finally:
        conv.close()
# ---- end of the pre-change reference ------------------------------------------------------------------------------


def assert_within_one_level(new, old):
    assert new.dtype == torch.uint8 and new.shape == old.shape
    diff = (new.to(torch.int16) - old.to(torch.int16)).abs()
    assert int(diff.max()) <= 1, int(diff.max())
    return float((diff == 0).float().mean())


# ---- MuseTalk ------------------------------------------------------------------------------------------------------
H, W = 97, 83           # odd on both axes
# three loop frames whose crop boxes differ in size and place (one touching the frame's right and bottom edges)
BOXES = torch.tensor([[10, 12, 61, 71], [20, 5, 83, 80], [3, 40, 52, 97]], dtype=torch.int64)


def _musetalk_avatar(seed=0):
    g = torch.Generator().manual_seed(seed)
    loop = torch.randint(0, 256, (3, H, W, 3), dtype=torch.uint8, generator=g)
    mask = mouth_mask(MouthEllipse())
    return Avatar(ByteFrames(loop), BOXES, torch.randn(3, 8, 32, 32, generator=g), mask, 10.0, "test")


@pytest.mark.parametrize("mode", MODES)
def test_musetalk_paste_stage_equals_the_pre_change_frames(mode):
    avatar = _musetalk_avatar()
    g = torch.Generator().manual_seed(1)
    n = 7
    src = torch.tensor([0, 1, 2, 2, 1, 0, 1])
    decoded = torch.rand(n, 3, 256, 256, generator=g) * 2.2 - 1.1      # as the VAE gives them, a little out of range
    faces = (decoded / 2 + 0.5).clamp(0, 1)                             # what the old decode stage handed the paste
    items = [(torch.arange(0, 4), decoded[:4], 2), (torch.arange(4, n), decoded[4:], 1)]
    # recycled buffers with a consumer that copies each chunk before asking for the next (as the writer does)
    chunks = [c.clone() for _, c, _ in _pasted(avatar, src, items, None, mode, ring=FrameRing(2))]
    new = torch.cat(chunks)
    old = encoder_bytes(old_musetalk_frames(avatar.frames.float(), BOXES.tolist(), src, faces, avatar.mask, mode))
    exact = assert_within_one_level(new, old)
    assert exact > 0.999
    if mode != "poisson":
        assert exact == 1.0    # same float maths on the window, rounded as the export rounds


def test_musetalk_paste_computes_the_window_on_the_faces_device_in_bf16():
    """Faces from bf16 networks (the GPU's precision, here on the CPU): the window is float32 maths on the faces'
    device whatever their dtype, so the frame equals the pre-change path fed the same faces."""
    avatar = _musetalk_avatar(2)
    decoded = (torch.rand(3, 3, 256, 256, generator=torch.Generator().manual_seed(3)) * 2 - 1).to(torch.bfloat16)
    src = torch.tensor([2, 0, 1])
    new = torch.cat([c for _, c, _ in _pasted(avatar, src, [(torch.arange(3), decoded, 0)], None, "feather")])
    faces = (decoded.float() / 2 + 0.5).clamp(0, 1)
    old = encoder_bytes(old_musetalk_frames(avatar.frames.float(), BOXES.tolist(), src, faces, avatar.mask,
                                            "feather"))
    assert assert_within_one_level(new, old) == 1.0


class _DecodeRecorder:
    """Wraps the VAE decode (the stand-in runner the lip-sync looks up) and keeps its outputs, in call order."""

    def __init__(self, nets):
        self.nets, self.outputs = nets, []

    def __call__(self, z):
        out = self.nets.vae.decode(z.to(self.nets.vae.dtype) / self.nets.scaling_factor).sample
        self.outputs.append(out.detach().clone())
        return out


@pytest.fixture(scope="module")
def tiny_nets(tmp_path_factory):
    from engines.musetalk.loader import load_musetalk
    from tests.fixtures.tiny_musetalk import build_tiny_musetalk

    return load_musetalk(build_tiny_musetalk(tmp_path_factory.mktemp("musetalk") / "tiny"))


@pytest.mark.parametrize("mode", MODES)
def test_musetalk_render_stream_equals_the_pre_change_frames(tiny_nets, mode):
    """The whole streaming render (tiny networks, pipelined, recycled buffers): every frame equals the old float
    frame made from the same decoded faces, once rounded by the export, to within one level."""
    from tests.fixtures.tiny_musetalk import speech_like

    avatar = _musetalk_avatar(4)
    batch = 3
    recorder = _DecodeRecorder(tiny_nets)
    tiny_nets.runners = {"vae_decode": recorder}
    try:
        settings = LipSyncSettings(batch_size=batch, blend=mode, loop_mode="ping-pong")
        chunks = [c.clone() for c in lipsync_chunks(tiny_nets, avatar, speech_like(0.7), settings,
                                                     reuse_buffers=True)]
    finally:
        tiny_nets.runners = None
    new = torch.cat(chunks)
    n = new.shape[0]
    faces = torch.cat([(o[:batch].float() / 2 + 0.5).clamp(0, 1) for o in recorder.outputs])[:n]
    src = source_indices(n, avatar.fps, avatar.fps, len(avatar), "ping-pong")
    assert len(set(src.tolist())) == 3          # every loop frame (every box) is shown
    old = encoder_bytes(old_musetalk_frames(avatar.frames.float(), BOXES.tolist(), src, faces, avatar.mask, mode))
    assert assert_within_one_level(new, old) > 0.999


def test_musetalk_image_edge_is_the_stream_divided_by_255(tiny_nets):
    from tests.fixtures.tiny_musetalk import speech_like

    avatar = _musetalk_avatar(5)
    settings = LipSyncSettings(batch_size=2, pipelined=False)
    stream = torch.cat([c.clone() for c in lipsync_chunks(tiny_nets, avatar, speech_like(0.5), settings)])
    image = lipsync(tiny_nets, avatar, speech_like(0.5), settings)
    assert image.dtype == torch.float32 and torch.equal(image, stream.float() / 255)


# ---- Ditto ---------------------------------------------------------------------------------------------------------
DH, DW, SIDE = 91, 77, 64      # odd frame; small crops (the grid is normalised, any crop side works)


def _similarity(angle, scale, tx, ty):
    m = np.array([[0.0, 0.0, tx], [0.0, 0.0, ty], [0, 0, 1]])
    m[:2, :2] = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]]) * scale
    return m


def _ditto_scene(n_out, seed=0):
    g = torch.Generator().manual_seed(seed)
    loop = torch.randint(0, 256, (3, DH, DW, 3), dtype=torch.uint8, generator=g)
    # one crop affine per loop frame: different sizes, angles and places, the last partly outside the frame
    m_c2o = np.stack([_similarity(0.0, 0.11, 10.0, 8.0), _similarity(0.25, 0.09, 25.0, 30.0),
                      _similarity(-0.2, 0.13, 40.0, 45.0)])
    avatar = SimpleNamespace(frames=loop, m_c2o=m_c2o, m_o2c=np.linalg.inv(m_c2o))
    crops = torch.rand(n_out, 3, SIDE, SIDE, generator=g)
    return avatar, crops


class _TableRenderer:
    """Stand-in for the networks: the crop of output frame i is row i of a table (frame i's id rides in its
    driven keypoints)."""

    def __init__(self, table):
        self.table = table

    def __call__(self, src, kp_driven):
        return self.table[torch.as_tensor(kp_driven[:, 0, 0].round().astype(np.int64))]


def _ditto_render(monkeypatch, avatar, crops, source_index, rms, settings):
    monkeypatch.setattr(ditto_render, "CropRenderer", lambda nets, av, device, dtype: _TableRenderer(crops))
    kp = np.zeros((len(source_index), 21, 3), np.float32)
    kp[:, 0, 0] = np.arange(len(source_index))
    return [c.clone() for c in ditto_render.render(None, avatar, source_index, kp, rms, settings, torch.device("cpu"),
                                                   reuse_buffers=True)]


@pytest.mark.parametrize("mode", MODES)
def test_ditto_render_stream_equals_the_pre_change_frames(monkeypatch, mode):
    n = 11
    avatar, crops = _ditto_scene(n)
    source_index = np.array([0, 1, 2, 2, 1, 0, 0, 1, 2, 1, 0])
    # speech, then a pause the silence bypass eases out of and back into (weights between 0 and 1, and 0)
    rms = np.array([0.1] * 3 + [0.0] * 5 + [0.1] * 3, np.float32)
    settings = ditto_render.RenderSettings(batch_size=4, stride=1, silence_bypass=True, ease_frames=1, blend=mode,
                                           pipelined=True)
    weights = cadence.neural_weights(rms, settings.silence_threshold, settings.ease_frames)
    assert (weights == 0).any() and ((weights > 0) & (weights < 1)).any() and (weights == 1).any()
    new = torch.cat(_ditto_render(monkeypatch, avatar, crops, source_index, rms, settings))
    old = encoder_bytes(old_ditto_frames(avatar.frames, source_index, crops, weights, avatar.m_o2c, avatar.m_c2o,
                                         mode))
    exact = assert_within_one_level(new, old)
    assert exact > 0.995
    for k in np.flatnonzero(weights == 0):          # bypassed frames are the loop frame's bytes, untouched
        assert torch.equal(new[k], avatar.frames[source_index[k]])


def test_ditto_paste_in_bf16_on_the_cpu_equals_the_pre_change_putback():
    """Crops from bf16 networks: warped and blended in float32 on their device, only the windows' bytes written."""
    avatar, crops = _ditto_scene(3, seed=2)
    crops = crops.to(torch.bfloat16)
    frames = avatar.frames.clone()
    ditto_putback.paste_crops(frames, crops, avatar.m_o2c, avatar.m_c2o, "feather")
    old = encoder_bytes(old_putback(avatar.frames, crops.float(), avatar.m_o2c, avatar.m_c2o, "feather"))
    assert assert_within_one_level(frames, old) > 0.999
    outside = torch.ones(DH, DW, dtype=torch.bool)
    for i, (x0, y0, x1, y1) in enumerate(ditto_putback.footprints(avatar.m_c2o, DW, DH)):
        keep = torch.ones(DH, DW, dtype=torch.bool)
        keep[y0:y1, x0:x1] = False
        assert torch.equal(frames[i][keep], avatar.frames[i][keep])    # nothing outside the window was touched
        outside &= keep
    assert outside.any()


def test_frame_ring_recycles_its_buffers_and_collect_converts_bytes_once():
    ring = FrameRing(2)
    a, b, c = ring.take(3, (5, 7, 3)), ring.take(3, (5, 7, 3)), ring.take(2, (5, 7, 3))
    assert a.data_ptr() != b.data_ptr() and c.data_ptr() == a.data_ptr()     # the third reuses the first
    chunks = [torch.full((2, 5, 7, 3), v, dtype=torch.uint8) for v in (0, 51, 255)]
    clip = collect_frames(iter(chunks), 6, (5, 7, 3), torch.float32)
    assert torch.equal(clip[::2, 0, 0, 0], torch.tensor([0.0, 0.2, 1.0]))


def test_ditto_paste_reuses_one_work_across_window_sizes_crop_sides_and_weights():
    """The render's buffers (`PasteWork`) live for the whole clip: windows that grow and shrink, a crop side that
    changes (the mask channel rewritten), overshooting (slerped) crops, and silence weights, each frame pasted
    through the same work equals the pre-change putback and silence mix within one level."""
    work = ditto_putback.PasteWork()
    g = torch.Generator().manual_seed(5)
    loop = torch.randint(0, 256, (3, DH, DW, 3), dtype=torch.uint8, generator=g)
    m_c2o = np.stack([_similarity(0.0, 0.11, 10.0, 8.0), _similarity(0.25, 0.09, 25.0, 30.0),
                      _similarity(-0.2, 0.13, 40.0, 45.0)])
    m_o2c = np.linalg.inv(m_c2o)
    exact = []
    # (loop frame, crop side, silence weight): large, small, large window; side 64, then 48, then 64 again
    for s, side, weight in [(2, SIDE, 1.0), (1, SIDE, 0.4), (2, 48, 1.0), (0, 48, 0.75), (2, SIDE, 1.0)]:
        crop = torch.rand(1, 3, side, side, generator=g) * 1.3 - 0.15     # beyond 0..1, as a slerp can give
        scale = side / SIDE            # the affines map to a SIDE crop: rescale for the other side's pixels
        c2o = m_c2o[s:s + 1] @ np.diag([1 / scale, 1 / scale, 1.0])
        o2c = np.linalg.inv(c2o)
        frame = loop[s].clone()
        ditto_putback.paste_crops([frame], crop, o2c, c2o, "feather", [weight], work=work)
        composed = old_putback(loop[s:s + 1], crop, o2c, c2o, "feather")
        base = loop[s:s + 1].float() / 255.0
        old = encoder_bytes(base + weight * (composed - base))
        exact.append(assert_within_one_level(frame[None], old))
    assert min(exact) > 0.99


def test_ditto_crop_renderer_hands_each_batch_its_own_f_s_rows():
    """The networks' f_s is a view of the avatar's table (consecutive frames) or comes from one reused staging
    buffer: every batch (longer, shorter, repeated rows, a forward run) gets exactly the avatar's rows of its source
    frames, nothing left over from the batch before."""
    g = torch.Generator().manual_seed(6)
    f_s = torch.randn(5, 2, 3, 4, 4, generator=g).to(torch.float16)
    seen = []

    def warp(f, x_s, x_d):
        seen.append(f.clone())
        return torch.zeros(len(f), 2, 4, 4)

    nets = SimpleNamespace(runners={"stitch": lambda x_s, x_d: x_d, "warp": warp,
                                    "decoder": lambda feat: torch.zeros(len(feat), 3, 8, 8)})
    info = {k: np.zeros((5, d), np.float32) for k, d in
            (("kp", 63), ("pitch", 66), ("yaw", 66), ("roll", 66), ("t", 3), ("exp", 63))}
    info["scale"] = np.ones((5, 1), np.float32)
    renderer = ditto_render.CropRenderer(nets, SimpleNamespace(f_s=f_s, info=info), torch.device("cpu"),
                                         torch.float32)
    batches = [np.array([4, 0, 2, 2]), np.array([1]), np.array([1, 2, 3]), np.array([3, 1, 0])]
    for src in batches:
        renderer(src, np.zeros((len(src), 21, 3), np.float32))
    assert len(seen) == len(batches)
    for src, got in zip(batches, seen):
        assert got.dtype == torch.float16 and torch.equal(got, f_s[torch.as_tensor(src)])
