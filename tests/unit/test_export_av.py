"""Audio in the same pass (durations per audio mode), the streaming reader, and the sample clip."""
import av
import numpy as np
import pytest
import torch

from engines.export import AudioTrack, EncodeSettings, VideoWriter, reader
from scripts.sample_clip import SAMPLE_NAME, make_sample_clip

X264 = EncodeSettings(encoder="x264", preset="ultrafast")
FPS = 24


def durations(path):
    """(video seconds, audio seconds) from the decoded streams: frames / fps and decoded samples / rate."""
    with av.open(str(path)) as c:
        vs = c.streams.video[0]
        frames = sum(1 for _ in c.decode(vs))
        video = frames / float(vs.average_rate)
    samples, rate = reader.read_audio(path)
    return video, samples.shape[1] / rate, frames


def tone(seconds, rate=48000, channels=2):
    t = np.arange(int(round(seconds * rate))) / rate
    return np.stack([0.3 * np.sin(2 * np.pi * 330 * t)] * channels).astype(np.float32)


@pytest.mark.parametrize("mode, audio_s, want_video_s", [
    ("match_video", 3.0, 2.0), ("match_video", 1.3, 2.0),
    ("match_audio", 3.0, 3.0), ("match_audio", 1.3, 1.3),
    ("shortest", 3.0, 2.0), ("shortest", 1.3, 1.3),
])
def test_audio_and_video_durations_agree_within_one_frame(tmp_path, mode, audio_s, want_video_s):
    frames = np.full((48, 32, 32, 3), 90, np.uint8)  # 2.0 s of video
    track = AudioTrack.from_array(tone(audio_s), 48000)
    with VideoWriter(tmp_path / "a.mp4", FPS, settings=X264, audio=track, audio_mode=mode) as w:
        for i in range(0, 48, 8):
            w.write(frames[i:i + 8])
    video_s, got_audio_s, _ = durations(tmp_path / "a.mp4")
    assert abs(video_s - want_video_s) <= 1 / FPS + 1e-6
    assert abs(got_audio_s - video_s) <= 1 / FPS
    r = w.result
    assert r.audio_mode == mode and abs(r.audio_seconds - r.video_seconds) <= 1 / FPS
    if mode == "match_audio" and audio_s > 2:
        assert r.frames_repeated == 24 and "last frame repeated 24 times" in r.summary()
    if mode in ("match_audio", "shortest") and audio_s < 2:
        assert r.frames_dropped == 48 - r.frames and r.frames == 32  # ceil(1.3 * 24)


def test_audio_is_interleaved_not_appended(tmp_path):
    """Audio packets are muxed as the video advances: the first audio packet comes before the last video one."""
    frames = np.full((48, 32, 32, 3), 90, np.uint8)
    with VideoWriter(tmp_path / "i.mp4", FPS, settings=X264, audio=AudioTrack.from_array(tone(2.0), 48000)) as w:
        for i in range(0, 48, 8):
            w.write(frames[i:i + 8])
    with av.open(str(tmp_path / "i.mp4")) as c:
        kinds = [p.stream.type for p in c.demux() if p.size]
    assert kinds.index("audio") < len(kinds) - 1 - kinds[::-1].index("video")


@pytest.mark.parametrize("rate, channels, want_rate", [(24000, 1, 48000), (44100, 2, 48000), (37000, 2, 48000), (48000, 1, 48000)])
def test_audio_rates_and_layouts(tmp_path, rate, channels, want_rate):
    track = AudioTrack.from_comfy({"waveform": torch.from_numpy(tone(1.0, rate, channels))[None],
                                   "sample_rate": rate})
    with VideoWriter(tmp_path / "r.mp4", FPS, settings=X264, audio=track) as w:
        w.write(np.zeros((24, 32, 32, 3), np.uint8))
    with av.open(str(tmp_path / "r.mp4")) as c:
        a = c.streams.audio[0].codec_context
        assert a.name == "aac" and a.sample_rate == want_rate and a.layout.nb_channels == channels
    video_s, audio_s, _ = durations(tmp_path / "r.mp4")
    assert abs(audio_s - video_s) <= 1 / FPS


def numbered_clip(path, n=30, fps=10, size=(48, 32)):
    """Frame i is a flat grey of level 8*i: decoded frames identify themselves."""
    frames = np.stack([np.full((size[1], size[0], 3), 8 * i, np.uint8) for i in range(n)])
    track = AudioTrack.from_array(tone(n / fps), 48000)
    with VideoWriter(path, fps, settings=EncodeSettings(encoder="x264", quality=10), audio=track) as w:
        w.write(frames)
    return path


def levels(chunks):
    frames = np.concatenate(list(chunks))
    return [int(round(f.mean() / 8)) for f in frames]


def test_reader_cap_skip_and_target_fps(tmp_path):
    path = numbered_clip(tmp_path / "n.mp4")
    info = reader.probe(path)
    assert (info.width, info.height, float(info.fps), info.frame_count, info.has_audio) == (48, 32, 10.0, 30, True)
    assert levels(reader.read_frames(path)) == list(range(30))
    assert levels(reader.read_frames(path, frame_cap=5)) == [0, 1, 2, 3, 4]
    assert levels(reader.read_frames(path, skip_frames=25)) == [25, 26, 27, 28, 29]
    assert levels(reader.read_frames(path, skip_frames=3, frame_cap=4)) == [3, 4, 5, 6]
    assert levels(reader.read_frames(path, target_fps=5)) == list(range(0, 30, 2))
    assert levels(reader.read_frames(path, target_fps=20, frame_cap=6)) == [0, 0, 1, 1, 2, 2]
    for cap, skip, fps in ((0, 0, 0), (5, 0, 0), (0, 25, 0), (0, 0, 5), (0, 3, 20), (7, 2, 4)):
        got = len(levels(reader.read_frames(path, frame_cap=cap, skip_frames=skip, target_fps=fps)))
        assert got == reader.planned_count(info, cap, skip, fps)
    chunks = list(reader.read_frames(path, chunk_frames=8))
    assert [len(c) for c in chunks] == [8, 8, 8, 6] and chunks[0].dtype == np.uint8


def test_reader_audio_range(tmp_path):
    path = numbered_clip(tmp_path / "n.mp4")
    samples, rate = reader.read_audio(path)
    assert rate == 48000 and samples.shape[0] == 2 and abs(samples.shape[1] / rate - 3.0) <= 1 / 10
    part, _ = reader.read_audio(path, start_seconds=1.0, duration_seconds=0.5)
    assert part.shape == (2, 24000)
    assert np.abs(part - samples[:, 48000:72000]).max() < 1e-6


def test_reader_refuses_missing_and_non_media(tmp_path):
    from engines.common.errors import InputError

    with pytest.raises(InputError, match=r"video: expected an existing media file"):
        reader.probe(tmp_path / "none.mp4")
    (tmp_path / "junk.mp4").write_bytes(b"not a video at all")
    with pytest.raises(InputError, match=r"video: expected a media file FFmpeg can read"):
        reader.probe(tmp_path / "junk.mp4")


def test_a_file_that_opens_but_does_not_decode_is_refused_by_name(tmp_path):
    """Found by the fuzz: FFmpeg opens junk named .png (as an image) and fails in avcodec_receive_frame, which
    reached the user as PyAV's raw InvalidDataError."""
    from engines.common.errors import InputError

    junk = tmp_path / "fuzz_corrupt.png"
    junk.write_bytes(b"\x00\x01not a media file" * 64)
    with pytest.raises(InputError, match=r"^video: expected a media file FFmpeg can decode, got 'fuzz_corrupt.png' "
                                         r"\(decoding failed after 0 video frames: "):
        list(reader.read_frames(junk))
    with pytest.raises(InputError, match=r"^clip: expected a media file FFmpeg can decode"):
        list(reader.read_frames(junk, input_name="clip"))


def test_sample_clip_has_the_promised_shape(tmp_path):
    path = make_sample_clip(tmp_path / SAMPLE_NAME, seconds=1.0)
    info = reader.probe(path)
    assert (info.width, info.height, float(info.fps), info.frame_count, info.has_audio) == (256, 448, 24.0, 24, True)
    frames = np.concatenate(list(reader.read_frames(path)))
    # Something moves (the mouth, the sway, the ticker) and the figure's skin tone is in the picture.
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).mean() > 0.5
    skin = np.abs(frames[0].astype(int) - (222, 163, 133)).sum(-1) < 12
    assert skin.mean() > 0.03
    samples, rate = reader.read_audio(path)
    assert rate == 48000 and abs(samples.shape[1] / rate - 1.0) <= 1 / 24 and np.abs(samples).max() > 0.2
