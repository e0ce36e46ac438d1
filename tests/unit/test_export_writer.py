"""The streaming writer's pictures: colour round trip, input forms, padding, clamping and bad input.

Every check decodes the written file with PyAV (the pack's reader: FFmpeg decode, swscale with accurate rounding,
honouring the stream's matrix/range tags) and compares decoded pixels with the source.
"""
import json
from fractions import Fraction

import av
import numpy as np
import pytest
import torch

from engines.common.errors import InputError
from engines.export import AudioTrack, EncodeSettings, VideoWriter, reader, split_frames, write_stream
from engines.export.frames import rgb_to_yuv420
from scripts.sample_clip import presenter_frames, voice_like

X264 = EncodeSettings(encoder="x264")


def decode(path):
    return np.concatenate(list(reader.read_frames(path)))


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))


def presenter_clip(n=12, width=256, height=448):
    _, envelope = voice_like(n / 24 + 0.1)
    return presenter_frames(width, height, 24.0, envelope, 48000, n)


@pytest.mark.parametrize("conversion", ["swscale", "device"])
def test_colour_round_trip_psnr_at_default_quality(tmp_path, conversion):
    """Default settings (cq 19) give >= 40 dB on the sample presenter clip, via swscale and via the NV12 converter."""
    frames = presenter_clip()
    source = torch.from_numpy(frames).float() / 255.0  # ComfyUI's IMAGE form
    with VideoWriter(tmp_path / "c.mp4", 24, settings=EncodeSettings(), conversion=conversion) as w:
        w.write(source)
    decoded = decode(tmp_path / "c.mp4")
    assert decoded.shape == frames.shape
    assert psnr(decoded, frames) >= 40.0


def test_sharp_graphics_lose_only_what_420_chroma_loses(tmp_path):
    """On hard-edged saturated graphics 4:2:0 itself caps PSNR; the encoder adds < 1 dB on top of that cap."""
    frames = np.zeros((6, 64, 64, 3), np.uint8)
    frames[:, :, 21:43] = (200, 20, 30)
    frames[:, 21:43, :] = (20, 40, 200)
    yuv = rgb_to_yuv420(torch.from_numpy(frames)).numpy().astype(np.float64)
    y, uv = yuv[:, :64], yuv[:, 64:].reshape(6, 32, 32, 2).repeat(2, 1).repeat(2, 2)
    yn, un, vn = (y - 16) / 219, (uv[..., 0] - 128) / 224, (uv[..., 1] - 128) / 224
    only_420 = np.stack([yn + 1.402 * vn, yn - 0.344136 * un - 0.714136 * vn, yn + 1.772 * un], -1) * 255
    cap = psnr(np.clip(only_420.round(), 0, 255), frames)
    with VideoWriter(tmp_path / "g.mp4", 24, settings=X264, conversion="device") as w:
        w.write(frames)
    assert psnr(decode(tmp_path / "g.mp4"), frames) > cap - 1.0


@pytest.mark.parametrize("bit_depth", [8, 10])
@pytest.mark.parametrize("conversion", ["swscale", "device"])
@pytest.mark.parametrize("rgb", [(0.5, 0.5, 0.5), (0.87, 0.64, 0.52), (0.55, 0.36, 0.27), (0.1, 0.1, 0.1)])
def test_flat_grey_and_skin_within_two_levels(tmp_path, conversion, rgb, bit_depth):
    frame = torch.tensor(rgb).expand(4, 64, 64, 3).contiguous()
    settings = EncodeSettings(encoder="x264", bit_depth=bit_depth)
    with VideoWriter(tmp_path / "f.mp4", 24, settings=settings, conversion=conversion) as w:
        w.write(frame)
    got = decode(tmp_path / "f.mp4")[:, 8:56, 8:56].reshape(-1, 3).astype(np.float64)
    want = np.array(rgb) * 255
    assert np.abs(got - want).max() <= 2.0, (got.mean(0), want)


def test_stream_is_tagged_bt601_limited(tmp_path):
    with VideoWriter(tmp_path / "t.mp4", 24, settings=X264) as w:
        w.write(np.full((2, 32, 32, 3), 128, np.uint8))
    with av.open(str(tmp_path / "t.mp4")) as c:
        ctx = c.streams.video[0].codec_context
        assert (ctx.colorspace, ctx.color_range, ctx.color_primaries, ctx.color_trc) == (6, 1, 1, 1)
        assert ctx.pix_fmt == "yuv420p"


def test_nv12_layout_matches_the_bt601_formulas():
    """The GPU converter's NV12 is Y plane then interleaved U,V; values follow the limited-range formulas."""
    rgb = torch.tensor([1.0, 0.0, 0.0]).expand(1, 2, 4, 3)
    nv12 = rgb_to_yuv420(rgb)[0].numpy()
    assert nv12.shape == (3, 4)
    assert (nv12[:2] == 81).all()                          # Y of pure red: 16 + 219 * 0.299 = 81.5 -> 81
    assert list(nv12[2]) == [90, 240, 90, 240]             # U, V, U, V
    ten = rgb_to_yuv420(rgb, bit_depth=10)[0].numpy()
    assert ten.shape == (3, 4) and ten[0, 0] == round(64 + 876 * 0.299)


def test_uint8_float16_and_rgba_inputs_and_single_frame(tmp_path):
    base = presenter_clip(4, 64, 96)
    with VideoWriter(tmp_path / "m.mp4", 24, settings=X264) as w:
        w.write(base[:1])                                              # uint8 numpy
        w.write(torch.from_numpy(base[1]).half() / 255)                # one float16 frame [H, W, 3]
        rgba = np.concatenate([base[2:], np.full((2, 96, 64, 1), 255, np.uint8)], axis=-1)
        w.write(torch.from_numpy(rgba))                                # uint8 RGBA tensor: alpha dropped
    got = decode(tmp_path / "m.mp4")
    assert got.shape == (4, 96, 64, 3)
    assert psnr(got, base) > 30  # a 64x96 picture: 4:2:0 chroma alone limits PSNR here


def test_odd_size_is_padded_to_even_and_reported(tmp_path):
    ramp = torch.linspace(0.2, 0.8, 45)
    frames = torch.stack([ramp.expand(31, 45), ramp.flip(0).expand(31, 45), torch.full((31, 45), 0.5)], -1)
    frames = frames.expand(3, 31, 45, 3).contiguous()
    with VideoWriter(tmp_path / "o.mp4", 24, settings=X264) as w:
        w.write(frames)
    r = w.result
    assert (r.source_width, r.source_height, r.width, r.height) == (45, 31, 46, 32)
    assert r.padded and "padded from 45x31 to even 46x32" in r.summary()
    info = reader.probe(tmp_path / "o.mp4")
    assert (info.width, info.height) == (46, 32)
    got = decode(tmp_path / "o.mp4").astype(int)
    # The padding repeats the last real row/column instead of adding black.
    assert np.abs(got[:, 31] - got[:, 30]).max() <= 3
    assert np.abs(got[:, :, 45] - got[:, :, 44]).max() <= 3


@pytest.mark.parametrize("cast_maps_nan_to_zero", [True, False])
def test_nan_and_out_of_range_pixels_are_clamped(tmp_path, monkeypatch, cast_maps_nan_to_zero):
    """Both the platform-checked fast path and the explicit NaN check give NaN -> 0."""
    from engines.export import frames as frames_module

    monkeypatch.setattr(frames_module, "NAN_CASTS_TO_ZERO", cast_maps_nan_to_zero and frames_module.NAN_CASTS_TO_ZERO)
    frames = torch.full((2, 32, 32, 3), 0.5)
    frames[:, :16, :16] = float("nan")
    frames[:, :16, 16:] = 7.0
    frames[:, 16:, :16] = -3.0
    frames[:, 16:, 16:] = float("inf")
    for conversion, bit_depth in (("swscale", 8), ("swscale", 10), ("device", 8)):
        path = tmp_path / f"n_{conversion}_{bit_depth}.mp4"
        settings = EncodeSettings(encoder="x264", bit_depth=bit_depth)
        with VideoWriter(path, 24, settings=settings, conversion=conversion) as w:
            w.write(frames)
        got = decode(path).astype(int)
        assert np.abs(got[:, 2:14, 2:14] - 0).max() <= 3        # NaN -> 0
        assert np.abs(got[:, 2:14, 18:30] - 255).max() <= 3     # > 1 -> 1
        assert np.abs(got[:, 18:30, 2:14] - 0).max() <= 3       # < 0 -> 0
        assert np.abs(got[:, 18:30, 18:30] - 255).max() <= 3    # inf -> 1


def test_ten_bit_and_hevc_encode(tmp_path):
    frames = torch.from_numpy(presenter_clip(4, 64, 96)).float() / 255
    for name, settings in (("h10", EncodeSettings(encoder="x264", bit_depth=10)),
                           ("x265", EncodeSettings(encoder="x265", preset="ultrafast"))):
        with VideoWriter(tmp_path / f"{name}.mp4", 24, settings=settings) as w:
            w.write(frames)
        with av.open(str(tmp_path / f"{name}.mp4")) as c:
            ctx = c.streams.video[0].codec_context
            assert ctx.name == ("h264" if name == "h10" else "hevc")
            assert ctx.pix_fmt == ("yuv420p10le" if name == "h10" else "yuv420p")
        assert psnr(decode(tmp_path / f"{name}.mp4"), (frames.numpy() * 255).round()) > 30


def test_empty_batch_is_a_clear_error_and_writes_nothing(tmp_path):
    with pytest.raises(InputError, match=r"images: expected at least one frame, got an empty batch"):
        with VideoWriter(tmp_path / "e.mp4", 24, settings=X264) as w:
            w.write(torch.zeros(0, 32, 32, 3))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad, match", [
    ({"waveform": torch.zeros(1, 2, 10)}, r"audio: expected an AUDIO dict"),
    ({"wave": torch.zeros(1, 2, 10), "sample_rate": 48000}, r"audio: expected an AUDIO dict"),
    ({"waveform": torch.zeros(2, 2, 480), "sample_rate": 48000}, r"audio: expected one clip"),
    ({"waveform": torch.zeros(1, 2, 0), "sample_rate": 48000}, r"at least one audio sample"),
    ({"waveform": torch.zeros(1, 2, 10), "sample_rate": "fast"}, r"integer sample_rate"),
])
def test_mismatched_audio_dict_is_a_clear_error(bad, match):
    with pytest.raises(InputError, match=match):
        AudioTrack.from_comfy(bad)


@pytest.mark.parametrize("frames, match", [
    (torch.zeros(2, 32, 32), r"shape \[frames, height, width, 3\]"),
    (torch.zeros(2, 32, 32, 3, dtype=torch.int32), r"uint8 \(0-255\) or float"),
    ("frames", r"tensor or array"),
])
def test_bad_frames_are_clear_errors(tmp_path, frames, match):
    with pytest.raises(InputError, match=match):
        with VideoWriter(tmp_path / "b.mp4", 24, settings=X264) as w:
            w.write(frames)
    assert list(tmp_path.iterdir()) == []


def test_bad_settings_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(InputError, match=r"quality: expected an integer from 0"):
        VideoWriter(tmp_path / "s.mp4", 24, settings=EncodeSettings(quality=80))
    with pytest.raises(InputError, match=r"fps: expected a frame rate from 1 to 240"):
        VideoWriter(tmp_path / "s.mp4", 0)
    assert list(tmp_path.iterdir()) == []


def test_ntsc_rate_is_exact(tmp_path):
    with VideoWriter(tmp_path / "n.mp4", 29.97, settings=X264) as w:
        w.write(np.zeros((3, 32, 32, 3), np.uint8))
    with av.open(str(tmp_path / "n.mp4")) as c:
        assert c.streams.video[0].average_rate == Fraction(30000, 1001)


def test_metadata_is_stored_as_json_tags(tmp_path):
    prompt = {"1": {"class_type": "BroadcastExportVideo", "inputs": {}}}
    with VideoWriter(tmp_path / "meta.mp4", 24, settings=X264, metadata={"prompt": prompt, "title": "news"}) as w:
        w.write(np.zeros((2, 32, 32, 3), np.uint8))
    with av.open(str(tmp_path / "meta.mp4")) as c:
        assert json.loads(c.metadata["prompt"]) == prompt and c.metadata["title"] == "news"


def test_write_stream_consumes_a_generator_and_cleans_up_when_it_fails(tmp_path):
    made = []

    def chunks(fail_at=None):
        for i in range(3):
            if i == fail_at:
                raise RuntimeError("renderer failed")
            made.append(i)
            yield torch.full((2, 32, 48, 3), i / 3.0)

    result = write_stream(tmp_path / "s.mp4", 24, chunks(), settings=X264)
    assert result.frames == 6 and made == [0, 1, 2] and result.path.is_file()
    with pytest.raises(RuntimeError, match="renderer failed"):
        write_stream(tmp_path / "f.mp4", 24, chunks(fail_at=2), settings=X264)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.mp4"]     # no partial file left
    assert [len(c) for c in split_frames(torch.zeros(5, 2, 2, 3), 2)] == [2, 2, 1]
