"""engines/common: the IMAGE-batch check, the precision vocabulary and its auto policy, the loop-mode vocabulary,
collecting a renderer's chunks and handing them on unrendered (FrameStream)."""
import numpy as np
import pytest
import torch

from engines.common.errors import InputError
from engines.common.frames import FrameStream, collect_frames
from engines.common.images import ANY_CHANNELS, RGB, check_image_batch
from engines.common.loop_modes import (DITTO_LEGACY_LOOP_MODES, DITTO_LOOP_MODES, LOOP_MODES, loop_index,
                                       loop_mode_name)
from engines.common.precision import auto_precision, dtype_for, precision_name


def test_image_batch_rules_and_messages():
    batch = torch.zeros(2, 4, 5, 3)
    assert check_image_batch(batch) is batch
    assert check_image_batch(np.zeros((1, 4, 5, 4), np.uint8)).shape == (1, 4, 5, 4)
    with pytest.raises(InputError, match=r"images: expected at least one frame, got 0 frames"):
        check_image_batch(torch.zeros(0, 4, 5, 3))
    with pytest.raises(InputError, match=r"clip: expected an IMAGE batch of shape \[frames, height, width, 3\], "
                                         r"got shape \(1, 4, 5, 4\)"):
        check_image_batch(torch.zeros(1, 4, 5, 4), "clip", channels=RGB)
    with pytest.raises(InputError, match=r"height, width, 3\] or \[..., 4\] \(RGBA\), got shape \(4, 5, 3\)"):
        check_image_batch(torch.zeros(4, 5, 3))                       # one frame only where allowed
    with pytest.raises(InputError, match="tensor or array.*got list"):
        check_image_batch([1, 2])
    assert check_image_batch(torch.zeros(4, 5, 1), channels=ANY_CHANNELS, single_frame=True).shape == (1, 4, 5, 1)
    with pytest.raises(InputError, match="at least 2x2"):
        check_image_batch(torch.zeros(1, 1, 5, 3), min_size=2)


def test_precision_vocabulary_and_one_auto_policy():
    assert precision_name("bf16") == "bf16" and precision_name("bfloat16") == "bf16"   # old SAM3 spelling loads
    with pytest.raises(InputError, match="precision: expected one of auto, fp32, fp16, bf16"):
        precision_name("float64")
    assert dtype_for("fp16") is torch.float16
    assert auto_precision(torch.device("cpu"), True, True) == "fp32"
    assert auto_precision(torch.device("cuda"), True, True) == "bf16"
    assert auto_precision(torch.device("cuda"), False, True) == "fp16"
    assert auto_precision(torch.device("cuda"), False, False) == "fp32"


def test_loop_modes_share_one_vocabulary_and_keep_old_values():
    assert LOOP_MODES == ("mirror", "ping-pong", "wrap")
    assert loop_mode_name("loop") == "wrap" and loop_mode_name("ping-pong") == "ping-pong"   # MuseTalk's saves
    # Ditto's ping-pong always held the end frames: in Ditto it loads as mirror, and Ditto has no ping-pong
    ditto = dict(modes=DITTO_LOOP_MODES, legacy=DITTO_LEGACY_LOOP_MODES)
    assert loop_mode_name("ping-pong", **ditto) == "mirror" and loop_mode_name("mirror", **ditto) == "mirror"
    with pytest.raises(InputError, match="loop_mode"):
        loop_mode_name("shuffle")
    i = np.arange(9)
    assert loop_index(i, 4, "wrap").tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    assert loop_index(i, 4, "ping-pong").tolist() == [0, 1, 2, 3, 2, 1, 0, 1, 2]
    assert loop_index(i, 3, "mirror").tolist() == [0, 1, 2, 2, 1, 0, 0, 1, 2]
    assert loop_index(torch.arange(4), 1, "mirror").tolist() == [0, 0, 0, 0]


def test_collect_frames_checks_the_announced_count():
    chunks = [torch.ones(2, 3, 4, 3), torch.zeros(1, 3, 4, 3)]
    out = collect_frames(iter(chunks), 3, (3, 4, 3), torch.float32)
    assert out.shape == (3, 3, 4, 3) and out[:2].eq(1).all() and out[2].eq(0).all()
    with pytest.raises(RuntimeError, match="2 of the 3"):
        collect_frames(iter(chunks[:1]), 3, (3, 4, 3), torch.float32)
    with pytest.raises(RuntimeError, match="more than"):
        collect_frames(iter(chunks), 2, (3, 4, 3), torch.float32)


def test_frame_stream_checks_in_the_node_and_renders_anew_on_each_iteration():
    calls = []

    def make():
        calls.append(len(calls))

        def chunks():
            for k in range(3):
                yield torch.full((2, 4, 5, 3), float(len(calls) * 10 + k))
        return chunks()

    stream = FrameStream(make, frames=6, fps=25.0, source="test")
    assert calls == [0] and len(stream) == 6 and stream.fps == 25.0      # made once where the stream is made
    first = torch.cat(list(stream))
    assert calls == [0] and first.shape == (6, 4, 5, 3) and first[0, 0, 0, 0] == 10.0
    again = torch.cat(list(stream))                                       # a second export renders again
    assert calls == [0, 1] and again[0, 0, 0, 0] == 20.0

    def refuse():
        raise InputError("motion", "a motion sequence made for this avatar", "another avatar's")

    with pytest.raises(InputError, match="motion: expected a motion sequence made for this avatar"):
        FrameStream(refuse, frames=1, fps=25.0)                            # refused by the renderer's node
