"""FFmpeg's logs never go through PyAV's Python callback while the pack decodes or encodes (engines/export/reader.py,
`quiet_ffmpeg_logs`): importing torchvision turns that callback on, and a threaded codec freed while one of its
threads logs through it deadlocks the server."""
import av.logging
import torch

from engines.export import EncodeSettings, VideoWriter, reader


def test_decoding_and_encoding_turn_the_python_log_callback_off(tmp_path):
    path = tmp_path / "clip.mp4"
    try:
        av.logging.set_level(av.logging.ERROR)      # what `import torchvision` does (torchvision/io/video.py)
        with VideoWriter(path, 24.0, settings=EncodeSettings(encoder="x264", preset="ultrafast")) as writer:
            writer.write(torch.zeros(4, 64, 64, 3))
            assert av.logging.get_level() is None
        av.logging.set_level(av.logging.ERROR)
        assert sum(c.shape[0] for c in reader.read_frames(path, frame_cap=2)) == 2   # a cap ends the decode early
        assert av.logging.get_level() is None
    finally:
        av.logging.set_level(None)
